#!/usr/bin/env bash
# Loaded pins are bounded: 80 revisions listed (`ls DS@N`), then the kernel
# made to forget its inodes (drop_caches): at most 64 pins the kernel no
# longer holds stay loaded (status pins_loaded), while a shard held open
# in DS@1 keeps reading DS@1's bytes and DS@1 stays. A pin listed again
# comes back from the disk cache (one GET of each revisions/N.json in all)
# with the same inode numbers.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 300 --seed 11
cp "$src/shard-000000.tar" "$DV_WORK/r1.tar"
publish demo/train "$src" "$origin" || bail "publish r1"
mktars "$src" 2 --kb 64 --seed 12
for n in $(seq 2 80); do
	publish demo/train "$src" "$origin" --revision "$n" || bail "publish r$n"
done
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" manifest_ttl=60 || bail "mount"

status() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
		"$mnt/.datavo/status" "$1"
}

# A reader holds DS@1's shard open: reads a third, waits, reads the rest.
fifo="$DV_WORK/go"
mkfifo "$fifo"
python3 - "$mnt/demo/train@1/shard-000000.tar" "$fifo" >"$DV_WORK/reader.out" 2>&1 <<-'PY' &
	import hashlib, os, sys
	f = open(sys.argv[1], "rb")
	h = hashlib.sha256()
	h.update(f.read(100000))
	print("opened", flush=True)
	open(sys.argv[2]).read()  # wait for the kernel to forget
	while True:
	    b = f.read(1 << 16)
	    if not b:
	        break
	    h.update(b)
	print(os.fstat(f.fileno()).st_size)
	print(h.hexdigest())
PY
reader=$!
for _ in $(seq 50); do grep -q opened "$DV_WORK/reader.out" && break; sleep 0.1; done

listed=0
for n in $(seq 1 80); do
	[ "$(ls "$mnt/demo/train@$n" 2>/dev/null | grep -c '^shard-')" = 2 ] && listed=$((listed + 1))
	stat -c %i "$mnt/demo/train@$n/shard-000001.tar" >>"$DV_WORK/inos.before"
done
assert_eq "$listed" 80 "ls DS@N shows 2 shards for each of 80 revisions"
loaded=$(status pins_loaded)
[ "$loaded" -gt 64 ] && pass "the kernel holding them, all pins stay loaded ($loaded)" ||
	fail "the kernel holding them, all pins stay loaded" "pins_loaded $loaded"

# The kernel forgets what it does not hold (forgets reach the daemon in batches).
sync
echo 3 >/proc/sys/vm/drop_caches
for _ in $(seq 100); do
	loaded=$(status pins_loaded)
	[ "$loaded" -le 65 ] && break
	echo 2 >/proc/sys/vm/drop_caches
	sleep 0.1
done
held=$(status pins_referenced)
[ "$loaded" -le 65 ] && [ $((loaded - held)) -le 64 ] &&
	pass "after drop_caches at most 64 unheld pins stay loaded ($loaded, $held held)" ||
	fail "after drop_caches at most 64 unheld pins stay loaded" "pins_loaded $loaded, referenced $held"
[ "$held" -ge 1 ] && pass "the pin of the open shard is still held" || fail "the pin of the open shard is still held" "referenced $held"
[ "$(status pins_evicted)" -ge 15 ] && pass "pins were evicted ($(status pins_evicted))" ||
	fail "pins were evicted" "pins_evicted $(status pins_evicted)"

timeout 20 bash -c 'echo go >"$1"' _ "$fifo" || fail "the reader is still there"
wait "$reader"
assert_eq "$(tail -1 "$DV_WORK/reader.out")" "$(sha256sum "$DV_WORK/r1.tar" | cut -d' ' -f1)" \
	"the reader holding DS@1's shard read DS@1's bytes to the end"
assert_eq "$(tail -2 "$DV_WORK/reader.out" | head -1)" "$(stat -c %s "$DV_WORK/r1.tar")" \
	"fstat of the held shard still answers, with DS@1's size"

# Listed again: the same inodes, the same bytes, no new GET of a revision.
for n in $(seq 1 80); do
	stat -c %i "$mnt/demo/train@$n/shard-000001.tar" >>"$DV_WORK/inos.after"
done
assert_eq "$(cmp -s "$DV_WORK/inos.before" "$DV_WORK/inos.after" && echo same)" same \
	"80 shard inodes are the same after eviction and reload"
assert_eq "$(sha256sum <"$mnt/demo/train@2/shard-000000.tar")" "$(sha256sum <"$src/shard-000000.tar")" \
	"a reloaded pin serves its bytes"
assert_eq "$(sha256sum <"$mnt/demo/train@1/shard-000000.tar")" "$(sha256sum <"$DV_WORK/r1.tar")" \
	"DS@1 serves revision 1's bytes"
assert_eq "$(nginx_count 'GET /demo/train/revisions/[0-9]+\.json')" 80 \
	"one GET of each revisions/N.json: reloads come from the disk cache"
dv_umount "$mnt"
assert_eq "${DV_LAST_EXIT:-?}" 0 "the daemon exits 0"
summary
