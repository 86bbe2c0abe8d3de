#!/usr/bin/env bash
# SIGKILL in the middle of a stripe install (half its
# chunks written and durable, its index entry not yet): the next mount
# serves every shard committed before it from the stripe tier, with no
# origin GET, and no partial one: the interrupted shard is a miss, fetched
# again and verified. Stale staging files of the dead daemon are cleaned
# (B4). The install is held mid-way by the DATAVO_TEST_STRIPE_STALL hook.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/stripe_lib.sh
. "$DV_ROOT/tests/integration/stripe_lib.sh"
dv_need losetup python3 sha256sum getfattr

[ "$(id -u)" = 0 ] || { skip "stripe crash over loop devices" "needs root for losetup"; summary; exit 0; }

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 6 --kb 6000 --seed 5
publish demo/c "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
devs=()
for i in 0 1 2 3; do
	devs+=("$(loop_attach "$DV_WORK/disk$i.img" 64)") || bail "losetup of disk $i"
done
cfg="$DV_WORK/shards.yaml"
tier="$DV_WORK/tier"
stripe_config "$cfg" "$DV_WORK/state" "$tier" "${devs[@]}"
mnt=$(dv_tmp mnt)
d="$mnt/demo/c"
sum() { sha256sum <"$1" 2>/dev/null | cut -d' ' -f1; }

export DATAVO_TEST_STRIPE_STALL="$DV_WORK/stall"
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "mount"
ok=1
for i in 0 1 2 3; do
	n=$(printf 'shard-%06d.tar' "$i")
	[ "$(sum "$d/$n")" = "$(sum "$src/$n")" ] || ok=0
done
[ $ok = 1 ] && pass "four shards read and committed" || fail "four shards read and committed"
assert_eq "$(tiers_of "$src" "$d")" "2  4 nvme" "four shards in the stripe tier, two nowhere"

# Arm the hook, read a fifth shard, kill the daemon while it installs it.
touch "$DATAVO_TEST_STRIPE_STALL"
sha256sum "$d/shard-000004.tar" >/dev/null 2>&1 &
reader=$!
for ((i = 0; i < 200; i++)); do
	[ -e "$DATAVO_TEST_STRIPE_STALL.stalled" ] && break
	sleep 0.1
done
[ -e "$DATAVO_TEST_STRIPE_STALL.stalled" ] || bail "the install never reached the hook" "$(tail -20 "$(dv_log "$mnt")")"
pass "the daemon is half way through a stripe install"
daemon=$(dv_pid "$mnt")
kill -KILL "$daemon"
{ wait "$daemon"; } 2>/dev/null
wait "$reader" 2>/dev/null
dv_umount "$mnt" 2>/dev/null
unset DATAVO_TEST_STRIPE_STALL
rm -f "$DV_WORK/stall" "$DV_WORK/stall.stalled"
assert_eq "$(nginx_count 'GET /shards/')" 5 "five origin GETs before the crash"
echo "# staging files left by the killed daemon: $(find "$tier/.staging" -type f | wc -l)"

# --- the next mount ---------------------------------------------------------
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "remount"
assert_eq "$(find "$tier/.staging" -type f | wc -l)" 0 "stale staging files are cleaned at mount (B4)"
assert_eq "$(tiers_of "$src" "$d")" "2  4 nvme" "the four committed shards are in the stripe tier, the interrupted one nowhere"
ok=1
for i in 0 1 2 3; do
	n=$(printf 'shard-%06d.tar' "$i")
	[ "$(sum "$d/$n")" = "$(sum "$src/$n")" ] || ok=0
done
[ $ok = 1 ] && pass "every shard committed before the crash reads with its sha256" ||
	fail "every shard committed before the crash reads with its sha256"
assert_eq "$(nginx_count 'GET /shards/')" 5 "...with no origin GET"
h4=$(shard_field "$origin" demo/c shard-000004.tar content_hash)
assert_eq "$(sum "$d/shard-000004.tar")" "$(sum "$src/shard-000004.tar")" "the interrupted shard is fetched again, whole"
assert_eq "$(nginx_count "GET /shards/$h4")" 2 "...with one more GET: nothing partial was served"
assert_eq "$(sum "$d/shard-000005.tar")" "$(sum "$src/shard-000005.tar")" "a new shard fills as usual"
assert_eq "$(tiers_of "$src" "$d")" "6 nvme" "all six are in the stripe tier now"
dv_umount "$mnt"
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "third mount"
rm -f "$tier"/*.tar
all_shards_ok "$src" "$d" && pass "after another restart all six read from the stripe tier alone" ||
	fail "after another restart all six read from the stripe tier alone"
assert_eq "$(nginx_count 'GET /shards/')" 7 "...with no origin GET"
dv_umount "$mnt"
summary
