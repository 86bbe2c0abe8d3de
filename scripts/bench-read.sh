#!/usr/bin/env bash
# The read benchmark of datavofs: prints, side by side from one run,
#   cold epoch  GB/s reading every shard through a fresh mount (each fill
#               fetched from nginx, verified, installed) vs `curl` downloading
#               the same shards into the same filesystem;
#   warm epochs GB/s reading them again through the mount vs reading the
#               tier files directly (dd bs=1M, both from the page cache);
#   restart     the first epoch after a daemon restart: unmounted, mounted
#               again on the same warm tier, every shard read once through
#               the new mount vs the tier files directly, in the same state
#               (the page cache may hold the tier files, but not the new
#               mount's own pages: keep_cache reads then enter the daemon).
#
# usage: scripts/bench-read.sh [TOTAL_MIB] [SHARDS]     (default 1024 MiB in 8)
# DV_BENCH_ROUNDS (default 6) rounds; the last line gives the median ratios.
# DATAVOFS=build-sys/datavofs runs the system-libfuse (keep_cache) build
# (make SYSTEM_FUSE=1 BUILD=build-sys); the default build/ is the one the
# README's commands give, passthrough where it can be. Never a pass/fail
# test: the machine is shared and noisy; it prints figures and ratios.
#
# Before each side the benchmark touches and frees 3 x TOTAL_MIB of memory,
# so that both sides find the same amount of recently used memory. On a VM
# whose balloon reports free pages to the host, memory freed more than a
# few seconds ago goes back to the host and costs about 0.35 s per 128 MiB
# to touch again. Without the prefault, whichever side needs more new pages
# (the mount: the tier file and, without passthrough, the FUSE page cache)
# pays that, and the host's figures, not datavofs', set the ratio.
# DV_BENCH_PREFAULT=0 turns it off.
#
# In a warm epoch, whichever side reads first after a pause pays extra: the
# host has meanwhile taken back some of the idle guest's memory, and with
# passthrough both sides read the very same pages. The sides take turns at
# going first, round by round, and each warm figure at the end is the
# median over pairs of rounds (one of each order) of the geometric mean of
# the pair's two ratios, which cancels a cost that falls on the first reader.
set -uo pipefail
DV_ROOT=$(cd "$(dirname "$0")/.." && pwd)
total_mib=${1:-1024}
nshards=${2:-8}
rounds=${DV_BENCH_ROUNDS:-6}
export DATAVOFS=${DATAVOFS:-$DV_ROOT/build/datavofs}
export DATAVOCTL=${DATAVOCTL:-$DV_ROOT/build/datavoctl}
# shellcheck source=tests/integration/lib.sh
. "$DV_ROOT/tests/integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need curl dd nginx python3

now() { date +%s.%N; }
gbps() { python3 -c "import sys; print('%.2f' % ($1 / 1e9 / ($3 - $2)))"; }
ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
prefault_mib=$((${DV_BENCH_PREFAULT:-1} ? 3 * total_mib : 0))
prefault() { # touches every page of prefault_mib MiB, then frees them
	[ "$prefault_mib" -gt 0 ] || return 0
	python3 -c 'import sys; n = int(sys.argv[1]) << 20; m = bytearray(n); m[::4096] = b"\1" * (n // 4096)' \
		"$prefault_mib"
}
read_all() { for f in "$@"; do dd if="$f" of=/dev/null bs=1M status=none; done; }

