#!/usr/bin/env bash
# The daemon's command line (DESIGN "Mounting"): the origin comes from the
# positional argument, else -o origin=, else `origin:` in the config, else
# $DATAVO_ORIGIN; none is a one-line error naming all four. SIGTERM and
# SIGINT unmount cleanly and leave no staging file; bad options and bad
# configs are refused with a message, before anything is mounted.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 mountpoint

bin=$(_dv_bin)
src=$(dv_tmp src)
origin=$(dv_tmp origin)
other=$(dv_tmp other)
mktars "$src" 1 --kb 100 --seed 9
publish demo/a "$src" "$origin" || bail "publish a"
publish demo/b "$src" "$other" || bail "publish b"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
cfg_origin="$DV_WORK/with-origin.yaml"
write_config "$cfg_origin" "$DV_WORK/tier" "origin: file://$other"
mnt=$(dv_tmp mnt)

# Which dataset shows tells which origin won: demo/a lives in $origin, demo/b in $other.
which_origin() { ls "$mnt/demo" 2>/dev/null | tr '\n' ' '; }

dv_mount "$origin" "$mnt" "config=$cfg_origin" "origin=file://$other" || bail mount1
assert_eq "$(which_origin)" "a " "the positional origin wins over -o origin= and the config"
dv_umount "$mnt"
dv_mount "" "$mnt" "config=$cfg_origin" "origin=$origin" || bail mount2
assert_eq "$(which_origin)" "a " "-o origin= wins over the config"
dv_umount "$mnt"
DATAVO_ORIGIN=$origin dv_mount "" "$mnt" "config=$cfg_origin" || bail mount3
assert_eq "$(which_origin)" "b " "the config's origin wins over \$DATAVO_ORIGIN"
dv_umount "$mnt"
DATAVO_ORIGIN=$other dv_mount "" "$mnt" "config=$cfg" || bail mount4
assert_eq "$(which_origin)" "b " "\$DATAVO_ORIGIN is the last resort"
dv_umount "$mnt"

out=$(env -u DATAVO_ORIGIN HOME="$DV_WORK/home" "$bin" "$mnt" -f -o "config=$cfg" 2>&1)
rc=$?
assert_eq "$rc" 1 "no origin: exit status 1"
case "$out" in
*"first argument"*"origin="*"shards.yaml"*"DATAVO_ORIGIN"*) pass "no origin: one line naming all four places" ;;
*) fail "no origin: one line naming all four places" "$out" ;;
esac
assert_eq "$(echo "$out" | wc -l)" 1 "no origin: the error is one line"
mountpoint -q "$mnt" && fail "nothing mounted after an error" || pass "nothing mounted after an error"

bad="$DV_WORK/bad.yaml"
printf 'tiers:\n  - name: x\n    path: %s\n    max_bytes: 12XB\n' "$DV_WORK/t" >"$bad"
out=$("$bin" "$origin" "$mnt" -f -o "config=$bad" 2>&1)
case "$out" in *"bad.yaml:4:"*"max_bytes"*) pass "a bad config: file, line and key" ;; *) fail "a bad config: file, line and key" "$out" ;; esac
out=$("$bin" "$origin" "$mnt" -f -o "config=$cfg,verify=maybe" 2>&1)
case "$out" in *"verify=maybe"*) pass "a bad -o verify= is refused" ;; *) fail "a bad -o verify= is refused" "$out" ;; esac
out=$("$bin" "ftp://x/y" "$mnt" -f -o "config=$cfg" 2>&1)
case "$out" in *ftp*) pass "an unsupported origin is refused" ;; *) fail "an unsupported origin is refused" "$out" ;; esac
"$bin" --help | grep -q "manifest_ttl" && pass "--help lists the options" || fail "--help lists the options"

# SIGTERM and SIGINT unmount cleanly.
for sig in TERM INT; do
	dv_mount "$origin" "$mnt" "config=$cfg" || bail "mount for $sig"
	cat "$mnt/demo/a/shard-000000.tar" >/dev/null
	pid=$(dv_pid "$mnt")
	kill -s "$sig" "$pid"
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then fail "SIG$sig stops the daemon"; else pass "SIG$sig stops the daemon"; fi
	if mountpoint -q "$mnt"; then fail "SIG$sig unmounts"; else pass "SIG$sig unmounts"; fi
	assert_eq "$(find "$DV_WORK/tier/.staging" "$DV_WORK/tier/.locks" -type f | wc -l)" 0 "SIG$sig leaves no staging file or lock"
	dv_umount "$mnt" >/dev/null 2>&1
done
summary
