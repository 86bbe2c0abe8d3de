#!/usr/bin/env bash
# after reading 8 cold shards, then the same 8 again,
# a scrape of -o metrics passes `promtool check metrics` and its counters
# equal the workload: 8 origin fetches, 8 misses then 8 hits, bytes equal to
# the shard sizes. Also: the status file and `datavoctl status` say the
# same; every documented metric has HELP and TYPE; the exporter refuses a
# port in use at mount time, warns about a non-loopback address, and
# answers 404 off /metrics.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 curl promtool

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 8 --kb 300 --seed 11
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier" "dollars_per_gb: 0.09"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" "metrics=127.0.0.1:0" || bail "mount"

total=0
for f in "$src"/*.tar; do total=$((total + $(stat -c %s "$f"))); done

addr=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["metrics"])' "$mnt/.datavo/status")
case "$addr" in 127.0.0.1:[0-9]*) pass "the status file gives the exporter's address ($addr)" ;;
*) bail "the status file gives the exporter's address" "got '$addr'" ;; esac

# metric NAME [LABELS]: the value of one sample of the last scrape.
metric() {
	local m=$1
	[ -n "${2:-}" ] && m="$1{$2}"
	M=$m awk '$1 == ENVIRON["M"] { print $2 }' "$DV_WORK/scrape"
}
scrape() {
	curl -sf --max-time 5 "http://$addr/metrics" >"$DV_WORK/scrape" || fail "scrape $1"
	if out=$(promtool check metrics <"$DV_WORK/scrape" 2>&1); then
		pass "promtool check metrics passes ($1)"
	else
		fail "promtool check metrics passes ($1)" "$out"
	fi
}

# --- cold: 8 shards from the origin ------------------------------------------
for f in "$mnt"/demo/train/*.tar; do cat "$f" >/dev/null; done
scrape "after 8 cold reads"
assert_eq "$(nginx_count 'GET /shards/')" 8 "nginx: 8 shard GETs"
assert_eq "$(metric datavofs_origin_requests_total)" 8 "cold: 8 origin requests"
assert_eq "$(metric datavofs_origin_bytes_total)" "$total" "cold: origin bytes = the shards' sizes ($total)"
assert_eq "$(metric datavofs_fills_total)" 8 "cold: 8 fills"
assert_eq "$(metric datavofs_fill_bytes_total)" "$total" "cold: fill bytes = the shards' sizes"
assert_eq "$(metric datavofs_tier_misses_total 'tier="local"')" 8 "cold: 8 misses"
assert_eq "$(metric datavofs_tier_hits_total 'tier="local"')" 0 "cold: 0 hits"
assert_eq "$(metric datavofs_tier_served_bytes_total 'tier="local"')" "$total" "cold: served bytes = the shards' sizes"
assert_eq "$(metric datavofs_fill_duration_seconds_count)" 8 "cold: the fill histogram counted 8 fills"
assert_eq "$(metric datavofs_fill_duration_seconds_bucket 'le="+Inf"')" 8 "cold: +Inf bucket = 8"
assert_eq "$(metric datavofs_tier_objects 'tier="local"')" 8 "cold: the tier holds 8 objects"
assert_eq "$(metric datavofs_tier_used_bytes 'tier="local"')" "$total" "cold: the tier uses the shards' sizes"
assert_eq "$(metric datavofs_egress_saved_bytes_total)" 0 "cold: nothing saved yet"

# --- warm: the same 8 again, all hits -----------------------------------------
for f in "$mnt"/demo/train/*.tar; do cat "$f" >/dev/null; done
scrape "after 8 warm reads"
assert_eq "$(nginx_count 'GET /shards/')" 8 "nginx: still 8 shard GETs"
assert_eq "$(metric datavofs_origin_requests_total)" 8 "warm: still 8 origin requests"
assert_eq "$(metric datavofs_origin_bytes_total)" "$total" "warm: origin bytes unchanged"
assert_eq "$(metric datavofs_tier_misses_total 'tier="local"')" 8 "warm: still 8 misses"
assert_eq "$(metric datavofs_tier_hits_total 'tier="local"')" 8 "warm: 8 hits"
assert_eq "$(metric datavofs_tier_served_bytes_total 'tier="local"')" $((2 * total)) "warm: served bytes = twice the sizes"
assert_eq "$(metric datavofs_egress_saved_bytes_total)" "$total" "warm: egress saved = the shards' sizes"
want=$(python3 -c "print('%.9g' % ($total / 1e9 * 0.09))")
assert_eq "$(metric datavofs_egress_saved_dollars_total)" "$want" "warm: dollars saved = bytes / 1e9 * 0.09"
assert_eq "$(metric datavofs_open_files)" 0 "no file open"
assert_eq "$(metric datavofs_errors_total 'kind="origin"')" 0 "no origin error"

# --- every documented metric is there with HELP and TYPE -----------------------
missing=""
for m in datavofs_tier_hits_total datavofs_tier_misses_total datavofs_tier_served_bytes_total \
	datavofs_origin_requests_total datavofs_origin_bytes_total datavofs_egress_saved_bytes_total \
	datavofs_egress_saved_dollars_total datavofs_fill_duration_seconds datavofs_tier_evictions_total \
	datavofs_tier_used_bytes datavofs_tier_capacity_bytes datavofs_tier_objects datavofs_open_files \
	datavofs_errors_total datavofs_verify_failures_total; do
	grep -q "^# HELP $m " "$DV_WORK/scrape" && grep -q "^# TYPE $m " "$DV_WORK/scrape" || missing+=" $m"
done
assert_eq "$missing" "" "every documented metric has HELP and TYPE"
assert_eq "$(grep '^# TYPE datavofs_fill_duration_seconds ' "$DV_WORK/scrape" | cut -d' ' -f4)" histogram \
	"the fill latency is a histogram"
assert_eq "$(grep -c '^datavofs_tier_[a-z_]*{tier="local"}' "$DV_WORK/scrape")" 12 "twelve per-tier series carry tier=\"local\""

# --- the status file and datavoctl status say the same ------------------------
read -r hits misses served req <<<"$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1])); t = s["tiers"][0]
print(t["hits"], t["misses"], t["bytes_served"], s["origin_requests"])' "$mnt/.datavo/status")"
assert_eq "$hits $misses $served $req" "8 8 $((2 * total)) 8" "the status file: 8 hits, 8 misses, bytes, 8 requests"
out=$("$DATAVOCTL" status "$mnt" 2>&1)
echo "$out" | sed 's/^/# /'
if echo "$out" | grep -Eq '^local +folder ' && echo "$out" | grep -q "origin:   8 requests" &&
	echo "$out" | grep -q "http://$addr/metrics"; then
	pass "datavoctl status prints tiers, origin requests and the metrics URL"
else
	fail "datavoctl status prints tiers, origin requests and the metrics URL"
fi
if "$DATAVOCTL" status --json "$mnt" | python3 -c 'import json, sys; json.load(sys.stdin)'; then
	pass "datavoctl status --json is JSON"
else
	fail "datavoctl status --json is JSON"
fi
"$DATAVOCTL" status "$DV_WORK" >/dev/null 2>&1
assert_eq "$?" 1 "datavoctl status on a directory that is no mount exits 1"

# --- HTTP edges ---------------------------------------------------------------
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/nope")" 404 "off /metrics: 404"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$addr/metrics")" 405 "POST: 405"
ctype=$(curl -s -o /dev/null -w '%{content_type}' "http://$addr/metrics")
assert_eq "$ctype" "text/plain; version=0.0.4; charset=utf-8" "the exposition content type"

# --- binding rules ------------------------------------------------------------
port=${addr##*:}
mnt2=$(dv_tmp mnt2)
out=$(HOME=$DV_WORK/home "$(_dv_bin)" "$NGINX_URL" "$mnt2" -f -o "config=$cfg,metrics=127.0.0.1:$port" 2>&1)
rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q "cannot listen on 127.0.0.1:$port"; then
	pass "a port in use fails the mount with a message"
else
	fail "a port in use fails the mount with a message" "rc=$rc" "$out"
	mountpoint -q "$mnt2" && fusermount3 -u "$mnt2"
fi
dv_mount "$NGINX_URL" "$mnt2" "config=$cfg" "metrics=0.0.0.0:0" || bail "mount on 0.0.0.0"
if grep -q "not a loopback address" "$(dv_log "$mnt2")"; then
	pass "a non-loopback address, asked for explicitly, is served with a warning"
else
	fail "a non-loopback address, asked for explicitly, is served with a warning" "$(cat "$(dv_log "$mnt2")")"
fi
dv_umount "$mnt2"
dv_mount "$NGINX_URL" "$mnt2" "config=$cfg" || bail "mount without metrics"
assert_eq "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["metrics"])' "$mnt2/.datavo/status")" \
	None "without -o metrics (and none in the config) nothing listens"
dv_umount "$mnt2"
cfg_on="$DV_WORK/metrics-on.yaml"
write_config "$cfg_on" "$DV_WORK/tier" "metrics: 127.0.0.1:$port"
dv_mount "$NGINX_URL" "$mnt2" "config=$cfg_on" "metrics=off" || bail "mount with metrics=off"
assert_eq "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["metrics"])' "$mnt2/.datavo/status")" \
	None "-o metrics=off overrides 'metrics:' of the config"
dv_umount "$mnt2"
dv_umount "$mnt"
assert_eq "${DV_LAST_EXIT:-?}" 0 "the daemon with an exporter exits 0 after unmount"
if curl -s --max-time 2 "http://$addr/metrics" >/dev/null; then
	fail "the exporter stops with the daemon"
else
	pass "the exporter stops with the daemon"
fi
summary
