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
#   transports  daemon-served reads (-o no_passthrough, a new mount on the
#               warm tier, so that every read enters the daemon) over
#               /dev/fuse vs FUSE over io_uring: buffered (dd bs=1M) and
#               O_DIRECT (dd bs=4M iflag=direct). The benchmark sets the fuse
#               module's enable_uring for its run and puts back the value it
#               found; without io_uring (kernel, libfuse) it says why.
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

# FUSE over io_uring needs the fuse module's enable_uring: set for the run.
uring_param=/sys/module/fuse/parameters/enable_uring
uring_prev=""
if [ -w "$uring_param" ]; then
	uring_prev=$(cat "$uring_param")
	trap 'rc=$?; trap - EXIT; (exit $rc); (_dv_cleanup); rc=$?; echo "$uring_prev" >"$uring_param"; exit $rc' EXIT
	echo Y >"$uring_param"
fi
# The daemon decides before it looks for an origin: with none given, it
# stops there, or earlier, saying why io_uring cannot be had.
write_config "$DV_WORK/probe.yaml" "$DV_WORK/probe-tier"
uring_why=$(env -u DATAVO_ORIGIN "$DATAVOFS" "$DV_WORK/probe-mnt" -o fuse_io_uring=on,config="$DV_WORK/probe.yaml" 2>&1 |
	grep -o 'fuse_io_uring is on, but .*' || true)

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
# transports ROUND CFG MNT FILE...: daemon-served reads of FILEs (paths in
# MNT) over /dev/fuse and io_uring, each side in a new mount on the warm
# tier (nothing of the mount cached), the sides taking turns at going first.
transports() {
	local r=$1 cfg=$2 mnt=$3 side how t0 t1 f
	local -A g=()
	shift 3
	for side in $([ $((r % 2)) = 1 ] && echo off on || echo on off); do
		for how in buf dio; do
			dv_mount "$NGINX_URL" "$mnt" "config=$cfg" no_passthrough "fuse_io_uring=$side" >/dev/null ||
				bail "mount fuse_io_uring=$side"
			ls -l "$mnt/bench/data" >/dev/null
			t0=$(now)
			for f in "$@"; do
				if [ "$how" = dio ]; then
					dd if="$f" of=/dev/null bs=4M iflag=direct status=none
				else
					dd if="$f" of=/dev/null bs=1M status=none
				fi
			done
			t1=$(now)
			g[$side$how]=$(gbps $bytes "$t0" "$t1")
			dv_umount "$mnt" >/dev/null
		done
	done
	echo "round $r transports, daemon-served reads: buffered /dev/fuse ${g[offbuf]} GB/s, io_uring ${g[onbuf]} GB/s," \
		"ratio $(ratio "${g[onbuf]}" "${g[offbuf]}"); O_DIRECT /dev/fuse ${g[offdio]} GB/s, io_uring ${g[ondio]} GB/s," \
		"ratio $(ratio "${g[ondio]}" "${g[offdio]}") ($([ $((r % 2)) = 1 ] && echo /dev/fuse || echo io_uring) read first)"
	note t_buf "$(ratio "${g[onbuf]}" "${g[offbuf]}")"
	note t_dio "$(ratio "${g[ondio]}" "${g[offdio]}")"
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
	[ -z "$uring_why" ] && transports "$r" "$cfg" "$mnt" "${files[@]}"
	rm -rf "$tier"
done
if [ -n "$uring_why" ]; then
	echo "transports: io_uring not measured: ${uring_why#fuse_io_uring is on, but }"
else
	echo "median transport ratios (io_uring / /dev/fuse, daemon-served reads): buffered $(pair_median "${ratios[t_buf]}")," \
		"O_DIRECT $(pair_median "${ratios[t_dio]}") (over pairs of rounds, one with each side reading first)"
fi
echo "median ratios ($path): cold $(median "${ratios[cold]}") (until on disk $(median "${ratios[cold_disk]}"))," \
	"warm epoch 2 $(pair_median "${ratios[warm2]}"), warm epoch 3 $(pair_median "${ratios[warm3]}")," \
	"first epoch after a restart $(pair_median "${ratios[restart]}")" \
	"(warm and restart: over pairs of rounds, one with each side reading first)"
pass "benchmark ran"
summary >/dev/null
