#!/usr/bin/env bash
# two daemons and sixteen readers on shared tiers with
# eviction pressure. Both mounts use the same two tier directories, far
# smaller than the dataset (tier 0: 4 shards, tier 1: 12 of 32), so every
# fill evicts; sixteen readers (eight per mount) read random shards whole,
# each compared with the manifest's sha256. Then: no wrong byte, no error,
# both daemons serve, every <hash>.tar in both tiers matches its sha256.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 32 --kb 256 --seed 99
publish shared/set "$src" "$origin" || bail "publish"
fo_start "$origin" || bail "fault origin"
t0="$DV_WORK/t0"
t1="$DV_WORK/t1"
cfg="$DV_WORK/shards.yaml"
# Sizes of the tars are a little over 256 KiB: 4 and 12 shards' worth.
fault_config "$cfg" "fast:$t0:1100KiB" "slow:$t1:3300KiB"
m1=$(dv_tmp mnt1)
m2=$(dv_tmp mnt2)
dv_mount "$FO_URL" "$m1" "config=$cfg" log_level=info || bail "mount 1"
dv_mount "$FO_URL" "$m2" "config=$cfg" log_level=info || bail "mount 2"

out=$(python3 "$FAULTS_DIR/readers.py" --origin "$origin" --dataset shared/set \
	--mounts "$m1,$m2" --readers 16 --reads "${DV_SHARED_READS:-12}" --mode full --seed 5 2>&1)
SHARED="${out%%$'\n'*}"
if grep -q 'wrong reads 0 (wrong bytes 0)' <<<"$out"; then
	pass "sixteen readers on two daemons: no wrong byte (${out%%$'\n'*})"
else
	fail "sixteen readers on two daemons: no wrong byte" "$out"
fi
# Before the fix in hierarchy.c (open_installed), a shard installed by one
# fill could be evicted by another (this daemon's, or the other daemon's,
# whose pins it cannot see) before it was opened, and the reader got ENOENT.
grep -q ' errors 0 ' <<<"$out" && pass "no reader saw an error" || fail "no reader saw an error" "$out"
ev=$(cat "$(dv_log "$m1")" "$(dv_log "$m2")" | grep -c "evicted")
[ "$ev" -gt 10 ] && pass "eviction pressure: $ev evictions" || fail "eviction pressure" "only $ev evictions"
fills=$(fo_count "GET /shards/")
echo "# $fills origin shard GETs for $((16 * ${DV_SHARED_READS:-12})) opens"
expect_read "daemon 1 serves the next request" "$m1/shared/set/shard-000000.tar" 0 10 "$(sha_of "$origin" shared/set shard-000000.tar)"
expect_read "daemon 2 serves the next request" "$m2/shared/set/shard-000001.tar" 0 10 "$(sha_of "$origin" shared/set shard-000001.tar)"
dv_umount_ok "$m1" "daemon 1 unmounts cleanly"
dv_umount_ok "$m2" "daemon 2 unmounts cleanly"
scan_tiers "shared tiers: scan" "$origin" "$t0" "$t1" --no-staging
assert_eq "$(find "$t0/.locks" "$t1/.locks" -type f | wc -l)" 0 "no lock left behind"
for t in "$t0" "$t1"; do
	du=$(find "$t" -maxdepth 1 -name '*.tar' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	echo "# $t holds $du bytes"
done
if [ -n "${DV_FAULT_REPORT:-}" ]; then
	echo "two daemons, 16 readers, shared tiers of 4 and 12 of 32 shards|-|$SHARED; $ev evictions, $fills GETs|-" >>"$DV_FAULT_REPORT"
fi
summary
