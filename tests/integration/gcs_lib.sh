# shellcheck shell=bash
# tests/integration/gcs_lib.sh: the GCS emulator (firebase-tools' Cloud
# Storage emulator, run by tests/integration/gcs-emu.js without its Java
# rules runtime) for the t_gcs_* tests. Source it after lib.sh and fixtures.sh.
#
#   gcs_emu_start [PORT]         start the emulator on 127.0.0.1 (TMPDIR in the work
#                                dir); exports GCS_EMU_PORT GCS_EMU_URL GCS_EMU_PID
#   gcs_emu_stop                 stop it (by PID)
#   gcs_proxy_start [ARGS…]      tests/integration/gcs_proxy.py in front of the emulator
#                                (--delay-upload S, --cut-media N, --drop-range,
#                                --tokens FILE, --deny); exports GCS_PROXY_URL
#                                GCS_PROXY_PID GCS_PROXY_LOG
#   gcs_proxy_stop
#   gcs_list BUCKET [PREFIX]     object names, one a line (straight from the emulator)
#   gcs_count BUCKET [PREFIX]    how many objects
#   gcs_wait_count BUCKET N [SECS] [PREFIX]  wait until there are N objects; prints the count
#   gcs_sha256 BUCKET NAME       sha256 of an object's bytes
#   gcs_size BUCKET NAME         an object's size from its metadata
#   gcs_config FILE TIERDIR BUCKET ENDPOINT [YAML…]  a local tier above a gcs tier
#   gcs_token_start              tests/unit/gcs_fixture.py as Google's token services,
#                                with a key pair made by the openssl CLI and a
#                                service account key file; exports GCS_TOKEN_PORT
#                                GCS_TOKEN_PID GCS_TOKEN_DIR (sa.json, issued, pub.pem)
#
# The emulator comes from scripts/setup.sh --test (npm, into build-deps/gcs-emu);
# DV_GCS_EMU_DIR overrides that directory. The emulator answers a range past the
# end with 200 and the whole object, sends no Content-Length to HEAD, checks no
# credentials, and finishes a resumable upload at its first PUT (so the tests
# keep resumable shards within one chunk; tests/unit/test_gcs.c covers more).

DV_GCS_EMU_DIR=${DV_GCS_EMU_DIR:-$DV_ROOT/build-deps/gcs-emu}

# The project's gcs-emu.js goes beside node_modules (it finds firebase-tools there).
_gcs_place_script() {
	local src="$DV_ROOT/tests/integration/gcs-emu.js" dst="$DV_GCS_EMU_DIR/gcs-emu.js"
	cmp -s "$src" "$dst" 2>/dev/null && return 0
	cp "$src" "$dst.$$" && mv -f "$dst.$$" "$dst"
}

