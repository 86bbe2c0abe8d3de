#!/usr/bin/env bash
# a stripe tier over four loop devices that this test
# attaches (and detaches, whatever happens). Shards read through the mount
# with the source's sha256, served by the stripe tier itself when it is
# first; after a restart they are still cached (no origin GET), even with
# the folder tier emptied; with a folder tier first, a stripe hit is
# promoted into it (R3) without touching the origin.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/stripe_lib.sh
. "$DV_ROOT/tests/integration/stripe_lib.sh"
dv_need losetup python3 sha256sum getfattr

[ "$(id -u)" = 0 ] || { skip "stripe tier over loop devices" "needs root for losetup"; summary; exit 0; }

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 6 --kb 3000 --seed 7
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"

devs=()
for i in 0 1 2 3; do
	d=$(loop_attach "$DV_WORK/disk$i.img" 64) || bail "losetup of disk $i"
	devs+=("$d")
done
pass "four loop devices attached: ${devs[*]}"

state="$DV_WORK/state"
tier="$DV_WORK/tier"
cfg="$DV_WORK/stripe-first.yaml"
stripe_config "$cfg" "$state" "$tier" "${devs[@]}"
mnt=$(dv_tmp mnt)

# --- a cold read fills the stripe tier, which serves it ----------------------
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "mount"
if all_shards_ok "$src" "$mnt/demo/train"; then
	pass "every shard reads through the mount with the source's sha256"
else
	fail "every shard reads through the mount with the source's sha256"
fi
assert_eq "$(nginx_count 'GET /shards/')" 6 "six shards, six origin GETs"
assert_eq "$(tiers_of "$src" "$mnt/demo/train")" "6 nvme" "the stripe tier (first) holds and serves all six"
assert_eq "$(ls "$state" | grep -c '^stripe-')" 1 "one pool state directory"
python3 - "$mnt/.datavo/status" <<-'PY' && pass "status shows the stripe tier's objects" || fail "status shows the stripe tier's objects"
	import json, sys
	s = json.load(open(sys.argv[1]))
	t = [t for t in s["tiers"] if t["name"] == "nvme"][0]
	assert t["objects"] == 6, t
	PY
# Several readers at once, reading at different places of one shard.
f="$mnt/demo/train/shard-000004.tar"
want=$(sha256sum <"$src/shard-000004.tar" | cut -d' ' -f1)
out=$(dv_tmp sums)
pids=()
for i in 1 2 3 4 5 6; do
	sha256sum <"$f" >"$out/$i" 2>&1 &
	pids+=($!)
done
wait "${pids[@]}"
assert_eq "$(cut -d' ' -f1 "$out"/* | sort | uniq -c | awk '{ print $1, $2 }')" "6 $want" \
	"six concurrent readers of one striped shard get six correct copies"
dv_umount "$mnt"
assert_eq "${DV_LAST_EXIT:-?}" 0 "the daemon exits 0 after unmount"

# --- a restart keeps the cache, even without the folder copies (B8) ----------
rm -f "$tier"/*.tar
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "remount"
if all_shards_ok "$src" "$mnt/demo/train"; then
	pass "after a restart every shard still reads with its sha256"
else
	fail "after a restart every shard still reads with its sha256"
fi
assert_eq "$(nginx_count 'GET /shards/')" 6 "after a restart: no origin GET"
assert_eq "$(ls "$tier" | grep -c '\.tar$')" 0 "the stripe tier served them alone"
dv_umount "$mnt"

# --- a small folder tier first: stripe hits are promoted into it (R3) --------
cfg2="$DV_WORK/folder-first.yaml"
{
	echo "state_dir: $state"
	echo "tiers:"
	echo "  - name: ram"
	echo "    path: $DV_WORK/ram"
	echo "    max_bytes: 8MiB"
	echo "  - name: nvme"
	echo "    type: stripe"
	echo "    devices: [${devs[3]}, ${devs[1]}, ${devs[0]}, ${devs[2]}]"
	echo "    chunk_bytes: 1MiB"
} >"$cfg2"
dv_mount "$NGINX_URL" "$mnt" "config=$cfg2" || bail "mount with a folder tier first"
assert_eq "$(getfattr --only-values -n user.datavo.tier "$mnt/demo/train/shard-000002.tar" 2>/dev/null)" \
	"nvme" "before a read, the shard is in the stripe tier only (devices listed in another order)"
if all_shards_ok "$src" "$mnt/demo/train"; then
	pass "promoted from the stripe tier, every shard reads with its sha256"
else
	fail "promoted from the stripe tier, every shard reads with its sha256"
fi
assert_eq "$(nginx_count 'GET /shards/')" 6 "promotion needs no origin GET"
h5=$(shard_field "$origin" demo/train shard-000005.tar content_hash)
[ -f "$DV_WORK/ram/$h5.tar" ] && pass "the last shard read was promoted into the folder tier" ||
	fail "the last shard read was promoted into the folder tier" "$(ls -la "$DV_WORK/ram")"
assert_eq "$(getfattr --only-values -n user.datavo.tier "$mnt/demo/train/shard-000005.tar" 2>/dev/null)" \
	"ram" "the promoted shard is served by the folder tier"
dv_umount "$mnt"
assert_eq "$(find "$DV_WORK/ram/.staging" -type f | wc -l)" 0 "no staging file remains"
summary
