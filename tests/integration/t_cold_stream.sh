#!/usr/bin/env bash
# The cold path with chunk lists: reads stream while a shard fills, every
# chunk verified, several ranged fetches in flight. Against the fault
# origin (tests/faults/origin.py), whose log counts every request and range:
#   - a cold shard reads correctly; each chunk is fetched once, the chunk
#     list once; the shard is installed whole, and the next open is local;
#   - sixteen readers of one cold shard: each chunk still fetched once;
#   - a reader that seeks to the end is answered before the fill is done;
#   - a stall from chunk k on: earlier chunks are served while the fill is
#     stuck, later reads time out within the bound; nothing installed;
#   - a corrupted chunk: fetched twice, only the reads that need it fail,
#     nothing installed; once the origin is fixed, only that chunk is
#     fetched again and the shard is installed;
#   - SIGKILL mid-fill: the remount fetches only the chunks it lacks;
#   - a chunk list missing, truncated or not matching its pin: EIO for that
#     shard, a log line, the other shards unaffected.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum

CS=65536 # chunk size of this test's lists
src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 8 --kb 1200 --seed 131
publish_chunked cold/set "$src" "$origin" --chunk-size 64KiB || bail "publish"
fo_start "$origin" || bail "fault origin"
tier="$DV_WORK/tier"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$tier" "fill:" "  parallel: 4" "  timeout: 4"
mnt=$(dv_tmp mnt)
dv_mount "$FO_URL" "$mnt" "config=$cfg" log_level=info || bail "mount"

shard() { printf 'shard-%06d.tar' "$1"; }
size_of() { stat -c %s "$src/$1"; }
nchunks() { echo $(((($(size_of "$1") + CS - 1) / CS))); }
# ranges NAME: the Range of every GET of shard NAME's payload, one a line.
ranges() {
	local h
	h=$(hash_of "$origin" cold/set "$1")
	awk -v p="/shards/$h.tar" '$2 == "GET" && $3 == p { print $6 }' "$FO_LOG"
}
# wait_installed NAME: until the tier holds the shard (the fill goes on
# after the reader is done).
wait_installed() {
	local h i
	h=$(hash_of "$origin" cold/set "$1")
	for ((i = 0; i < 100; i++)); do
		[ -f "$tier/$h.tar" ] && return 0
		sleep 0.1
	done
	return 1
}

# wait_settled NAME: until no request of shard NAME has come for a second.
wait_settled() {
	local n i m
	n=$(ranges "$1" | grep -c .)
	for ((i = 0; i < 50; i++)); do
		sleep 1
		m=$(ranges "$1" | grep -c .)
		[ "$m" = "$n" ] && return 0
		n=$m
	done
}

# --- a cold shard ------------------------------------------------------------
s=$(shard 0)
h=$(hash_of "$origin" cold/set "$s")
expect_read "a cold chunked shard reads whole and right" "$mnt/cold/set/$s" 0 30 "$(sha_of "$origin" cold/set "$s")"
assert_eq "$(python3 -c 'import sys, tarfile; print(len(tarfile.open(sys.argv[1]).getmembers()) > 0)' "$mnt/cold/set/$s")" True \
	"tarfile reads its members through the mount"
wait_installed "$s" && pass "the shard is installed once the fill ends" || fail "the shard is installed once the fill ends"
assert_eq "$(fo_count "GET /shards/$h.chunks")" 1 "the chunk list is fetched once"
assert_eq "$(ranges "$s" | grep -c .)" "$(nchunks "$s")" "one ranged GET per chunk"
assert_eq "$(ranges "$s" | sort | uniq -d | grep -c .)" 0 "no chunk fetched twice"
assert_eq "$(ranges "$s" | grep -vc '^bytes=')" 0 "every payload GET is ranged"
before=$(fo_count "/shards/$h")
cat "$mnt/cold/set/$s" >/dev/null
assert_eq "$(fo_count "/shards/$h")" "$before" "the next read is local: no request"
assert_eq "$(sha256sum <"$tier/$h.tar" | cut -d' ' -f1)" "$(sha_of "$origin" cold/set "$s")" "the installed file is the shard"

# --- sixteen readers ------------------------------------------------------------
s=$(shard 1)
want=$(sha_of "$origin" cold/set "$s")
pids=()
for i in $(seq 16); do
	(sha256sum <"$mnt/cold/set/$s" | cut -d' ' -f1 >"$DV_WORK/r$i") &
	pids+=($!)
