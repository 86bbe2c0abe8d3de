#!/usr/bin/env bash
# with loop devices this test
# attaches and detaches itself, discovery refuses one holding ext4 and a
# mounted one, and accepts a blank one only when it is listed by name;
# `devices: auto` never takes a loop device. The daemon refuses to start on
# a refused device and leaves it untouched; `format: true` overwrites a
# foreign signature but never a mounted device. Only the test's own loop
# devices are ever written to: `auto` is only listed, never mounted.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/stripe_lib.sh
. "$DV_ROOT/tests/integration/stripe_lib.sh"
dv_need losetup mkfs.ext4 mount umount python3 sha256sum

[ "$(id -u)" = 0 ] || { skip "stripe discovery over loop devices" "needs root for losetup and mount"; summary; exit 0; }
[ -x "$DV_STRIPE_TOOL" ] || bail "no $DV_STRIPE_TOOL (make $DV_STRIPE_TOOL)"

ext4=$(loop_attach "$DV_WORK/ext4.img" 64) || bail "losetup ext4"
mnted=$(loop_attach "$DV_WORK/mounted.img" 64) || bail "losetup mounted"
blank=$(loop_attach "$DV_WORK/blank.img" 64) || bail "losetup blank"
mkfs.ext4 -q -F "$ext4" >/dev/null 2>&1 || bail "mkfs.ext4 $ext4"
mkfs.ext4 -q -F "$mnted" >/dev/null 2>&1 || bail "mkfs.ext4 $mnted"
loop_mount "$mnted" "$DV_WORK/m" || bail "mount $mnted"
echo "precious" >"$DV_WORK/m/marker"
sync
head_sum() { head -c 4M "$1" | sha256sum | cut -d' ' -f1; }
ext4_sum=$(head_sum "$ext4")

# --- what discovery says ------------------------------------------------------
out=$(stripe_tool inspect "$ext4" "$mnted" "$blank")
echo "$out" | sed 's/^/# /'
line() { echo "$out" | awk -v d="$1" '$1 == d'; }
case "$(line "$ext4")" in
*refused*ext2/3/4*"format: true"*) pass "a loop device holding ext4 is refused, naming the signature" ;;
*) fail "a loop device holding ext4 is refused, naming the signature" "$(line "$ext4")" ;;
esac
case "$(line "$mnted")" in
*refused*"mounted at $DV_WORK/m"*) pass "a mounted loop device is refused, naming where" ;;
*) fail "a mounted loop device is refused, naming where" "$(line "$mnted")" ;;
esac
case "$(line "$blank")" in
*accepted*blank*) pass "a blank loop device listed by name is accepted" ;;
*) fail "a blank loop device listed by name is accepted" "$(line "$blank")" ;;
esac
out=$(stripe_tool inspect --format "$ext4" "$mnted")
case "$(line "$ext4")" in
*accepted*ext2/3/4*) pass "format: true accepts the ext4 device (to overwrite it)" ;;
*) fail "format: true accepts the ext4 device (to overwrite it)" "$(line "$ext4")" ;;
esac
case "$(line "$mnted")" in
*refused*"mounted at"*) pass "format: true never accepts a mounted device" ;;
*) fail "format: true never accepts a mounted device" "$(line "$mnted")" ;;
esac
out=$(stripe_tool inspect auto)
echo "$out" | sed 's/^/# auto: /'
case "$(line "$blank")" in
*refused*"devices: auto skips it"*) pass "devices: auto does not take the blank loop device" ;;
*) fail "devices: auto does not take the blank loop device" "$(line "$blank")" ;;
esac
root_dev=$(awk '$5 == "/" { print $3 }' /proc/self/mountinfo | tail -1)
root_name=$(basename "$(readlink -f "/sys/dev/block/$root_dev" 2>/dev/null)")
if [ -n "$root_name" ] && [ -n "$(line "/dev/$root_name")" ]; then
	case "$(line "/dev/$root_name")" in
	*refused*root*) pass "devices: auto refuses the root device /dev/$root_name" ;;
	*) fail "devices: auto refuses the root device /dev/$root_name" "$(line "/dev/$root_name")" ;;
	esac
