#!/usr/bin/env bash
# The stripe tier benchmark. Prints, side by side
# from one run, every byte read back checked against its SHA-256:
#
#   1. the tier's O_DIRECT read GB/s over 1, 2 and 4 devices (dv-stripe
#      read: two readers, each reading one chunk per device at a time, all
#      in flight, into one reused buffer) vs the devices' own limit measured in the same
#      run: one `dd iflag=direct bs=4M` per device, all at once, over as
#      many bytes; twice: on files on disk (which share that disk), and on
#      loop devices backed by tmpfs files (where the engine's own CPU cost
#      shows). Each figure is the best of DV_BENCH_ROUNDS rounds, dd and the
#      tier alternating; "first" is the first read after a restart (every
#      chunk's xxh3 checked), "read" the steady state;
#   2. GB/s through the mount for a stripe-tier shard, one reader of 1 MiB
#      read()s, vs `dd iflag=direct` on the same four loop devices (over
#      files on disk, with direct I/O, and over tmpfs files), side by side,
#      with the mount's kernel read-ahead as it is and raised for the
#      measurement; then the same shard in a folder tier (a fresh mount
#      each: the kernel's page cache of the mount starts empty; the folder
#      file's own page cache is dropped first).
#
# usage: scripts/bench-stripe.sh [TOTAL_MIB]   (default 1024: bytes per pool)
# Environment: DATAVOFS, DV_STRIPE_TOOL (default: next to DATAVOFS),
# DV_BENCH_ROUNDS (3), DV_BENCH_SHARD_MIB (192), DV_BENCH_RA_KB (16384),
# DV_BENCH_PARTS (all; "mount": part 2's stripe rows only), TMPDIR (where the disk
# files go). Loop devices need root; without it part 1b and the loop rows
# are skipped. Never a pass/fail test: the machine is shared and noisy.
set -uo pipefail
DV_ROOT=$(cd "$(dirname "$0")/.." && pwd)
total_mib=${1:-1024}
rounds=${DV_BENCH_ROUNDS:-3}
shard_mib=${DV_BENCH_SHARD_MIB:-192}
parts=${DV_BENCH_PARTS:-all}
export DATAVOFS=${DATAVOFS:-$DV_ROOT/build/datavofs}
export DATAVOCTL=${DATAVOCTL:-$DV_ROOT/build/datavoctl}
# shellcheck source=tests/integration/lib.sh
. "$DV_ROOT/tests/integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/stripe_lib.sh
. "$DV_ROOT/tests/integration/stripe_lib.sh"
dv_need dd python3 sha256sum
[ -x "$DV_STRIPE_TOOL" ] || bail "no $DV_STRIPE_TOOL: make $(basename "$DV_STRIPE_TOOL")"

objects=4
obj_mib=$((total_mib / objects))
bytes=$((obj_mib * objects * 1024 * 1024))
dev_mib=$((total_mib + 64))
gbps() { python3 -c "import sys; print('%.2f' % ($1 / 1e9 / ($3 - $2)))"; }
best() { printf '%s\n' "$@" | sort -g | tail -1; }
ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

# dd_all DEV…: every device read at once, bytes/N each; prints GB/s.
dd_all() {
	local n=$# per count t0 t1 d
	per=$((bytes / n))
	count=$((per / (4 << 20)))
	t0=$(date +%s.%N)
	for d in "$@"; do
		dd if="$d" of=/dev/null iflag=direct bs=4M count="$count" status=none &
	done
	wait
	t1=$(date +%s.%N)
	gbps $((count * (4 << 20) * n)) "$t0" "$t1"
}

# pool_rows KIND DEV…: for 1, 2 and 4 of DEV…, a pool, then the rounds.
pool_rows() {
	local kind=$1 n st out dds firsts reads sum_ok r d_gb
	shift
	for n in 1 2 4; do
		[ $# -ge $n ] || continue
		st=$(dv_tmp "state-$kind-$n")
		if ! out=$(stripe_tool fill --state "$st" --size "${obj_mib}MiB" --objects $objects "${@:1:$n}" 2>&1); then
			fail "fill $kind x$n" "$out"
			continue
		fi
		dds=() firsts=() reads=() sum_ok=1
		for ((r = 0; r < rounds; r++)); do
			d_gb=$(dd_all "${@:1:$n}")
			dds+=("$d_gb")
			out=$(stripe_tool read --state "$st" "${@:1:$n}" 2>&1)
			case "$out" in *sha256=ok*) ;; *) sum_ok=0; echo "# $out" ;; esac
			firsts+=("$(field first_read_gbps "$out")")
			reads+=("$(field read_gbps "$out")")
		done
		[ $sum_ok = 1 ] || { fail "$kind x$n: bytes read back do not match their SHA-256"; continue; }
		printf '%-22s %2d devices   dd %6s GB/s   stripe read %6s GB/s (%s x)   first read %6s GB/s (%s x)   sha256 ok\n' \
			"$kind" "$n" "$(best "${dds[@]}")" "$(best "${reads[@]}")" \
			"$(ratio "$(best "${reads[@]}")" "$(best "${dds[@]}")")" \
			"$(best "${firsts[@]}")" "$(ratio "$(best "${firsts[@]}")" "$(best "${dds[@]}")")"
	done
}

