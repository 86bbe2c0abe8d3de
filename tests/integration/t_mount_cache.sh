#!/usr/bin/env bash
# a remount serves every cached shard with no
# shard GET (B8); with nginx stopped a remount still lists and serves what is
# cached (B7) and an uncached shard is EIO within the timeouts, not a hang;
# bytes that do not match the manifest are EIO, never installed, logged, and
# the next open after the origin is fixed succeeds (B2).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 8 --kb 300 --seed 3
cold=$(dv_tmp cold)
bad=$(dv_tmp bad)
mktars "$cold" 1 --kb 200 --seed 4
mktars "$bad" 1 --kb 200 --seed 5
publish demo/train "$src" "$origin" || bail "publish"
publish demo/cold "$cold" "$origin" || bail "publish cold"
publish demo/bad "$bad" "$origin" || bail "publish bad"
nginx_start "$origin" || bail "nginx"
port=$NGINX_PORT
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)

dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "mount"
cat "$mnt"/demo/train/*.tar >/dev/null
assert_eq "$(nginx_count 'GET /shards/')" 8 "first pass: eight GETs"
inodes=$(stat -c '%n %i' "$mnt"/demo "$mnt"/demo/train "$mnt"/demo/train/*.tar)
dv_umount "$mnt"

# --- B8: a remount reuses the tier ------------------------------------------
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "remount"
assert_eq "$(stat -c '%n %i' "$mnt"/demo "$mnt"/demo/train "$mnt"/demo/train/*.tar)" "$inodes" \
	"inode numbers are stable across remounts"
ok=1
for f in "$src"/*.tar; do
	[ "$(sha256sum <"$mnt/demo/train/$(basename "$f")")" = "$(sha256sum <"$f")" ] || ok=0
done
[ $ok = 1 ] && pass "after a remount every shard reads correctly" || fail "after a remount every shard reads correctly"
assert_eq "$(nginx_count 'GET /shards/')" 8 "after a remount: no shard GET (B8)"
dv_umount "$mnt"

# --- B7: origin down ---------------------------------------------------------
nginx_stop
dv_mount "http://127.0.0.1:$port" "$mnt" "config=$cfg" || bail "mount with the origin down"
assert_eq "$(ls "$mnt/demo" | tr '\n' ' ')" "bad cold train " "origin down: the datasets still list"
ok=1
for f in "$src"/*.tar; do
	[ "$(sha256sum <"$mnt/demo/train/$(basename "$f")")" = "$(sha256sum <"$f")" ] || ok=0
done
[ $ok = 1 ] && pass "origin down: every cached shard is served" || fail "origin down: every cached shard is served"
start=$(date +%s)
assert_eq "$(read_errno "$mnt/demo/cold/shard-000000.tar")" EIO "origin down: an uncached shard is EIO"
took=$(($(date +%s) - start))
if [ "$took" -le 30 ]; then pass "origin down: EIO came in ${took}s, not a hang"; else fail "origin down: EIO took ${took}s"; fi
assert_eq "$(ls "$mnt/demo/train" | wc -l)" 8 "the mount still serves after the failed read"
dv_umount "$mnt"

# --- B2: wrong bytes at the origin ------------------------------------------
nginx_start "$origin" "$port" || bail "nginx restart"
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "mount again"
bh=$(shard_field "$origin" demo/bad shard-000000.tar content_hash)
good="$DV_WORK/good.tar"
cp "$origin/shards/$bh.tar" "$good"
python3 - "$origin/shards/$bh.tar" <<-'PY'
	import sys
	p = sys.argv[1]
	b = bytearray(open(p, "rb").read())
	b[len(b) // 2] ^= 0xff
	open(p, "wb").write(b)
PY
assert_eq "$(read_errno "$mnt/demo/bad/shard-000000.tar")" EIO "corrupt origin bytes: the reader gets EIO"
if ls "$DV_WORK/tier/$bh.tar" >/dev/null 2>&1; then fail "corrupt bytes are not installed"; else pass "corrupt bytes are not installed"; fi
assert_eq "$(find "$DV_WORK/tier/.staging" -type f | wc -l)" 0 "nothing left in .staging"
if grep -q "demo/bad/shard-000000.tar ($bh).*sha256" "$(dv_log "$mnt")"; then
	pass "the log names the shard and the reason"
else
	fail "the log names the shard and the reason" "$(tail -5 "$(dv_log "$mnt")")"
fi
# On the keep_cache path the failed fill pushed its bytes into the kernel's
# page cache as they came: they must be gone. The right shard put in the
# tier by hand is a hit with no fill, so a read shows what the kernel kept.
cp "$good" "$DV_WORK/tier/$bh.tar"
assert_eq "$(sha256sum <"$mnt/demo/bad/shard-000000.tar")" "$(sha256sum <"$good")" \
	"the kernel's cache keeps no byte of a fill that failed"
rm -f "$DV_WORK/tier/$bh.tar"
cp "$good" "$origin/shards/$bh.tar"
chmod a+r "$origin/shards/$bh.tar"
assert_eq "$(read_errno "$mnt/demo/bad/shard-000000.tar")" 0 "once the origin is fixed the next open succeeds"
assert_eq "$(sha256sum <"$mnt/demo/bad/shard-000000.tar")" "$(sha256sum <"$good")" "and serves the right bytes"
dv_umount "$mnt"
summary