done
wait "${pids[@]}"
bad=0
for i in $(seq 16); do [ "$(cat "$DV_WORK/r$i")" = "$want" ] || bad=$((bad + 1)); done
assert_eq "$bad" 0 "sixteen readers of one cold shard all read it right"
assert_eq "$(ranges "$s" | grep -c .)" "$(nchunks "$s")" "sixteen readers: one GET per chunk"
assert_eq "$(ranges "$s" | sort | uniq -d | grep -c .)" 0 "sixteen readers: no chunk fetched twice"

# --- two daemons on one tier ------------------------------------------------------
mnt2=$(dv_tmp mnt2)
dv_mount "$FO_URL" "$mnt2" "config=$cfg" || bail "second mount"
s=$(shard 7)
want=$(sha_of "$origin" cold/set "$s")
(sha256sum <"$mnt/cold/set/$s" | cut -d' ' -f1 >"$DV_WORK/d1") &
p1=$!
(sha256sum <"$mnt2/cold/set/$s" | cut -d' ' -f1 >"$DV_WORK/d2") &
p2=$!
wait "$p1" "$p2"
assert_eq "$(cat "$DV_WORK/d1") $(cat "$DV_WORK/d2")" "$want $want" "two daemons on one tier read one cold shard right"
assert_eq "$(ranges "$s" | grep -c .)" "$(nchunks "$s")" "two daemons on one tier: the shard is fetched once"
dv_umount "$mnt2"

# --- a reader that seeks to the end ----------------------------------------------
s=$(shard 2)
h=$(hash_of "$origin" cold/set "$s")
size=$(size_of "$s")
fo_set "$h" "trickle,rate=131072" # half a second a chunk
got=$(python3 - "$mnt/cold/set/$s" "$size" <<-'PY'
	import sys
	with open(sys.argv[1], "rb") as f:
	    f.seek(int(sys.argv[2]) - 1024)
	    print(len(f.read(1024)))
	PY
)
n_at_read=$(ranges "$s" | grep -c .)
assert_eq "$got" 1024 "a seek to the end reads the last KiB"
last=$(((size - 1) / CS * CS))
if ranges "$s" | grep -q "^bytes=$last-"; then pass "the last chunk was asked for"; else fail "the last chunk was asked for" "$(ranges "$s" | tr '\n' ' ')"; fi
if [ "$n_at_read" -le 6 ] && [ "$n_at_read" -lt "$(nchunks "$s")" ]; then
	pass "a seek to the end is answered before the whole shard ($n_at_read of $(nchunks "$s") chunks asked for)"
else
	fail "a seek to the end is answered before the whole shard" "$n_at_read of $(nchunks "$s") chunks asked for"
fi
fo_clear
wait_installed "$s" && pass "the fill goes on after the reader closed" || fail "the fill goes on after the reader closed"

# --- unmounted while a fill runs -------------------------------------------------
# The fill is cancelled (its verified chunks kept), and the daemon exits cleanly.
s=$(shard 6)
h=$(hash_of "$origin" cold/set "$s")
fo_set "$h" "trickle,rate=65536"
head -c 1000 "$mnt/cold/set/$s" >/dev/null
log=$(dv_log "$mnt")
dv_umount "$mnt"
if grep -q "stopped (clean)" "$log"; then pass "unmounted while a fill runs: the daemon stops cleanly"; else fail "unmounted while a fill runs: the daemon stops cleanly" "$(tail -5 "$log")"; fi
fo_clear
dv_mount "$FO_URL" "$mnt" "config=$cfg" log_level=info || bail "remount"

# --- a stall from chunk 4 on ----------------------------------------------------
s=$(shard 3)
h=$(hash_of "$origin" cold/set "$s")
fo_set "$h" "stall,from=$((4 * CS)),at=0"
got=$(python3 - "$mnt/cold/set/$s" "$CS" <<-'PY'
	import hashlib, sys
	f = open(sys.argv[1], "rb")
	print(hashlib.sha256(f.read(4 * int(sys.argv[2]))).hexdigest())
	PY
)
assert_eq "$got" "$(head -c $((4 * CS)) "$src/$s" | sha256sum | cut -d' ' -f1)" "a stall: the chunks before it are served while the fill is stuck"
expect_read "a stall: a read past it times out" "$mnt/cold/set/$s" ETIMEDOUT 20
[ ! -e "$tier/$h.tar" ] && pass "a stall: nothing installed" || fail "a stall: nothing installed"
fo_clear

