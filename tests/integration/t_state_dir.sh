#!/usr/bin/env bash
# The manifest cache never falls back to a shared, predictable /tmp path.
# A user with no HOME and no passwd entry (uid 12345 here): with
# $XDG_RUNTIME_DIR set, the cache goes under it (datavo/manifests/); with
# neither, datavofs refuses with a clear error before caching any manifest,
# and datavoctl inspect says there is none.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 setpriv

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 1 --kb 16 --seed 2
publish demo/train "$src" "$origin" || bail "publish"
chmod -R a+rX "$origin"
u=$(dv_tmp user)
mkdir "$u/mnt" "$u/run"
chmod 0777 "$u" "$u/mnt"
chown 12345:12345 "$u/run"
chmod 0700 "$u/run"
cfg="$u/shards.yaml"
write_config "$cfg" "$u/tier"
chmod 0644 "$cfg"
getent passwd 12345 >/dev/null && bail "uid 12345 has a passwd entry here"

# as_user [VAR=VALUE…] CMD…: runs CMD as uid 12345 with no HOME.
as_user() {
	setpriv --reuid 12345 --regid 12345 --clear-groups env -i PATH="$PATH" "$@"
}

out=$(as_user "$DATAVOFS" "$origin" "$u/mnt" -f -o "config=$cfg" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
if [ $rc -ne 0 ] && echo "$out" | grep -q "no state directory: HOME is unset and so is XDG_RUNTIME_DIR"; then
	pass "no HOME, no XDG_RUNTIME_DIR: datavofs refuses with a clear error"
else
	fail "no HOME, no XDG_RUNTIME_DIR: datavofs refuses with a clear error" "rc=$rc"
fi
out=$(as_user "$DATAVOCTL" inspect -c "$cfg" 2>&1)
if echo "$out" | grep -q "state_dir: *(none: HOME and XDG_RUNTIME_DIR are unset)"; then
	pass "datavoctl inspect says there is no default state directory"
else
	fail "datavoctl inspect says there is no default state directory" "$out"
fi

# With XDG_RUNTIME_DIR the daemon gets as far as the mount (which needs
# /dev/fuse, closed to this user) and has made its cache under it.
as_user XDG_RUNTIME_DIR="$u/run" "$DATAVOFS" "$origin" "$u/mnt" -f -o "config=$cfg" >"$DV_WORK/xdg.log" 2>&1
sed 's/^/# /' "$DV_WORK/xdg.log"
if [ -d "$u/run/datavo/manifests" ] && [ -n "$(ls "$u/run/datavo/manifests")" ]; then
	pass "with XDG_RUNTIME_DIR the manifests are cached under it"
else
	fail "with XDG_RUNTIME_DIR the manifests are cached under it"
fi
out=$(as_user XDG_RUNTIME_DIR="$u/run" "$DATAVOCTL" inspect -c "$cfg" 2>&1)
if echo "$out" | grep -q "state_dir: *$u/run/datavo/manifests"; then
	pass "datavoctl inspect names the same default"
else
	fail "datavoctl inspect names the same default" "$out"
fi
summary
