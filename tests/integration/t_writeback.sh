#!/usr/bin/env bash
# Write-back areas with a file:// destination: MOUNTPOINT/ckpt/ behaves as a
# local directory backed by its landing folder; closed files reach the
# destination under their final names (x.tmp renamed to x uploads x only),
# unlink and rename are mirrored, user.datavo.sync and `datavoctl sync`
# report it; outside the area the mount stays read-only (EROFS); concurrent
# writers each get their bytes; a name that is also a dataset is refused.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum getfattr

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 1 --kb 64 --seed 3
publish demo/train "$src" "$origin" || bail "publish"
land=$(dv_tmp land)
dest=$(dv_tmp dest)
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier" \
	"writeback:" "  - name: ckpt" "    destination: file://$dest" "    path: $land"
mnt=$(dv_tmp mnt)
dv_mount "file://$origin" "$mnt" "config=$cfg" || bail "mount"
ctl=${DATAVOCTL:-$DV_ROOT/build/datavoctl}

ls "$mnt" | grep -qx ckpt && pass "the area is listed at the root" || fail "the area is listed at the root" "$(ls -la "$mnt")"
ls "$mnt" | grep -qx demo && pass "datasets are still listed" || fail "datasets are still listed" "$(ls "$mnt")"
assert_eq "$(ls -A "$mnt/ckpt")" "" "a new area is empty (the journal is hidden)"

# The rename pattern.
head -c 3000000 /dev/urandom >"$DV_WORK/a.bin"
cp "$DV_WORK/a.bin" "$mnt/ckpt/step1.pt.tmp" && mv "$mnt/ckpt/step1.pt.tmp" "$mnt/ckpt/step1.pt"
assert_eq "$(sha256sum <"$mnt/ckpt/step1.pt")" "$(sha256sum <"$DV_WORK/a.bin")" "the file reads back through the mount"
"$ctl" sync --timeout 30 "$mnt/ckpt"
assert_eq "$?" 0 "datavoctl sync: 0 once uploaded"
assert_eq "$(sha256sum <"$dest/step1.pt")" "$(sha256sum <"$DV_WORK/a.bin")" "the destination has step1.pt, byte for byte"
[ ! -e "$dest/step1.pt.tmp" ] && pass "step1.pt.tmp was never uploaded" || fail "step1.pt.tmp was never uploaded"
assert_eq "$(getfattr --absolute-names --only-values -n user.datavo.sync "$mnt/ckpt/step1.pt" 2>&1)" synced "xattr: synced"
assert_eq "$(ls "$land")" "step1.pt" "the landing folder holds the file"

# Directories, rename of a directory, unlink after upload.
mkdir -p "$mnt/ckpt/run1/sub" && echo hello >"$mnt/ckpt/run1/sub/x.txt"
"$ctl" sync --timeout 30 "$mnt/ckpt/run1" && pass "sync of a subdirectory" || fail "sync of a subdirectory"
assert_eq "$(cat "$dest/run1/sub/x.txt")" hello "nested file uploaded"
mv "$mnt/ckpt/run1" "$mnt/ckpt/run2"
"$ctl" sync --timeout 30 "$mnt/ckpt"
assert_eq "$(cat "$dest/run2/sub/x.txt" 2>&1)" hello "a renamed directory is uploaded under its new name"
[ ! -e "$dest/run1/sub/x.txt" ] && pass "and removed under the old one" || fail "and removed under the old one"
rm "$mnt/ckpt/run2/sub/x.txt" && rmdir "$mnt/ckpt/run2/sub" "$mnt/ckpt/run2" && pass "rm, rmdir" || fail "rm, rmdir"
"$ctl" sync --timeout 30 "$mnt/ckpt"
[ ! -e "$dest/run2/sub/x.txt" ] && pass "unlink after upload removes the object" || fail "unlink after upload removes the object"

# Unlink before upload: never in the destination.
echo short-lived >"$mnt/ckpt/gone.txt" && rm "$mnt/ckpt/gone.txt"
"$ctl" sync --timeout 30 "$mnt/ckpt"
sleep 1
[ ! -e "$dest/gone.txt" ] && pass "unlink before upload: nothing uploaded" || fail "unlink before upload: nothing uploaded"