gcs_emu_start() {
	local port=${1:-} dir pid i code
	[ -f "$DV_GCS_EMU_DIR/node_modules/firebase-tools/package.json" ] ||
		bail "the GCS emulator (firebase-tools) is not installed in $DV_GCS_EMU_DIR (scripts/setup.sh --test)"
	dv_need node curl python3
	_gcs_place_script || bail "cannot place gcs-emu.js in $DV_GCS_EMU_DIR"
	dir=$(dv_tmp gcs-emu) || return 1
	mkdir -p "$dir/tmp"
	for _ in 1 2 3; do
		[ -n "$port" ] || port=$(_dv_free_port)
		TMPDIR="$dir/tmp" node "$DV_GCS_EMU_DIR/gcs-emu.js" "$port" 127.0.0.1 \
			>>"$dir/emulator.log" 2>&1 &
		pid=$!
		dv_track "$pid" gcs-emu
		for ((i = 0; i < 600; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			# Any answer will do: it serves once it listens.
			code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/" 2>/dev/null)
			if [ -n "$code" ] && [ "$code" != 000 ]; then
				export GCS_EMU_PORT=$port GCS_EMU_PID=$pid GCS_EMU_LOG="$dir/emulator.log"
				export GCS_EMU_URL="http://127.0.0.1:$port"
				return 0
			fi
			sleep 0.1
		done
		dv_stop_pid "$pid" 5
		port=${1:-}
	done
	fail "gcs_emu_start: the emulator did not answer" "$(tail -20 "$dir/emulator.log")"
	return 1
}

gcs_emu_stop() {
	[ -n "${GCS_EMU_PID:-}" ] || return 0
	dv_stop_pid "$GCS_EMU_PID" 10
	unset GCS_EMU_PID
}

gcs_proxy_start() {
	local dir pid i port=""
	dir=$(dv_tmp gcs-proxy) || return 1
	GCS_PROXY_LOG="$dir/requests.log"
	: >"$GCS_PROXY_LOG"
	python3 "$DV_ROOT/tests/integration/gcs_proxy.py" "$GCS_EMU_PORT" --log "$GCS_PROXY_LOG" "$@" \
		>"$dir/port" 2>"$dir/stderr" &
	pid=$!
	dv_track "$pid" gcs-proxy
	for ((i = 0; i < 100; i++)); do
		port=$(head -1 "$dir/port" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { fail "gcs_proxy_start: no port" "$(cat "$dir/stderr")"; return 1; }
	export GCS_PROXY_PID=$pid GCS_PROXY_LOG GCS_PROXY_URL="http://127.0.0.1:$port"
}

gcs_proxy_stop() {
	[ -n "${GCS_PROXY_PID:-}" ] || return 0
	dv_stop_pid "$GCS_PROXY_PID" 5
	unset GCS_PROXY_PID
}

# The emulator's listing, every page.
gcs_list() {
	python3 - "$GCS_EMU_URL" "$1" "${2:-}" <<-'PY'
		import json, sys, urllib.parse, urllib.request
		base, bucket, prefix = sys.argv[1:4]
		token = None
		while True:
		    q = {"prefix": prefix, "maxResults": "1000"}
		    if token:
		        q["pageToken"] = token
		    url = "%s/storage/v1/b/%s/o?%s" % (base, urllib.parse.quote(bucket, safe=""), urllib.parse.urlencode(q))
		    page = json.load(urllib.request.urlopen(url, timeout=10))
		    for item in page.get("items") or []:
		        print(item["name"])
		    token = page.get("nextPageToken")
		    if not token:
		        break
	PY
}

gcs_count() {
	gcs_list "$@" | grep -c .
}

gcs_wait_count() {
	local bucket=$1 n=$2 secs=${3:-30} prefix=${4:-} i c=0
	for ((i = 0; i <= secs * 5; i++)); do
		c=$(gcs_count "$bucket" "$prefix")
		[ "$c" -ge "$n" ] && { echo "$c"; return 0; }
		sleep 0.2
	done
	echo "$c"
	return 1
}

_gcs_object_url() {
	python3 -c 'import sys, urllib.parse as u; print("%s/storage/v1/b/%s/o/%s" % (sys.argv[1], u.quote(sys.argv[2], safe=""), u.quote(sys.argv[3], safe="")))' \
		"$GCS_EMU_URL" "$1" "$2"
}

gcs_sha256() {
	curl -sf "$(_gcs_object_url "$1" "$2")?alt=media" | sha256sum | cut -d' ' -f1
}

gcs_size() {
	curl -sf "$(_gcs_object_url "$1" "$2")" | python3 -c 'import json, sys; print(json.load(sys.stdin)["size"])'
}

# gcs_config FILE TIERDIR BUCKET ENDPOINT [YAML LINE…]: a folder tier
# "local", then a gcs tier "region" (endpoint "" leaves the key out), with
# the short timeouts of write_config.
gcs_config() {
	local file=$1 tier=$2 bucket=$3 endpoint=$4 line
	shift 4
	{
		echo "tiers:"
		echo "  - name: local"
		echo "    path: $tier"
		echo "  - name: region"
		echo "    type: gcs"
		echo "    bucket: $bucket"
		echo "    project: demo-test"
		[ -n "$endpoint" ] && echo "    endpoint: $endpoint"
		for line in "$@"; do echo "$line"; done
		echo "http:"
		echo "  connect_timeout: 2"
		echo "  low_speed_time: 5"
		echo "  retries: 1"
	} >"$file"
}

gcs_token_start() {
	local dir pid i port=""
	dir=$(dv_tmp gcs-token) || return 1
	(cd "$dir" && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem 2>/dev/null &&
		openssl pkey -in key.pem -pubout -out pub.pem) || { fail "gcs_token_start: openssl"; return 1; }
	: >"$dir/issued"
	python3 "$DV_ROOT/tests/unit/gcs_fixture.py" "$dir" >"$dir/port" 2>"$dir/stderr" &
	pid=$!
	dv_track "$pid" gcs-token
	for ((i = 0; i < 100; i++)); do
		port=$(head -1 "$dir/port" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { fail "gcs_token_start: no port" "$(cat "$dir/stderr")"; return 1; }
	python3 - "$dir" "$port" <<-'PY'
		import json, sys
		d, port = sys.argv[1], sys.argv[2]
		sa = {"type": "service_account", "project_id": "demo-test",
		      "private_key_id": "8f3c2a1b0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
		      "private_key": open(d + "/key.pem").read(),
		      "client_email": "datavo-cache@demo-test.iam.gserviceaccount.com",
		      "client_id": "112233445566778899001",
		      "token_uri": "http://127.0.0.1:%s/token" % port}
		json.dump(sa, open(d + "/sa.json", "w"), indent=2)
	PY
	chmod 0600 "$dir/sa.json"
	export GCS_TOKEN_PORT=$port GCS_TOKEN_PID=$pid GCS_TOKEN_DIR=$dir
}