src=$(dv_tmp src)
origin=$(dv_tmp origin)
per=$((total_mib / nshards))
mktars "$src" "$nshards" --kb $((per * 1024)) --seed 11
publish bench/data "$src" "$origin" || bail "publish"
bytes=$(cat "$src"/*.tar | wc -c)
nginx_start "$origin" || bail "nginx"
hashes=$(python3 -c 'import json,sys; [print(s["content_hash"]) for s in json.load(open(sys.argv[1]))["shards"]]' \
	"$origin/bench/data/manifest.json")

echo "# datavofs read benchmark: $nshards shards, $((bytes >> 20)) MiB, binary $DATAVOFS"
echo "# prefault before each side: $prefault_mib MiB; $rounds rounds, medians at the end"
declare -A ratios=()
note() { ratios[$1]="${ratios[$1]:-} $2"; }
median() { python3 -c 'import statistics, sys; print("%.2f" % statistics.median(map(float, sys.argv[1:])))' $1; }
# The median over consecutive pairs of rounds of the pair's geometric mean.
pair_median() {
	python3 -c 'import math, statistics, sys
v = [float(x) for x in sys.argv[1:]]
p = [math.sqrt(a * b) for a, b in zip(v[0::2], v[1::2])] or v
print("%.2f" % statistics.median(p))' $1
}
for r in $(seq 1 "$rounds"); do
	# Both sides start with nothing dirty in the page cache: writeback of
	# the generated shards would otherwise slow whichever side runs first.
	sync
	prefault
	# curl into the filesystem the tier lives on.
	dl=$(dv_tmp curl)
	t0=$(now)
	for h in $hashes; do curl -fsS -o "$dl/$h.tar" "$NGINX_URL/shards/$h.tar"; done
	t1=$(now)
	sync
	t2=$(now)
	rm -rf "$dl"
	curl_gbps=$(gbps $bytes "$t0" "$t1")
	curl_disk=$(gbps $bytes "$t0" "$t2")

	tier=$(dv_tmp tier)
	cfg="$DV_WORK/bench$r.yaml"
	write_config "$cfg" "$tier"
	mnt=$(dv_tmp mnt)
	dv_mount "$NGINX_URL" "$mnt" "config=$cfg" >/dev/null || bail "mount"
	files=("$mnt"/bench/data/*.tar)
	sync
	prefault
	t0=$(now)
	read_all "${files[@]}"
	t1=$(now)
	sync
	t2=$(now)
	cold=$(gbps $bytes "$t0" "$t1")
	cold_disk=$(gbps $bytes "$t0" "$t2")
	echo "round $r cold epoch: datavofs $cold GB/s, curl $curl_gbps GB/s, ratio $(ratio "$cold" "$curl_gbps")" \
		"(until on disk, each side then running sync: $cold_disk vs $curl_disk GB/s, ratio $(ratio "$cold_disk" "$curl_disk"))"
	note cold "$(ratio "$cold" "$curl_gbps")"
	note cold_disk "$(ratio "$cold_disk" "$curl_disk")"

	# The first reader of an epoch pays extra (see the top): the sides
	# take turns at going first, round by round.
	direct=("$tier"/*.tar)
	for epoch in 2 3; do
		for side in $([ $((r % 2)) = 1 ] && echo mount direct || echo direct mount); do
			if [ "$side" = mount ]; then set -- "${files[@]}"; else set -- "${direct[@]}"; fi
			t0=$(now)
			read_all "$@"
			t1=$(now)
			if [ "$side" = mount ]; then warm=$(gbps $bytes "$t0" "$t1"); else dir=$(gbps $bytes "$t0" "$t1"); fi
		done
		echo "round $r warm epoch $epoch: mount $warm GB/s, direct $dir GB/s, ratio $(ratio "$warm" "$dir")" \
			"($([ $((r % 2)) = 1 ] && echo mount || echo direct) read first)"
		note "warm$epoch" "$(ratio "$warm" "$dir")"
	done
	path=$(python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(d["read_path"] + (" (%s)" % d["read_path_reason"] if d.get("read_path_reason") else ""))' "$mnt/.datavo/status")
	echo "round $r read path: $path"

	# The first epoch after a daemon restart, on the same tier: the
	# sides take turns at going first, as in the warm epochs.
	dv_umount "$mnt" >/dev/null
	dv_mount "$NGINX_URL" "$mnt" "config=$cfg" >/dev/null || bail "remount"
	ls -l "$mnt/bench/data" >/dev/null # names and sizes, before the clock
	for side in $([ $((r % 2)) = 1 ] && echo mount direct || echo direct mount); do
		if [ "$side" = mount ]; then set -- "${files[@]}"; else set -- "${direct[@]}"; fi
		t0=$(now)
		read_all "$@"
		t1=$(now)
		if [ "$side" = mount ]; then warm=$(gbps $bytes "$t0" "$t1"); else dir=$(gbps $bytes "$t0" "$t1"); fi
	done
	echo "round $r first epoch after a restart: mount $warm GB/s, direct $dir GB/s, ratio $(ratio "$warm" "$dir")" \
		"($([ $((r % 2)) = 1 ] && echo mount || echo direct) read first)"
	note restart "$(ratio "$warm" "$dir")"
	dv_umount "$mnt" >/dev/null
	rm -rf "$tier"
done
echo "median ratios ($path): cold $(median "${ratios[cold]}") (until on disk $(median "${ratios[cold_disk]}"))," \
	"warm epoch 2 $(pair_median "${ratios[warm2]}"), warm epoch 3 $(pair_median "${ratios[warm3]}")," \
	"first epoch after a restart $(pair_median "${ratios[restart]}")" \
	"(warm and restart: over pairs of rounds, one with each side reading first)"
pass "benchmark ran"
summary >/dev/null