# Truncate and rewrite: the newest content wins.
echo v1 >"$mnt/ckpt/r.txt"; echo version-two >"$mnt/ckpt/r.txt"
truncate -s 4 "$mnt/ckpt/r.txt"
"$ctl" sync --timeout 30 "$mnt/ckpt"
assert_eq "$(cat "$dest/r.txt")" "vers" "the newest content wins (rewrite, truncate)"

# Concurrent writers, each its own file.
pids=()
for i in 1 2 3 4; do
	(head -c $((i * 500000)) /dev/urandom >"$DV_WORK/c$i" && cp "$DV_WORK/c$i" "$mnt/ckpt/c$i") &
	pids+=($!)
done
wait "${pids[@]}" # not the daemon
"$ctl" sync --timeout 60 "$mnt/ckpt"
ok=1
for i in 1 2 3 4; do cmp -s "$DV_WORK/c$i" "$dest/c$i" || ok=0; done
assert_eq "$ok" 1 "concurrent writers: every object matches"

# Outside the area: read-only as before.
errno_of() { python3 -c 'import errno, os, sys
try:
    exec(sys.argv[1]); print(0)
except OSError as e:
    print(errno.errorcode[e.errno])' "$1"; }
f="$mnt/demo/train/shard-000000.tar"
assert_eq "$(errno_of "open('$mnt/demo/train/new', 'w')")" EROFS "creating outside the area: EROFS"
assert_eq "$(errno_of "os.unlink('$f')")" EROFS "rm outside the area: EROFS"
assert_eq "$(errno_of "open('$f', 'r+b')")" EROFS "opening a shard for write: EROFS"
assert_eq "$(errno_of "os.utime('$f')")" EROFS "touch outside the area: EROFS"
assert_eq "$(errno_of "os.rename('$mnt/ckpt/r.txt', '$mnt/demo/r.txt')")" EXDEV "rename out of the area: EXDEV"
assert_eq "$(sha256sum <"$f")" "$(sha256sum <"$src/shard-000000.tar")" "shards still read"

# Status.
st=$(cat "$mnt/.datavo/status")
grep -q '"writeback": \[' <<<"$st" && pass "status has writeback" || fail "status has writeback" "$st"
grep -q '"pending_files": 0' <<<"$st" && pass "status: nothing pending" || fail "status: nothing pending" "$st"
dv_umount "$mnt" || fail "unmount"

# A name that is also a dataset is refused at mount.
write_config "$cfg" "$DV_WORK/tier" \
	"writeback:" "  - name: demo" "    destination: file://$dest" "    path: $land"
mnt2=$(dv_tmp mnt2)
out=$(HOME=$DV_WORK/home timeout 20 "${DATAVOFS:-$DV_ROOT/build/datavofs}" "file://$origin" "$mnt2" -f -o "config=$cfg" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "shards.yaml:9: key 'writeback.name': 'demo' is also a dataset" <<<"$out"; then
	pass "a write-back name that is a dataset is refused, naming file, line and key"
else
	fail "a write-back name that is a dataset is refused, naming file, line and key" "rc=$rc $out"
	mountpoint -q "$mnt2" && fusermount3 -u "$mnt2"
fi

# ENOSPC: a small tmpfs landing folder whose files cannot upload (nothing
# listens at the endpoint) fails the write and keeps every closed file.
small=$(dv_tmp small)
mount -t tmpfs -o size=4m tmpfs "$small" || bail "tmpfs"
write_config "$cfg" "$DV_WORK/tier" \
	"writeback:" "  - name: full" "    destination: s3://nobucket/p" "    path: $small/land" \
	"    endpoint: http://127.0.0.1:9"
mnt3=$(dv_tmp mnt3)
if dv_mount "file://$origin" "$mnt3" "config=$cfg"; then
	head -c $((2 << 20)) /dev/urandom >"$DV_WORK/k1"
	cp "$DV_WORK/k1" "$mnt3/full/k1" && pass "a file that fits is written" || fail "a file that fits is written"
	assert_eq "$(errno_of "open('$mnt3/full/k2', 'wb').write(os.urandom(3 << 20))")" ENOSPC "a write past the free space: ENOSPC"
	cmp -s "$DV_WORK/k1" "$mnt3/full/k1" && pass "the closed file is kept intact" || fail "the closed file is kept intact"
	assert_eq "$(getfattr --absolute-names --only-values -n user.datavo.sync "$mnt3/full/k1" 2>&1)" pending "and is still pending"
	dv_umount "$mnt3"
fi
umount "$small"
summary