echo "# datavofs stripe benchmark: $total_mib MiB per pool in $objects objects, 4 MiB chunks, best of $rounds rounds"
echo "# $(nproc) CPUs, $(uname -r); tool $DV_STRIPE_TOOL"

if [ "$parts" != mount ]; then
# --- 1a. files on disk -------------------------------------------------------
files=()
for i in 0 1 2 3; do
	f="$DV_WORK/disk$i.img"
	truncate -s "${dev_mib}M" "$f" || bail "truncate $f"
	files+=("$f")
done
echo "# files on disk: $(df -h --output=source,fstype "$DV_WORK" | tail -1)"
pool_rows "files on disk" "${files[@]}"
rm -f "${files[@]}"

# --- 1b. loop devices over tmpfs files ---------------------------------------
loops=()
if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null; then
	shm=$(mktemp -d /dev/shm/dv-bench-stripe.XXXXXX) || bail "mktemp in /dev/shm"
	stripe_remove_later "$shm"
	for i in 0 1 2 3; do
		d=$(loop_attach "$shm/dev$i" "$dev_mib") || bail "losetup"
		loops+=("$d")
	done
	echo "# loop devices over tmpfs: ${loops[*]}"
	pool_rows "tmpfs loop devices" "${loops[@]}"
else
	skip "loop devices over tmpfs" "needs root"
fi
fi # parts

# --- 2. through the mount: the stripe tier vs dd on the same devices -------
# Four loop devices each time: over files on disk (direct I/O, so that dd and
# the tier both reach the disk, not the backing file's page cache), and over
# tmpfs files (what fast NVMe drives look like to this path). dd reads all
# four at once, each a quarter of the shard's bytes: the devices' own limit.
src=$(dv_tmp src)
origin=$(dv_tmp origin)
blob=$(dv_tmp blob)
head -c "${shard_mib}M" /dev/urandom >"$blob/sample.bin"
tar -cf "$src/shard-000000.tar" -C "$blob" sample.bin || bail "tar"
rm -rf "$blob"
publish bench/one "$src" "$origin" || bail "publish"
want=$(sha256sum <"$src/shard-000000.tar" | cut -d' ' -f1)
hash=$(shard_field "$origin" bench/one shard-000000.tar content_hash)
mnt=$(dv_tmp mnt)
f="$mnt/bench/one/shard-000000.tar"

# mount_read NAME CONFIG [FOLDER [ROUNDS]]: a fresh mount a round, one timed
# read of the shard through it (sha256 checked after; the shard's page cache
# in FOLDER dropped first); sets MOUNT_GBPS (the best round), MOUNT_TIER,
# MOUNT_PATH.
mount_read() {
	local name=$1 cfgf=$2 tier=${3:-} n=${4:-$rounds} out bests=() r
	MOUNT_GBPS=0 MOUNT_TIER=? MOUNT_PATH=?
	for ((r = 0; r < n; r++)); do
		dv_mount "file://$origin" "$mnt" "config=$cfgf" >/dev/null || return 1
		# A measurement only: the mount's own read-ahead is fs/'s to set.
		[ -n "${MOUNT_RA_KB:-}" ] &&
			echo "$MOUNT_RA_KB" >"/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb"
		[ -n "$tier" ] && [ -f "$tier/$hash.tar" ] &&
			python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$tier/$hash.tar"
		out=$(stripe_tool readfile "$f" "$want" 2>&1) || { fail "$name: $out"; dv_umount "$mnt"; return 1; }
		MOUNT_TIER=$(getfattr --only-values -n user.datavo.tier "$f" 2>/dev/null)
		MOUNT_PATH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("read_path", "?"))' "$mnt/.datavo/status" 2>/dev/null)
		dv_umount "$mnt" >/dev/null
		bests+=("$(field gbps "$out")")
	done
	MOUNT_GBPS=$(best "${bests[@]}")
}

# mount_row NAME CONFIG [FOLDER]: mount_read, printed as a row.
mount_row() {
	mount_read "$@" || return 1
	printf '%-44s %6s GB/s   (served by tier %s, read path %s, sha256 ok)\n' \
		"$1" "$MOUNT_GBPS" "$MOUNT_TIER" "$MOUNT_PATH"
}

warm_up() { # CONFIG: one cold read fills the tiers
	dv_mount "file://$origin" "$mnt" "config=$1" >/dev/null || bail "mount $1"
	stripe_tool readfile "$f" "$want" >/dev/null || fail "fill through $1"
	dv_umount "$mnt" >/dev/null
}

