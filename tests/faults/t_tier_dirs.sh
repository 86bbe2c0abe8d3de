#!/usr/bin/env bash
# the tier directory changed under a running daemon:
# made read-only (a read-only bind mount: root ignores mode bits), deleted,
# replaced by an empty directory. Each case: the reader's result, the next
# request served, every <hash>.tar of every tier matching its sha256.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum mount

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 16 --kb 256 --seed 91
publish dirs/set "$src" "$origin" || bail "publish"
fo_start "$origin" || bail "fault origin"
t0="$DV_WORK/t0"
t1="$DV_WORK/t1"
mnt=$(dv_tmp mnt)
name() { printf 'shard-%06d.tar' "$1"; }
sh() { sha_of "$origin" dirs/set "$(name "$1")"; }
hs() { hash_of "$origin" dirs/set "$(name "$1")"; }
rd() { expect_read "$1" "$mnt/dirs/set/$(name "$2")" "$3" "${4:-10}" "$(sh "$2")"; }

# --- read-only ------------------------------------------------------------------
if [ "$(id -u)" = 0 ]; then
	cfg="$DV_WORK/one.yaml"
	fault_config "$cfg" "local:$t0"
	dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "mount"
	rd "warm shard 0" 0 0 >/dev/null
	mount --bind "$t0" "$t0" && mount -o remount,bind,ro "$t0" || bail "read-only bind mount"
	rd "read-only tier: a cached shard is still served" 0 0
	RO_CACHED="$DV_LAST_READ"
	rd "read-only tier, the only one: a cold shard fails with EROFS" 1 EROFS
	RO_COLD="$DV_LAST_READ"
	umount "$t0"
	rd "read-only tier made writable again: the cold shard is served" 1 0
	scan_tiers "read-only: tier scan" "$origin" "$t0" --no-staging
	dv_umount "$mnt"

	cfg2="$DV_WORK/two.yaml"
	fault_config "$cfg2" "fast:$t0" "slow:$t1"
	dv_mount "$FO_URL" "$mnt" "config=$cfg2" || bail "mount (two tiers)"
	mount --bind "$t0" "$t0" && mount -o remount,bind,ro "$t0" || bail "read-only bind mount"
	rd "read-only tier 0 above a writable tier: a cold shard is served" 2 0
	RO_TWO="$DV_LAST_READ"
	[ -e "$t1/$(hs 2).tar" ] && pass "it landed in tier 1" || fail "it landed in tier 1"
	umount "$t0"
	rd "tier 0 writable again: the next request is served" 3 0
	scan_tiers "read-only tier 0: tier scan" "$origin" "$t0" "$t1" --no-staging
	dv_umount "$mnt"
else
	skip "read-only tier" "needs root for a read-only bind mount"
fi

# --- deleted ----------------------------------------------------------------------
rm -rf "$t0" "$t1"
cfg="$DV_WORK/one.yaml"
fault_config "$cfg" "local:$t0"
dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "mount"
rd "warm shard 4" 4 0 >/dev/null
rd "warm shard 5" 5 0 >/dev/null
exec 7<"$mnt/dirs/set/$(name 5)"
rm -rf "$t0"
rd "tier deleted: a shard that was cached is fetched again" 4 0
DEL_CACHED="$DV_LAST_READ"
rd "tier deleted: a cold shard is served" 6 0
DEL_COLD="$DV_LAST_READ"
got=$(sha256sum <&7 | cut -d' ' -f1)
exec 7<&-
assert_eq "$got" "$(sh 5)" "tier deleted: a file open before the deletion still reads right"
[ -d "$t0/.staging" ] && pass "tier deleted: the directory is made again (R12)" || fail "tier deleted: the directory is made again (R12)"
scan_tiers "deleted: tier scan" "$origin" "$t0" --no-staging

# --- replaced by an empty directory -------------------------------------------------
mv "$t0" "$DV_WORK/t0.old"
mkdir "$t0"
rd "tier replaced by an empty directory: a shard cached in the old one is fetched again" 4 0
REP="$DV_LAST_READ"
rd "tier replaced: a cold shard is served" 7 0
scan_tiers "replaced: tier scan (new and old directory)" "$origin" "$t0" "$DV_WORK/t0.old" --no-staging

# --- replaced by a directory holding valid shards (moved back) -----------------------
rm -rf "$t0"
mv "$DV_WORK/t0.old" "$t0"
# t0.old was the directory made again after the deletion: it holds shard 6.
before=$(fo_count "GET /shards/$(hs 6)")
rd "tier replaced by a directory that holds the shard: served from it" 6 0
assert_eq "$(fo_count "GET /shards/$(hs 6)")" "$before" "  ... with no origin request"
scan_tiers "moved back: tier scan" "$origin" "$t0" --no-staging
dv_umount_ok "$mnt" "the daemon unmounts cleanly"

if [ -n "${DV_FAULT_REPORT:-}" ]; then
	{
		echo "tier made read-only (ro bind mount): cached shard|-|${RO_CACHED:-skipped}|-"
		echo "tier made read-only, the only tier: cold shard|-|${RO_COLD:-skipped}|-"
		echo "tier 0 made read-only above a writable tier: cold shard|-|${RO_TWO:-skipped}|-"
		echo "tier directory deleted: shard that was cached / cold shard|-|$DEL_CACHED / $DEL_COLD (directory made again)|-"
		echo "tier directory replaced by an empty one|-|$REP (refetched)|-"
	} >>"$DV_FAULT_REPORT"
fi
summary
