#!/usr/bin/env bash
# SIGKILL. The daemon killed mid-fill and mid-read,
# then a remount (B4: the dead fill leaves nothing a later mount serves);
# readers killed mid-open (the fill goes on) and mid-read. Each case: the
# reader's result, the next request served, a scan of every tier file.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 12 --kb 1024 --seed 81
publish kill/set "$src" "$origin" || bail "publish"
fo_start "$origin" || bail "fault origin"
tier="$DV_WORK/tier"
cfg="$DV_WORK/shards.yaml"
fault_config "$cfg" "local:$tier"
mnt=$(dv_tmp mnt)
name() { printf 'shard-%06d.tar' "$1"; }
sh() { sha_of "$origin" kill/set "$(name "$1")"; }
hs() { hash_of "$origin" kill/set "$(name "$1")"; }
staged() { find "$tier/.staging" -type f 2>/dev/null | wc -l; }

# A background reader: reads FILE in 64 KiB pieces, PAUSE seconds between
# them; writes "ERRNO BYTES SHA256-OK" to OUT at the end.
slow_reader() {
	python3 - "$1" "$2" "$3" "$4" <<-'PY' &
		import errno, hashlib, sys, time
		path, pause, out, want = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
		h, n, e = hashlib.sha256(), 0, "0"
		try:
		    with open(path, "rb") as f:
		        while True:
		            b = f.read(65536)
		            if not b:
		                break
		            h.update(b); n += len(b)
		            time.sleep(pause)
		except OSError as ex:
		    e = errno.errorcode.get(ex.errno, str(ex.errno))
		ok = "whole-and-right" if e == "0" and h.hexdigest() == want else ("WRONG" if e == "0" else "partial")
		open(out, "w").write("%s %d %s\n" % (e, n, ok))
	PY
	dv_track $! reader
}

# --- the daemon killed mid-fill ------------------------------------------------
dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "mount"
fo_set "$(hs 0)" "trickle,rate=65536"
slow_reader "$mnt/kill/set/$(name 0)" 0 "$DV_WORK/r0" "$(sh 0)"
r0=$!
for ((i = 0; i < 100; i++)); do [ "$(staged)" -gt 0 ] && break; sleep 0.1; done
sleep 1
assert_eq "$(staged)" 1 "mid-fill: a staging file is being written"
dv_kill_mount "$mnt"
for ((i = 0; i < 50; i++)); do [ -s "$DV_WORK/r0" ] && break; sleep 0.1; done
read -r e _ ok <"$DV_WORK/r0" 2>/dev/null
case "$e" in ENOTCONN | ECONNABORTED | EIO) pass "mid-fill kill: the reader gets $e" ;; *) fail "mid-fill kill: the reader gets a clean error" "got: $e $ok" ;; esac
KILL_FILL_READER=$e
[ -e "$tier/$(hs 0).tar" ] && fail "mid-fill kill: the shard is not installed" || pass "mid-fill kill: the shard is not installed"
scan_tiers "mid-fill kill: tier scan (dead staging file may remain)" "$origin" "$tier"
fo_clear
dv_mount "$FO_URL" "$mnt" "config=$cfg" log_level=info || bail "remount after SIGKILL"
assert_eq "$(staged)" 0 "remount: the dead fill's staging file is cleaned (B4)"
assert_eq "$(find "$tier/.locks" -type f | wc -l)" 0 "remount: no stale lock"
expect_read "remount: the shard killed mid-fill is served whole" "$mnt/kill/set/$(name 0)" 0 15 "$(sh 0)"
scan_tiers "remount: tier scan" "$origin" "$tier" --no-staging

# --- the daemon killed mid-read ------------------------------------------------
# Shard 8 is cold: its open fills it, then the reader crawls through it.
slow_reader "$mnt/kill/set/$(name 8)" 0.3 "$DV_WORK/r1" "$(sh 8)"
for ((i = 0; i < 100; i++)); do [ -e "$tier/$(hs 8).tar" ] && break; sleep 0.1; done
sleep 1
dv_kill_mount "$mnt"
for ((i = 0; i < 100; i++)); do [ -s "$DV_WORK/r1" ] && break; sleep 0.1; done
read -r e n ok <"$DV_WORK/r1" 2>/dev/null
# With the page cache (keep_cache) or passthrough the read may even finish;
# what must never happen is a whole read with the wrong bytes.
if [ "$ok" = WRONG ] || [ -z "$e" ]; then
	fail "mid-read kill: the reader gets right bytes or a clean error" "got: $e $n $ok"
else
	pass "mid-read kill: the reader ends with $e after $n bytes ($ok)"
fi
KILL_READ_READER="$e after $n bytes ($ok)"
dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "remount after the mid-read kill"
expect_read "mid-read kill: after a remount the shard reads whole" "$mnt/kill/set/$(name 8)" 0 10 "$(sh 8)"
expect_read "mid-read kill: and a cold one is fetched" "$mnt/kill/set/$(name 2)" 0 15 "$(sh 2)"
scan_tiers "mid-read kill: tier scan" "$origin" "$tier" --no-staging

# --- readers killed mid-open (fills in progress) and mid-read ------------------
for i in 3 4 5 6; do fo_set "$(hs 3)" "trickle,rate=262144" "$(hs 4)" "trickle,rate=262144" \
	"$(hs 5)" "trickle,rate=262144" "$(hs 6)" "trickle,rate=262144"; break; done
pids=()
for i in 3 4 5 6 3 4; do
	slow_reader "$mnt/kill/set/$(name "$i")" 0 "$DV_WORK/k$i.$RANDOM" "$(sh "$i")"
	pids+=($!)
done
for i in 1 2 1 2; do
	slow_reader "$mnt/kill/set/$(name "$i")" 0.2 "$DV_WORK/k$i.$RANDOM" "$(sh "$i")"
	pids+=($!)
done
sleep 1.5
kill -KILL "${pids[@]}" 2>/dev/null
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
pass "ten readers killed with SIGKILL (six mid-open, four mid-read)"
fo_clear
bad=0
for i in 1 2 3 4 5 6 7; do
	expect_read "after the readers died: $(name "$i")" "$mnt/kill/set/$(name "$i")" 0 20 "$(sh "$i")" >/dev/null || bad=$((bad + 1))
done
assert_eq "$bad" 0 "after the readers died: the daemon serves every shard whole (fills went on)"
for ((i = 0; i < 50; i++)); do
	of=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("open_files"))' "$mnt/.datavo/status" 2>/dev/null)
	[ "$of" = 0 ] && break
	sleep 0.2
done
assert_eq "$of" 0 "after the readers died: no handle leaked (status open_files)"
dv_umount_ok "$mnt" "after the readers died: the daemon unmounts and exits"
scan_tiers "readers killed: tier scan" "$origin" "$tier" --no-staging
assert_eq "$(find "$tier/.locks" -type f | wc -l)" 0 "no lock left behind"

if [ -n "${DV_FAULT_REPORT:-}" ]; then
	{
		echo "SIGKILL of the daemon mid-fill, then remount|-|reader: $KILL_FILL_READER; remount cleans staging, serves the shard|-"
		echo "SIGKILL of the daemon mid-read, then remount|-|reader: $KILL_READ_READER; remount serves|-"
		echo "SIGKILL of 10 readers mid-open and mid-read|-|fills complete, open_files back to 0|-"
	} >>"$DV_FAULT_REPORT"
fi
summary
