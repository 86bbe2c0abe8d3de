#!/usr/bin/env bash
# FUSE over io_uring: the transport a mount runs, and why, as the status
# file, `datavoctl status` and the log say. Reads enter the daemon
# (-o no_passthrough, a fresh mount on a warm tier: no page of the mount is
# cached) and every shard reads with its bytes over either transport:
#   - fuse_io_uring=on fails the mount, on the terminal, where the kernel's
#     enable_uring is off (or the build's libfuse has no io_uring);
#   - auto with enable_uring off runs /dev/fuse and says so;
#   - on, and auto, with enable_uring set run io_uring: every byte the daemon
#     read came in a request over the ring;
#   - fuse_io_uring: off in shards.yaml runs /dev/fuse, none over the ring.
# The test sets enable_uring for its duration and puts back the value it
# found on exit; the daemon itself never writes it.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum timeout
# This test picks each mount's transport itself.
unset DV_TEST_MOUNT_OPTS

bin=$(_dv_bin)
param=/sys/module/fuse/parameters/enable_uring
modprobe fuse 2>/dev/null || true
prev=""
[ -e "$param" ] && prev=$(cat "$param")
undo() { [ -n "$prev" ] && echo "$prev" >"$param"; }
trap 'rc=$?; trap - EXIT; (exit $rc); (_dv_cleanup); rc=$?; undo; exit $rc' EXIT

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 3 --kb 700 --seed 31
publish demo/ur "$src" "$origin" || bail "publish"
want=$(cd "$src" && sha256sum -- *.tar)
total=$(cat "$src"/*.tar | wc -c)
field() { python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"; }
sums() { (cd "$1" && sha256sum -- *.tar); }
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)

# The tier is filled once: later mounts read it through the daemon.
dv_mount "file://$origin" "$mnt" "config=$cfg" || bail "mount to fill"
assert_eq "$(sums "$mnt/demo/ur")" "$want" "the fill reads every shard with its bytes"
dv_umount "$mnt"

# mount_on OPTS...: a mount reading the warm tier through the daemon; checks
# the bytes and prints nothing.
mount_on() {
	dv_mount "file://$origin" "$mnt" "config=$cfg" no_passthrough log_level=info "$@" || bail "mount $*"
	assert_eq "$(sums "$mnt/demo/ur")" "$want" "${*:-default options}: every shard reads with its bytes through the daemon"
}

# --- on, where io_uring cannot be had: the mount fails with why ------------------
[ -e "$param" ] && echo N >"$param"
out=$(timeout 30 "$bin" "file://$origin" "$mnt" -f -o "config=$cfg,fuse_io_uring=on" 2>&1)
rc=$?
assert_eq "$rc" 1 "fuse_io_uring=on without io_uring: the daemon exits 1"
if mountpoint -q "$mnt"; then
	fail "fuse_io_uring=on without io_uring: nothing is mounted"
	fusermount3 -uz "$mnt"
else
	pass "fuse_io_uring=on without io_uring: nothing is mounted"
fi
case "$out" in
*"has no io_uring"*)
	# A build against libfuse < 3.18, or one without liburing and numa.
	assert_eq "$(grep -c 'datavofs: fuse_io_uring is on, but libfuse .* has no io_uring' <<<"$out")" 1 \
		"the error names the build's libfuse"
	mount_on
	assert_eq "$(field "$mnt/.datavo/status" fuse_transport)" "/dev/fuse" "this build runs /dev/fuse"
	dv_umount "$mnt"
	skip "io_uring mounts" "$("$bin" --version): no FUSE over io_uring in this build"
	summary
	exit
	;;
esac
if [ ! -e "$param" ]; then
	assert_eq "$out" "datavofs: fuse_io_uring is on, but the kernel has no FUSE over io_uring (Linux >= 6.14 with CONFIG_FUSE_IO_URING has it)" \
		"the error says the kernel has no io_uring"
	skip "io_uring mounts" "kernel $(uname -r) has no $param"
	summary
	exit
fi
assert_eq "$out" "datavofs: fuse_io_uring is on, but enable_uring is off (as root: echo Y > $param)" \
	"the error says enable_uring is off, and how to set it"
assert_eq "$(cat "$param")" N "the daemon left enable_uring as it was"

# --- auto, enable_uring off: /dev/fuse, and why ------------------------------------
mount_on
st="$mnt/.datavo/status"
assert_eq "$(field "$st" fuse_transport)|$(field "$st" fuse_transport_reason)" "/dev/fuse|enable_uring is off" \
	"auto, enable_uring off: the status says /dev/fuse and why"
assert_eq "$(field "$st" bytes_read) $(field "$st" bytes_read_io_uring)" "$total 0" \
	"auto, enable_uring off: every byte read through the daemon, none over io_uring"
assert_eq "$("$DATAVOCTL" status "$mnt" | grep '^fuse:' | cut -d, -f1)" "fuse:     /dev/fuse (enable_uring is off)" \
	"datavoctl status says /dev/fuse and why"
grep -qF "info: transport: /dev/fuse (enable_uring is off" "$(dv_log "$mnt")" &&
	pass "the log says /dev/fuse and why" ||
	fail "the log says /dev/fuse and why" "$(cat "$(dv_log "$mnt")")"
dv_umount "$mnt"

# --- on and auto, enable_uring set: io_uring ---------------------------------------
echo Y >"$param"
for mode in on auto; do
	mount_on "fuse_io_uring=$mode"
	assert_eq "$(field "$st" fuse_transport)|$(field "$st" fuse_transport_reason)" "io_uring|null" \
		"$mode, enable_uring set: the status says io_uring, with no reason"
	assert_eq "$(field "$st" bytes_read) $(field "$st" bytes_read_io_uring)" "$total $total" \
		"$mode: every byte the daemon read came over io_uring"
	assert_eq "$("$DATAVOCTL" status "$mnt" | grep '^fuse:' | cut -d, -f1)" "fuse:     io_uring" \
		"$mode: datavoctl status says io_uring"
	grep -qF "info: transport: io_uring" "$(dv_log "$mnt")" &&
		pass "$mode: the log says io_uring" ||
		fail "$mode: the log says io_uring" "$(cat "$(dv_log "$mnt")")"
	dv_umount "$mnt"
done

# --- fuse_io_uring: off in the config ------------------------------------------------
write_config "$cfg" "$DV_WORK/tier" "fuse_io_uring: off"
mount_on
assert_eq "$(field "$st" fuse_transport)|$(field "$st" fuse_transport_reason)" "/dev/fuse|fuse_io_uring is off" \
	"config off, enable_uring set: /dev/fuse, because the config says so"
assert_eq "$(field "$st" bytes_read) $(field "$st" bytes_read_io_uring)" "$total 0" \
	"config off: no byte came over io_uring"
dv_umount "$mnt"
# -o wins over the config.
mount_on fuse_io_uring=on
assert_eq "$(field "$st" fuse_transport)" "io_uring" "-o fuse_io_uring=on wins over the config's off"
dv_umount "$mnt"
assert_eq "$(cat "$param")" Y "the daemon left enable_uring as it was"

summary