# stripe_vs_dd LABEL DEV…: dd on DEV…, then the shard through a stripe tier
# on them, rounds alternating; one row with both and their ratio: with the
# kernel's read-ahead for the mount as it is (128 KiB: one FUSE read in
# flight at a time), and raised to DV_BENCH_RA_KB (16384) for the mount.
stripe_vs_dd() {
	local label=$1 cfg dds=() gbs=() ras=() r saved_bytes=$bytes
	shift
	cfg="$DV_WORK/stripe-$#-$RANDOM.yaml"
	{
		echo "state_dir: $(dv_tmp "mstate-$RANDOM")"
		echo "tiers:"
		echo "  - name: nvme"
		echo "    type: stripe"
		echo "    format: true"
		echo "    devices: [$(IFS=,; echo "$*" | sed 's/,/, /g')]"
		echo "  - name: local"
		echo "    path: $(dv_tmp "folder-$RANDOM")"
	} >"$cfg"
	warm_up "$cfg"
	bytes=$((shard_mib << 20))
	for ((r = 0; r < rounds; r++)); do
		dds+=("$(dd_all "$@")")
		mount_read "$label" "$cfg" "" 1 || { bytes=$saved_bytes; return 1; }
		gbs+=("$MOUNT_GBPS")
		MOUNT_RA_KB=$ra_kb mount_read "$label" "$cfg" "" 1 || { bytes=$saved_bytes; return 1; }
		ras+=("$MOUNT_GBPS")
	done
	bytes=$saved_bytes
	[ "$MOUNT_TIER" = nvme ] || fail "$label: served by tier '$MOUNT_TIER', not the stripe tier"
	printf '%-36s dd %6s GB/s   mount %6s GB/s (%s x dd)   mount, read-ahead %s KiB %6s GB/s (%s x dd)   served by %s, sha256 ok\n' \
		"$label" "$(best "${dds[@]}")" "$(best "${gbs[@]}")" \
		"$(ratio "$(best "${gbs[@]}")" "$(best "${dds[@]}")")" "$ra_kb" \
		"$(best "${ras[@]}")" "$(ratio "$(best "${ras[@]}")" "$(best "${dds[@]}")")" "$MOUNT_TIER"
}

ra_kb=${DV_BENCH_RA_KB:-16384}
max_read_kib=$(($(cat /proc/sys/fs/fuse/max_pages_limit 2>/dev/null || echo 256) * 4))
echo "# through the mount: one ${shard_mib} MiB shard, 1 MiB read()s by one reader, FUSE requests up to $((max_read_kib > 1024 ? 1024 : max_read_kib)) KiB or the kernel's max_pages_limit (${max_read_kib} KiB)"
if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null; then
	dloops=()
	for i in 0 1 2 3; do
		d=$(loop_attach "$DV_WORK/m$i.img" "$((shard_mib + 64))") || bail "losetup"
		losetup --direct-io=on "$d" 2>/dev/null || echo "# $d: no direct I/O to its file: dd and the tier may read its page cache"
		dloops+=("$d")
	done
	stripe_vs_dd "4 loop devices over files on disk" "${dloops[@]}"
	tloops=()
	shm2=$(mktemp -d /dev/shm/dv-bench-stripe-m.XXXXXX) || bail "mktemp in /dev/shm"
	stripe_remove_later "$shm2"
	for i in 0 1 2 3; do
		d=$(loop_attach "$shm2/m$i" "$((shard_mib + 64))") || bail "losetup"
		tloops+=("$d")
	done
	stripe_vs_dd "4 loop devices over tmpfs" "${tloops[@]}"
else
	skip "stripe tier through the mount on loop devices" "needs root"
fi
if [ "$parts" != mount ]; then
	folder="$DV_WORK/folder-disk"
	cfgf="$DV_WORK/folder.yaml"
	printf 'state_dir: %s\ntiers:\n  - name: local\n    path: %s\n' "$DV_WORK/fstate" "$folder" >"$cfgf"
	warm_up "$cfgf"
	mount_row "folder tier on disk, page cache dropped" "$cfgf" "$folder"
	mount_row "folder tier on disk, page cache warm" "$cfgf"
	if [ -d /dev/shm ]; then
		ram=$(mktemp -d /dev/shm/dv-bench-ram.XXXXXX) && stripe_remove_later "$ram"
		printf 'state_dir: %s\ntiers:\n  - name: ram\n    path: %s\n' "$DV_WORK/rstate" "$ram" >"$DV_WORK/ram.yaml"
		warm_up "$DV_WORK/ram.yaml"
		mount_row "folder tier in /dev/shm" "$DV_WORK/ram.yaml"
	fi
fi
pass "benchmark ran"
summary
