#!/usr/bin/env bash
# a published dataset under a nested name lists
# and stats with no shard GET; Python's tarfile reads every member of every
# shard through the mount with the source's bytes; the same over a file://
# origin; sixteen readers of one cold shard cause one GET (B1), and so do
# two daemons sharing one tier directory.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum getfattr

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 8 --kb 700 --seed 1
val=$(dv_tmp val)
mktars "$val" 2 --kb 900 --seed 2
publish demo/train "$src" "$origin" || bail "publish demo/train"
publish demo/val "$val" "$origin" || bail "publish demo/val"
nginx_start "$origin" || bail "nginx"

cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "mount"

# --- names and sizes without payload -----------------------------------------
assert_eq "$(ls "$mnt")" "demo" "the root lists the top of the nested name"
assert_eq "$(ls "$mnt/demo" | tr '\n' ' ')" "train val " "a nested dataset is a directory"
assert_eq "$(ls "$mnt/demo/train")" "$(ls "$src")" "the dataset lists its shards"
ok=1
for f in "$src"/*.tar; do
	n=$(basename "$f")
	[ "$(stat -c %s "$mnt/demo/train/$n")" = "$(stat -c %s "$f")" ] || { ok=0; fail "size of $n"; }
done
[ $ok = 1 ] && pass "stat gives every shard's size"
assert_eq "$(stat -c %F "$mnt/demo/train/shard-000000.tar")" "regular file" "a shard is a regular file"
assert_eq "$(nginx_count 'GET /shards/')" 0 "ls and stat fetch no shard"

# --- reading with Python's tarfile -------------------------------------------
if python3 - "$src" "$mnt/demo/train" <<-'PY'; then
	import hashlib, os, sys, tarfile
	src, mnt = sys.argv[1:3]
	members = 0
	for name in sorted(os.listdir(src)):
	    with tarfile.open(os.path.join(src, name)) as a, tarfile.open(os.path.join(mnt, name)) as b:
	        ma, mb = a.getmembers(), b.getmembers()
	        assert [m.name for m in ma] == [m.name for m in mb], name
	        for x, y in zip(ma, mb):
	            assert a.extractfile(x).read() == b.extractfile(y).read(), (name, x.name)
	            members += 1
	print("tarfile read %d members" % members)
	PY
	pass "tarfile iterates every member of every shard with the source's bytes"
else
	fail "tarfile iterates every member of every shard with the source's bytes"
fi
ok=1
for f in "$src"/*.tar; do
	want=$(sha256sum "$f" | cut -d' ' -f1)
	got=$(sha256sum "$mnt/demo/train/$(basename "$f")" | cut -d' ' -f1)
	[ "$want" = "$got" ] || { ok=0; fail "sha256 of $(basename "$f")"; }
done
[ $ok = 1 ] && pass "sha256 of every shard read equals the source"
assert_eq "$(nginx_count 'GET /shards/')" 8 "eight shards, eight origin GETs"
h0=$(shard_field "$origin" demo/train shard-000000.tar content_hash)
assert_eq "$(getfattr --only-values -n user.datavo.content_hash "$mnt/demo/train/shard-000000.tar" 2>/dev/null)" \
	"$h0" "xattr user.datavo.content_hash"
assert_eq "$(getfattr --only-values -n user.datavo.tier "$mnt/demo/train/shard-000000.tar" 2>/dev/null)" \
	"local" "xattr user.datavo.tier names the tier"
[ -f "$DV_WORK/tier/$h0.tar" ] && pass "the shard is in the tier as <hash>.tar" || fail "the shard is in the tier as <hash>.tar"

# --- sixteen readers, one cold shard: one GET (B1) ---------------------------
v0=$(shard_field "$origin" demo/val shard-000000.tar content_hash)
want=$(sha256sum "$val/shard-000000.tar" | cut -d' ' -f1)
out=$(dv_tmp sums)
pids=()
for i in $(seq 1 16); do
	sha256sum "$mnt/demo/val/shard-000000.tar" >"$out/$i" 2>&1 &
	pids+=($!)
done
wait "${pids[@]}"
assert_eq "$(cat "$out"/* | cut -d' ' -f1 | sort | uniq -c | awk '{ print $1, $2 }')" "16 $want" \
	"sixteen readers get sixteen correct copies"
assert_eq "$(nginx_count "GET /shards/$v0")" 1 "sixteen readers, one GET"

# --- two daemons sharing one tier directory ----------------------------------
mnt2=$(dv_tmp mnt2)
dv_mount "$NGINX_URL" "$mnt2" "config=$cfg" || bail "second mount"
v1=$(shard_field "$origin" demo/val shard-000001.tar content_hash)
want=$(sha256sum "$val/shard-000001.tar" | cut -d' ' -f1)
pids=()
for i in 1 2 3 4; do
	sha256sum "$mnt/demo/val/shard-000001.tar" >"$out/a$i" &
	pids+=($!)
	sha256sum "$mnt2/demo/val/shard-000001.tar" >"$out/b$i" &
	pids+=($!)
done
wait "${pids[@]}"
assert_eq "$(cat "$out"/a* "$out"/b* | cut -d' ' -f1 | sort | uniq -c | awk '{ print $1, $2 }')" "8 $want" \
	"both daemons serve the right bytes, eight times"
assert_eq "$(nginx_count "GET /shards/$v1")" 1 "two daemons on one tier, one GET"
dv_umount "$mnt2"

# --- the same over a file:// origin ------------------------------------------
cfg2="$DV_WORK/file.yaml"
write_config "$cfg2" "$DV_WORK/tier-file"
mnt3=$(dv_tmp mnt3)
dv_mount "file://$origin" "$mnt3" "config=$cfg2" || bail "file:// mount"
assert_eq "$(ls "$mnt3/demo/train")" "$(ls "$src")" "file:// origin lists the shards"
ok=1
for f in "$src"/*.tar; do
	want=$(sha256sum "$f" | cut -d' ' -f1)
	got=$(sha256sum "$mnt3/demo/train/$(basename "$f")" | cut -d' ' -f1)
	[ "$want" = "$got" ] || { ok=0; fail "file:// sha256 of $(basename "$f")"; }
done
[ $ok = 1 ] && pass "file:// origin: every shard reads with the source's bytes"
if python3 -c 'import sys, tarfile; print(len(tarfile.open(sys.argv[1]).getnames()))' "$mnt3/demo/train/shard-000003.tar" >/dev/null; then
	pass "file:// origin: tarfile opens a shard"
else
	fail "file:// origin: tarfile opens a shard"
fi
assert_eq "$(ls "$DV_WORK/tier-file"/*.tar | wc -l)" 8 "file:// origin fills the tier"
dv_umount "$mnt3"
dv_umount "$mnt"
assert_eq "${DV_LAST_EXIT:-?}" 0 "the daemon exits 0 after unmount"
assert_eq "$(find "$DV_WORK/tier/.staging" "$DV_WORK/tier/.locks" -type f | wc -l)" 0 "no staging files or locks remain"
summary
