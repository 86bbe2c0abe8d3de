# shellcheck shell=bash
# tests/integration/s3_lib.sh: s3rver and the SigV4-verifying proxy for the
# t_s3_* tests. Source it after lib.sh (and fixtures.sh).
#
#   s3rver_start BUCKET…            s3rver on 127.0.0.1 with these buckets;
#                                   exports S3_URL S3_PORT S3_PID S3_DATA
#   s3_proxy_start UPSTREAM [OPT…]  tests/integration/sigv4check.py in front
#                                   of UPSTREAM (see its --help); exports
#                                   S3P_URL S3P_PORT S3P_PID S3P_LOG
#   s3_keys BUCKET [PREFIX]         the keys in BUCKET, one per line
#   s3_count BUCKET [PREFIX]        how many keys
#   s3_wait_count BUCKET PREFIX N [SECS]  waits until s3_count reaches N;
#                                   prints the count; fails if it did not
#   s3_put BUCKET KEY FILE          uploads FILE (origin tests set-up)
#   s3_creds_env                    exports the AWS_* variables for s3rver,
#                                   and turns the metadata services off
#
# s3rver does not check signatures (the proxy does); it is the npm package
# that scripts/setup.sh --test installs into build-deps/s3rver. Everything
# started here is recorded with dv_track and stopped by PID at exit.

S3RVER_DIR=${DV_S3RVER_DIR:-$DV_ROOT/build-deps/s3rver}
S3_KEY=S3RVER
S3_SECRET=S3RVER

s3_creds_env() {
	export AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET
	export AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
	unset AWS_WEB_IDENTITY_TOKEN_FILE AWS_CONTAINER_CREDENTIALS_FULL_URI
	unset AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
}

_s3_wait_http() {
	local url=$1 pid=$2 i
	for ((i = 0; i < 150; i++)); do
		kill -0 "$pid" 2>/dev/null || return 1
		curl -s -o /dev/null --max-time 2 "$url" && return 0
		sleep 0.1
	done
	return 1
}

s3rver_start() {
	local js="$S3RVER_DIR/node_modules/s3rver/bin/s3rver.js" port pid args=() b
	[ -f "$js" ] || bail "s3rver is not installed in $S3RVER_DIR (scripts/setup.sh --test)"
	dv_need node curl python3
	S3_DATA=$(dv_tmp s3rver)
	for b in "$@"; do args+=(--configure-bucket "$b"); done
	port=$(_dv_free_port)
	# --openssl-legacy-provider: on Node 20 listings fail without it.
	NODE_OPTIONS=--openssl-legacy-provider node "$js" -d "$S3_DATA" -a 127.0.0.1 \
		-p "$port" --silent "${args[@]}" >"$S3_DATA.log" 2>&1 &
	pid=$!
	dv_track "$pid" s3rver
	if ! _s3_wait_http "http://127.0.0.1:$port/" "$pid"; then
		fail "s3rver did not start on 127.0.0.1:$port" "$(cat "$S3_DATA.log")"
		return 1
	fi
	export S3_PORT=$port S3_URL="http://127.0.0.1:$port" S3_PID=$pid S3_DATA
}

s3_proxy_start() {
	local upstream=$1 out pid port
	shift
	out=$(dv_tmp s3proxy)
	S3P_LOG="$out/requests.log"
	: >"$S3P_LOG"
	python3 "$DV_ROOT/tests/integration/sigv4check.py" 0 "$S3_SECRET" \
		--upstream "$upstream" --log "$S3P_LOG" "$@" >"$out/port" 2>"$out/stderr" &
	pid=$!
	dv_track "$pid" sigv4check
	for ((i = 0; i < 100; i++)); do
		port=$(head -1 "$out/port" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { fail "sigv4check.py did not start" "$(cat "$out/stderr")"; return 1; }
	export S3P_PORT=$port S3P_URL="http://127.0.0.1:$port" S3P_PID=$pid S3P_LOG
}

s3_keys() {
	python3 - "$S3_URL" "$1" "${2:-}" <<-'PY'
		import re, sys, urllib.parse, urllib.request
		url, bucket, prefix = sys.argv[1:4]
		token = None
		while True:
		    q = {"list-type": "2", "prefix": prefix}
		    if token:
		        q["continuation-token"] = token
		    body = urllib.request.urlopen("%s/%s?%s" % (url, bucket, urllib.parse.urlencode(q))).read().decode()
		    for k in re.findall(r"<Key>([^<]*)</Key>", body):
		        print(k)
		    m = re.search(r"<NextContinuationToken>([^<]*)</NextContinuationToken>", body)
		    if "<IsTruncated>true</IsTruncated>" not in body or not m:
		        break
		    token = m.group(1)
	PY
}

s3_count() {
	s3_keys "$1" "${2:-}" | grep -c . || true
}

s3_wait_count() {
	local bucket=$1 prefix=$2 n=$3 secs=${4:-30} i c=0
	for ((i = 0; i <= secs * 10; i++)); do
		c=$(s3_count "$bucket" "$prefix")
		[ "$c" -ge "$n" ] && { echo "$c"; return 0; }
		sleep 0.1
	done
	echo "$c"
	return 1
}

s3_put() {
	curl -sf -T "$3" -o /dev/null "$S3_URL/$1/$2"
}

# s3_config FILE TIERDIR BUCKET ENDPOINT [YAML…]: a local folder tier, then
# an s3 tier "region" (prefix "cache"); short timeouts as in write_config.
s3_config() {
	local file=$1 tier=$2 bucket=$3 endpoint=$4 line
	shift 4
	{
		echo "tiers:"
		echo "  - name: local"
		echo "    path: $tier"
		echo "  - name: region"
		echo "    type: s3"
		echo "    bucket: $bucket"
		echo "    region: us-east-1"
		echo "    prefix: cache"
		echo "    endpoint: $endpoint"
		echo "http:"
		echo "  connect_timeout: 2"
		echo "  low_speed_time: 5"
		echo "  retries: 1"
		for line in "$@"; do echo "$line"; done
	} >"$file"
}

# tier_stat STATUS_FILE TIER FIELD: a tier's counter in .datavo/status.
tier_stat() {
	python3 - "$@" <<-'PY'
		import json, sys
		doc = json.load(open(sys.argv[1]))
		print(next(t[sys.argv[3]] for t in doc["tiers"] if t["name"] == sys.argv[2]))
	PY
}
