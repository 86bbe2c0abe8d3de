#!/usr/bin/env bash
# every origin fault of tests/faults/origin.py, one
# shard each. Per case: the reader's result (success after retry, or the
# stated errno within a bound), that the daemon then serves the next request
# (a cold shard, fetched), and a scan of every <hash>.tar in the tier.
#
# Config: connect_timeout 2, low_speed_time 3, low_speed_limit 2048 B/s,
# retries 2 (three attempts), so that every fault resolves in seconds.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 40 --kb 256 --seed 61
publish fault/set "$src" "$origin" || bail "publish"
fo_start "$origin" || bail "fault origin"
tier="$DV_WORK/tier"
cfg="$DV_WORK/shards.yaml"
fault_config "$cfg" "local:$tier"
mnt=$(dv_tmp mnt)
dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "mount"

n=0
# case NAME SPEC ERRNO MAX_SECS [GETS]: shard n gets SPEC; reading it must end
# with ERRNO within MAX_SECS; GETS (an ERE) is the expected number of shard
# requests. Then the fault is cleared, shard n+1 (cold) must read correctly,
# shard n must read correctly too, and the tier must scan clean.
case_() {
	local name=$1 spec=$2 want=$3 max=$4 gets=${5:-} s h sh hn shn got
	s=$(printf 'shard-%06d.tar' "$n")
	h=$(hash_of "$origin" fault/set "$s")
	sh=$(sha_of "$origin" fault/set "$s")
	hn=$(hash_of "$origin" fault/set "$(printf 'shard-%06d.tar' $((n + 1)))")
	shn=$(sha_of "$origin" fault/set "$(printf 'shard-%06d.tar' $((n + 1)))")
	echo "# --- $name: $spec"
	fo_set "$h" "$spec"
	expect_read "$name: reader gets $want within ${max}s" "$mnt/fault/set/$s" "$want" "$max" "$sh"
	REPORT+=("$name|$spec|$DV_LAST_READ|$(fo_count "/shards/$h")")
	if [ -n "$gets" ]; then
		got=$(fo_count "GET /shards/$h")
		if grep -qE "^($gets)\$" <<<"$got"; then pass "$name: $got shard requests"; else fail "$name: shard requests" "got $got, expected $gets"; fi
	fi
	if [ "$want" != 0 ] && [ -e "$tier/$h.tar" ]; then
		fail "$name: nothing installed after a failed fill"
	fi
	fo_clear
	expect_read "$name: next request (cold shard) is served" "$mnt/fault/set/$(printf 'shard-%06d.tar' $((n + 1)))" 0 10 "$shn" >/dev/null ||
		fail "$name: the daemon serves the next request"
	expect_read "$name: the faulted shard reads correctly once the origin is healthy" "$mnt/fault/set/$s" 0 10 "$sh"
	scan_tiers "$name: tier scan" "$origin" "$tier" --no-staging
	n=$((n + 2))
}

REPORT=()
case_ "HTTP 500 once" "status,code=500,times=1" 0 5 2
case_ "HTTP 503 twice" "status,code=503,times=2" 0 8 3
case_ "HTTP 503 always" "status,code=503" EIO 8 3
case_ "hang (no answer)" "hang" ETIMEDOUT 20 3
# After a burst, libcurl's moving average takes ~3 low_speed_time to fall below
# the limit: about 9 s per attempt here.
case_ "stall mid-body" "stall,at=65536" ETIMEDOUT 40 3
case_ "reset mid-body once" "reset,times=1,at=100000" 0 5 2
case_ "reset mid-body always" "reset" EIO 8 3
case_ "truncated body once" "truncate,times=1" 0 5 2
case_ "truncated body always" "truncate" EIO 8 3
case_ "Content-Length too large" "badlen,delta=1000" EIO 5 1
case_ "Content-Length too small" "badlen,delta=-1000" EIO 5 1
case_ "corrupted bytes" "corrupt" EIO 5 1
case_ "1 KB/s trickle" "trickle,rate=1024" ETIMEDOUT 20 3
case_ "64 KB/s trickle, above the limit" "trickle,rate=65536" 0 15 1
case_ "redirect loop" "redirect" EIO 5 6
case_ "oversized headers" "bigheaders" EIO 5 1
case_ "Range ignored after a reset" "reset,times=1,then=norange" 0 5 2

# Resume: the retry after a reset asked for the rest only.
if grep -E "GET /shards/.* 206 " "$FO_LOG" | grep -q "bytes="; then
	pass "a retry after a reset resumes with a Range request"
else
	fail "a retry after a reset resumes with a Range request" "$(grep /shards/ "$FO_LOG" | tail -5)"
fi
if grep -q "corrupted bytes\|sha256" "$(dv_log "$mnt")"; then
	pass "the log says why the corrupt fill was refused"
else
	fail "the log says why the corrupt fill was refused"
fi
dv_umount_ok "$mnt" "the daemon unmounts cleanly after every fault"
scan_tiers "final tier scan" "$origin" "$tier" --no-staging

# The table of docs/reliability.md comes from this.
if [ -n "${DV_FAULT_REPORT:-}" ]; then
	printf '%s\n' "${REPORT[@]}" >>"$DV_FAULT_REPORT"
fi
printf '# %s\n' "${REPORT[@]}"
summary