else
	skip "devices: auto refuses the root device" "the root filesystem is not on a block device here"
fi
if echo "$out" | grep -q ' accepted '; then
	skip "devices: auto accepts nothing here" "this machine has a usable nvme/sd device (not written to)"
else
	pass "devices: auto accepts nothing on this machine"
fi

# --- the daemon refuses them, and leaves them as they were ------------------
src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 2000 --seed 11
publish demo/d "$src" "$origin" || bail "publish"

# expect_refused NAME CONFIG PATTERN: the daemon must exit without mounting,
# its log matching PATTERN.
expect_refused() {
	local name=$1 cfgf=$2 pat=$3 m log rc
	m=$(dv_tmp refused)
	log="$DV_WORK/refused-$RANDOM.log"
	HOME=$DV_WORK/home timeout -k 5 30 "$(_dv_bin)" "file://$origin" "$m" -f -o "config=$cfgf" >"$log" 2>&1
	rc=$?
	if mountpoint -q "$m"; then
		fusermount3 -u "$m"
		fail "$name" "it mounted"
	elif [ "$rc" = 0 ] || [ "$rc" = 124 ] || ! grep -q -- "$pat" "$log"; then
		fail "$name" "exit $rc" "$(cat "$log")"
	else
		pass "$name"
	fi
}

one_device_config() { # FILE DEVICE [YAML…]
	local f=$1 d=$2
	shift 2
	{
		echo "state_dir: $DV_WORK/state"
		echo "tiers:"
		echo "  - name: nvme"
		echo "    type: stripe"
		echo "    devices: [$d]"
		echo "    chunk_bytes: 1MiB"
		for l in "$@"; do echo "$l"; done
		echo "  - name: local"
		echo "    path: $DV_WORK/tier"
	} >"$f"
}

one_device_config "$DV_WORK/ext4.yaml" "$ext4"
expect_refused "the daemon will not start on the ext4 device" "$DV_WORK/ext4.yaml" "carries ext2/3/4"
assert_eq "$(head_sum "$ext4")" "$ext4_sum" "the ext4 device is untouched"
one_device_config "$DV_WORK/mounted.yaml" "$mnted" "    format: true"
expect_refused "the daemon will not start on the mounted device, even with format: true" \
	"$DV_WORK/mounted.yaml" "mounted at"
assert_eq "$(cat "$DV_WORK/m/marker" 2>/dev/null)" "precious" "the mounted filesystem is untouched"

one_device_config "$DV_WORK/blank.yaml" "$blank"
mnt=$(dv_tmp mnt)
dv_mount "file://$origin" "$mnt" "config=$DV_WORK/blank.yaml" || bail "mount on the blank device"
all_shards_ok "$src" "$mnt/demo/d" && pass "the blank device, listed by name, serves shards" ||
	fail "the blank device, listed by name, serves shards"
assert_eq "$(tiers_of "$src" "$mnt/demo/d")" "2 nvme" "both shards are in the stripe tier"
dv_umount "$mnt"
assert_eq "$(head -c 8 "$blank")" "DVSTRIPE" "the blank device now carries our superblock"
out=$(stripe_tool inspect "$blank")
case "$(line "$blank")" in
*accepted*"datavo stripe pool"*"device 1 of 1"*) pass "discovery recognizes our own superblock" ;;
*) fail "discovery recognizes our own superblock" "$(line "$blank")" ;;
esac

one_device_config "$DV_WORK/ext4-format.yaml" "$ext4" "    format: true"
dv_mount "file://$origin" "$mnt" "config=$DV_WORK/ext4-format.yaml" || bail "mount with format: true"
all_shards_ok "$src" "$mnt/demo/d" && pass "format: true: the ext4 device is taken over and serves shards" ||
	fail "format: true: the ext4 device is taken over and serves shards"
dv_umount "$mnt"
out=$(stripe_tool inspect "$ext4")
case "$(line "$ext4")" in
*accepted*"datavo stripe pool"*) pass "the ext4 signature is gone after format" ;;
*) fail "the ext4 signature is gone after format" "$(line "$ext4")" ;;
esac
summary
