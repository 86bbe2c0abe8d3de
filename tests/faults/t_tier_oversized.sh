#!/usr/bin/env bash
# A shard larger than a tier's whole filesystem must not empty the tier.
# A 64 MiB tmpfs is tier 0 (max_bytes 64 MiB) and holds 12 shards of 4 MiB;
# then a shard of 100 MiB is opened. Before the fix eviction went on until
# the tier was empty, and the open failed anyway. Now: alone, the open fails
# with ENOSPC and all 12 stay; above a roomy disk tier, it is served from
# there (R2) and all 12 stay. Either way nothing is left in .staging, and a
# cached shard is then served with no origin request.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum mount

[ "$(id -u)" = 0 ] || { skip "oversized shard" "mounting a tmpfs needs root"; summary; exit 0; }

src=$(dv_tmp src)
big=$(dv_tmp big)
origin=$(dv_tmp origin)
mktars "$src" 12 --kb 4000 --seed 81
mktars "$big" 1 --kb 102400 --seed 82
publish over/small "$src" "$origin" || bail "publish small"
publish over/big "$big" "$origin" || bail "publish big"
fo_start "$origin" || bail "fault origin"

small=$(dv_tmp small)
mount -t tmpfs -o size=64m,mode=0755 tmpfs "$small" || bail "mount a 64 MiB tmpfs"
disk="$DV_WORK/disk"
mnt=$(dv_tmp mnt)
s=shard-000000.tar
bigsha=$(sha_of "$origin" over/big "$s")

# fill_small: reads the 12 small shards through $mnt, each correct.
fill_small() {
	local bad=0 i f
	for i in $(seq 0 11); do
		f=$(printf 'shard-%06d.tar' "$i")
		[ "$(timed_read "$mnt/over/small/$f" | cut -d' ' -f3)" = "$(sha_of "$origin" over/small "$f")" ] || bad=$((bad + 1))
	done
	assert_eq "$bad" 0 "$1: 12 shards of 4 MiB read, each correct"
	assert_eq "$(find "$small/tier" -maxdepth 1 -name '*.tar' | wc -l)" 12 "$1: all 12 cached in tier 0"
}

# kept NAME: the 12 are still in tier 0, whole, and nothing is staged.
kept() {
	assert_eq "$(find "$small/tier" -maxdepth 1 -name '*.tar' | wc -l)" 12 "$1: all 12 shards still in tier 0"
	assert_eq "$(grep -c "evicted" "$(dv_log "$mnt")")" 0 "$1: nothing evicted"
	assert_eq "$(find "$small/tier/.staging" -type f | wc -l)" 0 "$1: nothing left in tier 0's .staging"
	scan_tiers "$1: tier 0 scan" "$origin" "$small/tier" --no-staging
	local before after
	before=$(fo_count "GET /shards/")
	expect_read "$1: a cached shard is served" "$mnt/over/small/shard-000003.tar" 0 60 "$(sha_of "$origin" over/small shard-000003.tar)"
	after=$(fo_count "GET /shards/")
	assert_eq "$after" "$before" "$1: ... with no origin request"
}

# --- tier 0 alone: ENOSPC, the cache kept ------------------------------------
cfg="$DV_WORK/alone.yaml"
fault_config "$cfg" "ram:$small/tier:64MiB"
dv_mount "$FO_URL" "$mnt" "config=$cfg" log_level=info || bail "mount (alone)"
fill_small "alone"
h=$(hash_of "$origin" over/big "$s")
expect_read "alone: the 100 MiB shard fails with ENOSPC" "$mnt/over/big/$s" ENOSPC 300
ALONE="$DV_LAST_READ"
assert_eq "$(fo_count "GET /shards/$h")" 0 "alone: no folder tier can stage it, so it is not fetched"
kept "alone"
dv_umount "$mnt"

# --- above a roomy disk tier: served from there, the cache kept ---------------
rm -rf "${small:?}/tier"
cfg2="$DV_WORK/two.yaml"
fault_config "$cfg2" "ram:$small/tier:64MiB" "disk:$disk"
dv_mount "$FO_URL" "$mnt" "config=$cfg2" log_level=info || bail "mount (two tiers)"
fill_small "two tiers"
expect_read "two tiers: the 100 MiB shard is served from the disk tier" "$mnt/over/big/$s" 0 300 "$bigsha"
TWO="$DV_LAST_READ"
if [ -f "$disk/$h.tar" ]; then pass "two tiers: the big shard is in the disk tier"; else fail "two tiers: the big shard is in the disk tier" "$(ls "$disk")"; fi
if grep -q "skipping .*larger than its max_bytes" "$(dv_log "$mnt")"; then pass "two tiers: tier 0 skipped with a warning (R2)"; else fail "two tiers: tier 0 skipped with a warning (R2)" "$(tail -5 "$(dv_log "$mnt")")"; fi
kept "two tiers"
assert_eq "$(find "$disk/.staging" -type f | wc -l)" 0 "two tiers: nothing left in the disk tier's .staging"
dv_umount "$mnt"
umount "$small"

if [ -n "${DV_FAULT_REPORT:-}" ]; then
	{
		echo "shard larger than the tier's filesystem (100 MiB shard, 64 MiB tmpfs holding 12 x 4 MiB)|-|$ALONE; 12/12 kept|-"
		echo "same, with a roomy tier below|-|$TWO from the disk tier; 12/12 kept|-"
	} >>"$DV_FAULT_REPORT"
fi
summary
