#!/usr/bin/env bash
# A slow client does not hold the metrics exporter: with a slow-loris client
# connected (a request head that never ends, a byte every 3 s, inside any
# per-read timeout), a scrape beside it is answered, and the unmount does not
# wait for the slow client (the daemon exits by itself well inside
# DV_UMOUNT_TIMEOUT, with status 0).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 curl

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 64 --seed 5
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" "metrics=127.0.0.1:0" || bail "mount"
addr=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["metrics"])' "$mnt/.datavo/status")

# The slow client: it runs for two minutes unless stopped.
python3 - "${addr%:*}" "${addr##*:}" <<-'PY' &
	import socket, sys, time
	s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
	s.sendall(b"GET /metrics HTTP/1.0\r\nX-Slow: ")
	for _ in range(40):
	    time.sleep(3)
	    try:
	        s.sendall(b"a")
	    except OSError:
	        break
PY
loris=$!
dv_track "$loris" slow-loris
sleep 1

code=$(curl -s -o "$DV_WORK/scrape" -w '%{http_code}' --max-time 15 "http://$addr/metrics")
assert_eq "$code" 200 "a scrape beside a slow client is answered"
assert_eq "$(grep -c '^datavofs_tier_hits_total{tier="local"} ' "$DV_WORK/scrape")" 1 \
	"the scrape holds the metrics"

# A generous bound: the exporter's own connection timeout is 10 s.
if DV_UMOUNT_TIMEOUT=15 dv_umount "$mnt"; then
	pass "the unmount does not wait for the slow client"
else
	fail "the unmount does not wait for the slow client"
fi
assert_eq "${DV_LAST_EXIT:-?}" 0 "the daemon exits 0"
dv_stop_pid "$loris" 2
summary
