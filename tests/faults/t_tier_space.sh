#!/usr/bin/env bash
# tiers without room. A small tmpfs mounted by the
# test is the tier: a full tier (eviction makes room), a shard larger than
# the tier's whole filesystem (alone: ENOSPC; above a roomy tier: served
# from there, R2), and ENOSPC in the middle of a write (space taken by a
# file that is not the cache's). Each case: the reader's result, the next
# request served, every <hash>.tar of every tier matching its sha256.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum mount

[ "$(id -u)" = 0 ] || { skip "tier space faults" "mounting a tmpfs needs root"; summary; exit 0; }

src=$(dv_tmp src)
big=$(dv_tmp big)
origin=$(dv_tmp origin)
mktars "$src" 16 --kb 256 --seed 71
mktars "$big" 2 --kb 1600 --seed 72
publish space/small "$src" "$origin" || bail "publish small"
publish space/big "$big" "$origin" || bail "publish big"
fo_start "$origin" || bail "fault origin"

small=$(dv_tmp small)
mount -t tmpfs -o size=2m,mode=0755 tmpfs "$small" || bail "mount a 2 MiB tmpfs"
disk="$DV_WORK/disk"
mnt=$(dv_tmp mnt)
sh() { sha_of "$origin" "$1" "$2"; }

# --- a full tier: 16 shards of 256 KiB through a 2 MiB filesystem -------------
cfg="$DV_WORK/full.yaml"
fault_config "$cfg" "ram:$small/tier"
dv_mount "$FO_URL" "$mnt" "config=$cfg" log_level=info || bail "mount (full tier)"
bad=0
for i in $(seq 0 15); do
	s=$(printf 'shard-%06d.tar' "$i")
	expect_read "full tier: $s" "$mnt/space/small/$s" 0 10 "$(sh space/small "$s")" >/dev/null || bad=$((bad + 1))
	[ "$i" = 0 ] && first="$DV_LAST_READ"
done
assert_eq "$bad" 0 "full tier: 16 shards read through a 2 MiB tier, each correct (eviction made room)"
ev=$(grep -c "evicted" "$(dv_log "$mnt")")
[ "$ev" -gt 0 ] && pass "full tier: $ev evictions logged" || fail "full tier: no eviction logged" "$(tail -5 "$(dv_log "$mnt")")"
scan_tiers "full tier: tier scan" "$origin" "$small/tier" --no-staging
FULL_RESULT="16/16 reads correct, $ev evictions"

# --- a shard larger than the tier's free space, alone: eviction makes room ----
# (R8: the staging file's space is reserved up front, evicting if need be.)
s=shard-000000.tar
expect_read "shard larger than the tier's free space: served after eviction" "$mnt/space/big/$s" 0 10 "$(sh space/big "$s")"
BIG_ALONE="$DV_LAST_READ"
assert_eq "$(ls "$small/tier/.staging" | wc -l)" 0 "no staging file left"
expect_read "the next request is served" "$mnt/space/small/shard-000003.tar" 0 10 "$(sh space/small shard-000003.tar)"
scan_tiers "larger than free space: tier scan" "$origin" "$small/tier" --no-staging
dv_umount "$mnt"

# --- the same above a roomy tier: R2 skips the small one ----------------------
cfg2="$DV_WORK/two.yaml"
fault_config "$cfg2" "ram:$small/tier" "disk:$disk"
dv_mount "$FO_URL" "$mnt" "config=$cfg2" || bail "mount (two tiers)"
# A shard that tier 0's filesystem cannot hold is staged in the tier below.
expect_read "big shard above a roomy tier" "$mnt/space/big/$s" 0 10 "$(sh space/big "$s")"
BIG_TWO=$(timed_read "$mnt/space/big/$s" | cut -d' ' -f1-2)
expect_read "the next request is served" "$mnt/space/small/shard-000004.tar" 0 10 "$(sh space/small shard-000004.tar)"
scan_tiers "two tiers: tier scan" "$origin" "$small/tier" "$disk" --no-staging
dv_umount "$mnt"

# --- ENOSPC mid-write: the filesystem is taken by a file not the cache's -------
rm -rf "${small:?}/tier"
cfg3="$DV_WORK/midwrite.yaml"
fault_config "$cfg3" "ram:$small/tier"
dv_mount "$FO_URL" "$mnt" "config=$cfg3" || bail "mount (ENOSPC mid-write)"
head -c $((1900 * 1024)) /dev/zero >"$small/filler" 2>/dev/null
echo "# tmpfs: $(df -k "$small" | tail -1)"
t=shard-000005.tar
expect_read "ENOSPC mid-write: the reader gets ENOSPC" "$mnt/space/small/$t" ENOSPC 10
MID="$DV_LAST_READ"
assert_eq "$(ls "$small/tier/.staging" | wc -l)" 0 "ENOSPC mid-write: the partial staging file is removed"
h=$(hash_of "$origin" space/small "$t")
[ -e "$small/tier/$h.tar" ] && fail "ENOSPC mid-write: nothing is installed" || pass "ENOSPC mid-write: nothing is installed"
if grep -q "No space left on device" "$(dv_log "$mnt")"; then pass "ENOSPC mid-write: the log says so"; else fail "ENOSPC mid-write: the log says so" "$(tail -5 "$(dv_log "$mnt")")"; fi
rm -f "$small/filler"
expect_read "ENOSPC mid-write: once space is back the same shard is served" "$mnt/space/small/$t" 0 10 "$(sh space/small "$t")"
scan_tiers "ENOSPC mid-write: tier scan" "$origin" "$small/tier" --no-staging
dv_umount "$mnt"

if [ -n "${DV_FAULT_REPORT:-}" ]; then
	{
		echo "full tier (2 MiB tmpfs, 16 x 256 KiB)|-|$FULL_RESULT|-"
		echo "shard larger than the tier's free space (1.6 MiB shard, 2 MiB tmpfs)|-|$BIG_ALONE|-"
		echo "same, with a roomy tier below|-|$BIG_TWO|-"
		echo "ENOSPC mid-write (tmpfs filled by another file)|-|$MID|-"
	} >>"$DV_FAULT_REPORT"
fi
summary