# --- a corrupted chunk ----------------------------------------------------------
s=$(shard 4)
h=$(hash_of "$origin" cold/set "$s")
bad_at=$((6 * CS + 100))
fo_set "$h" "corrupt,at=$bad_at"
expect_read "a corrupted chunk: a read through it is EIO" "$mnt/cold/set/$s" EIO 20
wait_settled "$s"
assert_eq "$(ranges "$s" | grep -c "^bytes=$((6 * CS))-")" 2 "a corrupted chunk is fetched twice, then given up"
got=$(python3 - "$mnt/cold/set/$s" "$CS" <<-'PY'
	import hashlib, sys
	f = open(sys.argv[1], "rb")
	print(hashlib.sha256(f.read(6 * int(sys.argv[2]))).hexdigest())
	PY
)
assert_eq "$got" "$(head -c $((6 * CS)) "$src/$s" | sha256sum | cut -d' ' -f1)" "a corrupted chunk: the reads before it get their bytes"
wait_settled "$s"
[ ! -e "$tier/$h.tar" ] && pass "a corrupted chunk: nothing installed" || fail "a corrupted chunk: nothing installed"
grep -qE "chunk 6 .* does not match its digest" "$(dv_log "$mnt")" && pass "a corrupted chunk is logged" || fail "a corrupted chunk is logged"
fo_clear
n_before=$(ranges "$s" | grep -c .)
expect_read "the origin fixed: the next open reads it" "$mnt/cold/set/$s" 0 30 "$(sha_of "$origin" cold/set "$s")"
wait_installed "$s" && pass "the origin fixed: installed" || fail "the origin fixed: installed"
assert_eq "$(ranges "$s" | tail -n +$((n_before + 1)) | tr '\n' ' ')" "bytes=$((6 * CS))-$((7 * CS - 1)) " \
	"the origin fixed: only the bad chunk is fetched again"

# --- SIGKILL mid-fill -----------------------------------------------------------
s=$(shard 5)
h=$(hash_of "$origin" cold/set "$s")
size=$(size_of "$s")
fo_set "$h" "trickle,rate=65536" # a second a chunk
head -c $((6 * CS)) "$mnt/cold/set/$s" >/dev/null
dv_kill_mount "$mnt"
done_before=$(ranges "$s" | grep -c .)
fo_clear
dv_mount "$FO_URL" "$mnt" "config=$cfg" log_level=info || bail "remount"
n_before=$(ranges "$s" | grep -c .)
expect_read "SIGKILL mid-fill: the remount reads it right" "$mnt/cold/set/$s" 0 30 "$(sha_of "$origin" cold/set "$s")"
wait_installed "$s" || true
after=$(ranges "$s" | tail -n +$((n_before + 1)) | grep -c .)
if [ "$after" -lt "$(nchunks "$s")" ] && [ "$after" -gt 0 ]; then
	pass "SIGKILL mid-fill: the remount fetches only what it lacks ($after of $(nchunks "$s") chunks; $done_before asked before the kill)"
else
	fail "SIGKILL mid-fill: the remount fetches only what it lacks" "$after of $(nchunks "$s") chunks"
fi
assert_eq "$(ranges "$s" | tail -n +$((n_before + 1)) | sort | uniq -d | grep -c .)" 0 "SIGKILL mid-fill: no chunk fetched twice after the remount"

# --- bad chunk lists ------------------------------------------------------------
s=$(shard 6)
h=$(hash_of "$origin" cold/set "$s")
cp "$origin/shards/$h.chunks" "$DV_WORK/good.chunks"
head -c 200 "$DV_WORK/good.chunks" >"$origin/shards/$h.chunks"
expect_read "a truncated chunk list: EIO" "$mnt/cold/set/$s" EIO 20
grep -q "no usable chunk list" "$(dv_log "$mnt")" && pass "a bad chunk list is logged" || fail "a bad chunk list is logged"
sed 's/^\(.\{20\}\)./\1x/;4s/^0/1/;4s/^[1-9a-f]/0/' "$DV_WORK/good.chunks" >"$origin/shards/$h.chunks"
expect_read "a chunk list that does not match its pin: EIO" "$mnt/cold/set/$s" EIO 20
rm -f "$origin/shards/$h.chunks"
expect_read "a missing chunk list: EIO" "$mnt/cold/set/$s" EIO 20
[ ! -e "$tier/$h.tar" ] && pass "a bad chunk list: nothing installed" || fail "a bad chunk list: nothing installed"
s=$(shard 7)
expect_read "a bad chunk list: the other shards are unaffected" "$mnt/cold/set/$s" 0 30 "$(sha_of "$origin" cold/set "$s")"
cp "$DV_WORK/good.chunks" "$origin/shards/$h.chunks"
expect_read "the chunk list restored: the shard reads" "$mnt/cold/set/$(shard 6)" 0 30 "$(sha_of "$origin" cold/set "$(shard 6)")"

dv_umount "$mnt"
summary
