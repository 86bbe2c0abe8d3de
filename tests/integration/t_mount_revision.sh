#!/usr/bin/env bash
# a revision published while mounted shows up after
# the TTL; a reader holding an old shard open keeps reading the old bytes;
# <dataset>@1 still shows revision 1.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum getfattr

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 3 --kb 400 --seed 7
cp "$src/shard-000000.tar" "$DV_WORK/old0.tar"
publish demo/train "$src" "$origin" || bail "publish r1"
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" manifest_ttl=1 || bail "mount"
f="$mnt/demo/train/shard-000000.tar"
old_hash=$(getfattr --only-values -n user.datavo.content_hash "$f" 2>/dev/null)

# A reader opens the old shard and reads half of it, then waits.
fifo="$DV_WORK/go"
mkfifo "$fifo"
python3 - "$f" "$fifo" >"$DV_WORK/reader.out" 2>&1 <<-'PY' &
	import hashlib, sys
	f = open(sys.argv[1], "rb")
	h = hashlib.sha256()
	h.update(f.read(100000))
	print("opened", flush=True)
	open(sys.argv[2]).read()  # wait for the new revision
	while True:
	    b = f.read(1 << 16)
	    if not b:
	        break
	    h.update(b)
	print(h.hexdigest())
PY
reader=$!
for _ in $(seq 50); do grep -q opened "$DV_WORK/reader.out" && break; sleep 0.1; done

# Revision 2 changes shard 0. nginx's ETag is the file's mtime in whole
# seconds and its size: a manifest of the same size rewritten within the
# same second would look unchanged to If-None-Match. Publishers are slower
# than that in practice; the test makes sure of it.
sleep 1.1
mktars "$DV_WORK/new" 1 --kb 500 --seed 70
cp "$DV_WORK/new/shard-000000.tar" "$src/shard-000000.tar"
publish demo/train "$src" "$origin" || bail "publish r2"
assert_eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["revision"])' "$origin/demo/train/manifest.json")" 2 \
	"publishing changed tars makes revision 2"
sleep 2.5
new_hash=$(getfattr --only-values -n user.datavo.content_hash "$f" 2>/dev/null)
if [ -n "$new_hash" ] && [ "$new_hash" != "$old_hash" ]; then pass "after the TTL the new revision shows"; else fail "after the TTL the new revision shows" "$old_hash -> $new_hash"; fi
assert_eq "$(stat -c %s "$f")" "$(stat -c %s "$src/shard-000000.tar")" "the new size shows"
assert_eq "$(sha256sum <"$f")" "$(sha256sum <"$src/shard-000000.tar")" "a new open reads the new bytes"

# A reader that died never opens the fifo: do not wait for it forever.
timeout 20 bash -c 'echo go >"$1"' _ "$fifo" || fail "the reader is still there"
wait "$reader"
assert_eq "$(tail -1 "$DV_WORK/reader.out")" "$(sha256sum "$DV_WORK/old0.tar" | cut -d' ' -f1)" \
	"the reader holding the old shard read the old bytes to the end"

pinned="$mnt/demo/train@1/shard-000000.tar"
assert_eq "$(getfattr --only-values -n user.datavo.content_hash "$pinned" 2>/dev/null)" "$old_hash" "demo/train@1 still shows revision 1"
assert_eq "$(sha256sum <"$pinned")" "$(sha256sum <"$DV_WORK/old0.tar")" "demo/train@1 serves revision 1's bytes"
assert_eq "$(ls "$mnt/demo")" "train" "a pinned revision is not listed"
dv_umount "$mnt"
summary
