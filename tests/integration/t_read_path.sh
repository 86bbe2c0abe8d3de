#!/usr/bin/env bash
# Which read path a mount runs, and why, as the status file, `datavoctl
# status` and the daemon's log say: a build against libfuse >= 3.17 run as
# root passes reads through to the kernel (no byte is read through the
# daemon); -o no_passthrough, a daemon without CAP_SYS_ADMIN (an unprivileged
# user mounting through fusermount3) and a daemon whose CAP_SYS_ADMIN is only
# that of a user namespace (the kernel refuses the first backing file) fall
# back to keep_cache and read the right bytes; a build against an older
# libfuse says that its libfuse has no passthrough.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum setpriv unshare mknod

bin=$(_dv_bin)
# "datavofs 0.1 (libfuse 3.17.2)": the libfuse it was built with.
fuse_version=$("$bin" --version | sed -n 's/.*(libfuse \([0-9]*\.[0-9]*\).*/\1/p')
[ -n "$fuse_version" ] || bail "no libfuse version in: $("$bin" --version)"
pt_build=0
[ "$(printf '3.17\n%s\n' "$fuse_version" | sort -V | head -1)" = 3.17 ] && pt_build=1
kernel=$(uname -r | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')
pt_kernel=0
[ "$(printf '6.9\n%s\n' "$kernel" | sort -V | head -1)" = 6.9 ] && pt_kernel=1
echo "# libfuse $fuse_version, kernel $kernel"

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 600 --seed 21
publish demo/rp "$src" "$origin" || bail "publish"
chmod -R a+rX "$origin"
want=$(cd "$src" && sha256sum -- *.tar)

field() { python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"; }
sums() { (cd "$1" && sha256sum -- *.tar); }

# Reason for keep_cache where passthrough was asked for, given this build.
no_pt_reason() { # REASON_IF_THE_BUILD_AND_KERNEL_HAVE_PASSTHROUGH
	if [ $pt_build = 0 ]; then
		echo "libfuse $fuse_version has no passthrough"
	elif [ $pt_kernel = 0 ]; then
		echo "the kernel offers no passthrough (Linux >= 6.9 with CONFIG_FUSE_PASSTHROUGH has it)"
	else
		echo "$1"
	fi
}

# --- root, the default: passthrough when the build has it ---------------------
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
dv_mount "file://$origin" "$mnt" "config=$cfg" "log_level=info" || bail "mount"
assert_eq "$(sums "$mnt/demo/rp")" "$want" "root: every shard reads with its bytes"
st="$mnt/.datavo/status"
if [ $pt_build = 1 ] && [ $pt_kernel = 1 ]; then
	assert_eq "$(field "$st" read_path) $(field "$st" read_path_reason)" "passthrough null" \
		"root, libfuse $fuse_version: the status says passthrough, with no reason"
	assert_eq "$(field "$st" bytes_read)" 0 "root: no byte was read through the daemon"
	assert_eq "$("$DATAVOCTL" status "$mnt" | grep '^read:' | cut -d, -f1)" "read:     passthrough" \
		"datavoctl status says passthrough"
	grep -q "info: read path: passthrough (libfuse $fuse_version" "$(dv_log "$mnt")" &&
		pass "the log says passthrough and the libfuse" ||
		fail "the log says passthrough and the libfuse" "$(cat "$(dv_log "$mnt")")"
else
	why=$(no_pt_reason "")
	assert_eq "$(field "$st" read_path)|$(field "$st" read_path_reason)" "keep_cache|$why" \
		"root, libfuse $fuse_version: keep_cache, and why"
	assert_eq "$("$DATAVOCTL" status "$mnt" | grep '^read:' | sed 's/, verify.*//')" "read:     keep_cache ($why)" \
		"datavoctl status says keep_cache and why"
	grep -qF "warning: read path: keep_cache ($why)" "$(dv_log "$mnt")" &&
		pass "the log warns: keep_cache and why" ||
		fail "the log warns: keep_cache and why" "$(cat "$(dv_log "$mnt")")"
fi
dv_umount "$mnt"

# --- -o no_passthrough ----------------------------------------------------------
dv_mount "file://$origin" "$mnt" "config=$cfg" "no_passthrough" || bail "mount no_passthrough"
assert_eq "$(sums "$mnt/demo/rp")" "$want" "no_passthrough: every shard reads with its bytes"
why="-o no_passthrough"
[ $pt_build = 1 ] || why=$(no_pt_reason "")
assert_eq "$(field "$st" read_path)|$(field "$st" read_path_reason)" "keep_cache|$why" \
	"no_passthrough: keep_cache ($why)"
# A fresh mount's page cache is empty: the first epoch reads through the daemon.
bytes_read=$(field "$st" bytes_read)
[ "$bytes_read" -gt 0 ] && pass "no_passthrough: reads went through the daemon ($bytes_read bytes)" ||
	fail "no_passthrough: reads went through the daemon" "bytes_read $bytes_read"
dv_umount "$mnt"

# --- in a private mount namespace: no CAP_SYS_ADMIN, or only a namespace's ----------
# ns_mount DIR USERNS: runs datavofs and its readers in a private mount
# namespace (unshare, with a /dev/fuse node of its own that the unprivileged
# user may open: the host's may be root's only), either as nobody mounting
# through fusermount3 (USERNS=0) or as root of a new user namespace (1).
# Writes DIR/sums, DIR/status, DIR/ctl and DIR/log.
ns_mount() {
	local d=$1 userns=$2 as=()
	mkdir -p "$d/tier" "$d/mnt" "$d/home"
	write_config "$d/shards.yaml" "$d/tier"
	chmod 0644 "$d/shards.yaml"
	if [ "$userns" = 0 ]; then
		chown nobody: "$d/tier" "$d/mnt" "$d/home"
		as=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
	fi
	cat >"$d/run.sh" <<-EOF
		set -u
		if [ $userns = 0 ]; then
			mknod -m 0666 "$d/fuse" c 10 229 && mount --bind "$d/fuse" /dev/fuse || exit 1
		fi
		HOME="$d/home" ${as[*]} "$bin" "file://$origin" "$d/mnt" -f -o config="$d/shards.yaml" >"$d/log" 2>&1 &
		pid=\$!
		for i in \$(seq 100); do grep -q " $d/mnt fuse" /proc/self/mounts && break; sleep 0.1; done
		${as[*]} sh -c 'cd "$d/mnt/demo/rp" && sha256sum -- *.tar' >"$d/sums" 2>&1
		${as[*]} cat "$d/mnt/.datavo/status" >"$d/status" 2>&1
		${as[*]} "$DATAVOCTL" status "$d/mnt" >"$d/ctl" 2>&1
		fusermount3 -u "$d/mnt" || umount -l "$d/mnt"
		wait \$pid
	EOF
	if [ "$userns" = 0 ]; then
		timeout 60 unshare -m --propagation private bash "$d/run.sh"
	else
		timeout 60 unshare -U -r -m --propagation private bash "$d/run.sh"
	fi
}

ns=$(dv_tmp nobody)
if ns_mount "$ns" 0; then
	assert_eq "$(cat "$ns/sums")" "$want" "as nobody: every shard reads with its bytes"
	why=$(no_pt_reason "no CAP_SYS_ADMIN")
	assert_eq "$(field "$ns/status" read_path)|$(field "$ns/status" read_path_reason)" "keep_cache|$why" \
		"as nobody: keep_cache ($why)"
	assert_eq "$(grep '^read:' "$ns/ctl" | sed 's/, verify.*//')" "read:     keep_cache ($why)" \
		"as nobody: datavoctl status says why"
	grep -qF "warning: read path: keep_cache ($why)" "$ns/log" &&
		pass "as nobody: the log warns why" || fail "as nobody: the log warns why" "$(cat "$ns/log")"
else
	fail "as nobody: the mount in a private namespace ran" "$(cat "$ns/log" 2>/dev/null)"
fi

ns=$(dv_tmp userns)
if ! unshare -U -r true 2>/dev/null; then
	skip "root of a user namespace" "user namespaces are not available here"
elif ns_mount "$ns" 1; then
	assert_eq "$(cat "$ns/sums")" "$want" "root of a user namespace: every shard reads with its bytes"
	why=$(no_pt_reason "the kernel refused a backing file: no CAP_SYS_ADMIN in the initial user namespace")
	assert_eq "$(field "$ns/status" read_path)|$(field "$ns/status" read_path_reason)" "keep_cache|$why" \
		"root of a user namespace: keep_cache ($why)"
	assert_eq "$(grep -c "passthrough refused for" "$ns/log")" 0 \
		"root of a user namespace: no warning per open, one for the mount"
else
	fail "root of a user namespace: the mount ran" "$(cat "$ns/log" 2>/dev/null)"
fi
summary
