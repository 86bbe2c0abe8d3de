#!/usr/bin/env bash
# a tier file corrupted on purpose is reported by
# `datavoctl verify` and removed by `verify --fix`; the next open refetches
# it (one more GET) and reads the right bytes. Also: a truncated file and a
# stale staging file are findings, a staging file held by a live process
# and a file no manifest names are not removed, a clean scrub exits 0.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum flock

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 4 --kb 300 --seed 31
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
tier="$DV_WORK/tier"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$tier" "state_dir: $DV_WORK/state"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "mount"
cat "$mnt"/demo/train/*.tar >/dev/null

verify() { "$DATAVOCTL" verify -c "$cfg" "$@" >"$DV_WORK/verify.out" 2>&1; }

verify
assert_eq "$?" 0 "a clean tier: verify exits 0"
grep -q "4 objects checked: 4 ok" "$DV_WORK/verify.out" && pass "a clean tier: 4 objects ok" ||
	fail "a clean tier: 4 objects ok" "$(cat "$DV_WORK/verify.out")"

# --- damage -------------------------------------------------------------------
h1=$(shard_field "$origin" demo/train shard-000001.tar content_hash)
h2=$(shard_field "$origin" demo/train shard-000002.tar content_hash)
printf 'CORRUPT!' | dd of="$tier/$h1.tar" bs=1 seek=5000 conv=notrunc status=none
truncate -s 1000 "$tier/$h2.tar"
stale="$tier/.staging/$h1.STALE1"
head -c 4096 /dev/urandom >"$stale"
touch -d '1 hour ago' "$stale"
busy="$tier/.staging/$h2.BUSY01"
head -c 4096 /dev/urandom >"$busy"
touch -d '1 hour ago' "$busy"
flock "$busy" sleep 60 &
dv_track $! "flock holder"
holder=$!
unknown="$tier/0123456789abcdef0123456789abcdef.tar"
head -c 1000 /dev/urandom >"$unknown"
sleep 0.2

verify
rc=$?
sed 's/^/# /' "$DV_WORK/verify.out"
assert_eq "$rc" 1 "findings: verify exits 1"
grep -Eq "corrupt +$h1.tar: demo/train/shard-000001.tar: sha256 does not match" "$DV_WORK/verify.out" &&
	pass "the corrupted file is reported, with its shard" || fail "the corrupted file is reported, with its shard"
grep -Eq "truncated +$h2.tar: demo/train/shard-000002.tar: 1000 bytes" "$DV_WORK/verify.out" &&
	pass "the truncated file is reported" || fail "the truncated file is reported"
grep -Eq "stale +.staging/$h1.STALE1" "$DV_WORK/verify.out" &&
	pass "the stale staging file is reported" || fail "the stale staging file is reported"
grep -q "BUSY01" "$DV_WORK/verify.out" && fail "a staging file held by a live process is not stale" ||
	pass "a staging file held by a live process is not stale"
grep -Eq "unknown +0123456789abcdef0123456789abcdef.tar" "$DV_WORK/verify.out" &&
	pass "a file no manifest names is reported as unknown" || fail "a file no manifest names is reported as unknown"
[ -f "$tier/$h1.tar" ] && [ -f "$stale" ] && pass "without --fix nothing is removed" ||
	fail "without --fix nothing is removed"

# --- --fix --------------------------------------------------------------------
verify --fix
rc=$?
sed 's/^/# /' "$DV_WORK/verify.out"
assert_eq "$rc" 1 "verify --fix still exits 1 (it found something)"
grep -q "3 removed" "$DV_WORK/verify.out" && pass "verify --fix says what it removed" ||
	fail "verify --fix says what it removed"
[ ! -e "$tier/$h1.tar" ] && pass "--fix removed the corrupted file" || fail "--fix removed the corrupted file"
[ ! -e "$tier/$h2.tar" ] && pass "--fix removed the truncated file" || fail "--fix removed the truncated file"
[ ! -e "$stale" ] && pass "--fix removed the stale staging file" || fail "--fix removed the stale staging file"
[ -e "$busy" ] && pass "--fix left the busy staging file" || fail "--fix left the busy staging file"
[ -e "$unknown" ] && pass "--fix left the unknown file" || fail "--fix left the unknown file"
dv_stop_pid "$holder" 2
rm -f "$busy" "$unknown"

# --- the next open refetches ----------------------------------------------------
before=$(nginx_count "GET /shards/$h1")
assert_file_sha256 "$mnt/demo/train/shard-000001.tar" "$(sha256sum "$src/shard-000001.tar" | cut -d' ' -f1)" \
	"after --fix the next open reads the right bytes"
assert_eq "$(nginx_count "GET /shards/$h1")" $((before + 1)) "the next open refetched it from the origin"
assert_file_sha256 "$tier/$h1.tar" "$(sha256sum "$src/shard-000001.tar" | cut -d' ' -f1)" "and reinstalled it whole"
cat "$mnt/demo/train/shard-000002.tar" >/dev/null
verify
assert_eq "$?" 0 "after the refetch verify is clean again"

# --- the origin down: verify needs no server ------------------------------------
dv_umount "$mnt"
nginx_stop
verify
assert_eq "$?" 0 "verify works from the cached manifests with the origin down and nothing mounted"
"$DATAVOCTL" verify -c "$cfg" --state-dir "$DV_WORK/nowhere" >"$DV_WORK/verify.out" 2>&1
grep -q "no cached manifest" "$DV_WORK/verify.out" && pass "without cached manifests verify says so" ||
	fail "without cached manifests verify says so" "$(cat "$DV_WORK/verify.out")"
"$DATAVOCTL" verify --bogus >/dev/null 2>&1
assert_eq "$?" 2 "a bad option: exit 2"
summary
