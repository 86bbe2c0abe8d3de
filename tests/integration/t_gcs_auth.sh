#!/usr/bin/env bash
# The cloud topology for GCS, end to end: daemons authorize with
# Application Default Credentials against local stand-ins for Google's token
# services (tests/unit/gcs_fixture.py: it VERIFIES the JWT's RS256 signature
# with the public half of a key pair made here by the openssl CLI, checks
# refresh-token grants and the metadata server's Metadata-Flavor header),
# and the bucket (the GCS emulator, behind tests/integration/gcs_proxy.py,
# which takes only bearer tokens that the stand-in issued):
#   - a service account key file (GOOGLE_APPLICATION_CREDENTIALS), the GCE
#     metadata server (GCE_METADATA_HOST) and gcloud's well-known file with
#     user credentials (CLOUDSDK_CONFIG) each get a token and use the bucket;
#     a mount asks for no token and touches no bucket before the first read;
#   - refused credentials (the bucket answers 403; a key the token service
#     does not know) fail the read with EACCES: never a miss, no origin GET;
#   - secrets: no daemon log (debug level), status file or metrics page holds
#     the private key, a refresh token, the client secret, an access token,
#     a signed JWT or an upload session.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/gcs_lib.sh
. "$DV_ROOT/tests/integration/gcs_lib.sh"
dv_need python3 sha256sum curl openssl

CLIENT_SECRET="d-FL95Q19q7MQmFpd7hHD0Ty"
REFRESH="1//0gIntegrationRefreshTokenNotForLogs"
N=4
src=$(dv_tmp src)
big=$(dv_tmp big)
origin=$(dv_tmp origin)
mktars "$src" $N --kb 400 --seed 51
mktars "$big" 1 --kb 9000 --seed 52
publish demo/train "$src" "$origin" || bail "publish demo/train"
publish demo/big "$big" "$origin" || bail "publish demo/big"
nginx_start "$origin" || bail "nginx"
gcs_emu_start || bail "emulator"
gcs_token_start || bail "token services"
tok=$GCS_TOKEN_DIR
gcs_proxy_start --tokens "$tok/issued" || bail "proxy"
bucket_url=$GCS_PROXY_URL
statuses=$(dv_tmp statuses)
metrics_port=$(_dv_free_port)
unset STORAGE_EMULATOR_HOST GOOGLE_APPLICATION_CREDENTIALS CLOUDSDK_CONFIG GCE_METADATA_ROOT
# Nothing may ever ask a real metadata server: port 1 of 127.0.0.1 is closed.
export GCE_METADATA_HOST=127.0.0.1:1

fixture_log() { curl -s "http://127.0.0.1:$GCS_TOKEN_PORT/_log"; }

reads_ok() {
	local mnt=$1 dir=$2 ds=$3 f
	for f in "$dir"/*.tar; do
		[ "$(sha256sum <"$mnt/$ds/$(basename "$f")")" = "$(sha256sum <"$f")" ] || return 1
	done
}

check() { if "$@"; then pass "$CHECK"; else fail "$CHECK"; fi; }

# vm NAME ENDPOINT [OPT…]: a daemon with its own local tier; sets $mnt.
vm() {
	local name=$1 endpoint=$2
	shift 2
	gcs_config "$DV_WORK/$name.yaml" "$DV_WORK/$name-tier" region-auth "$endpoint"
	mnt=$(dv_tmp "$name-mnt")
	dv_mount "$NGINX_URL" "$mnt" "config=$DV_WORK/$name.yaml" log_level=debug "$@" || bail "mount $name"
}

save() {
	cat "$1/.datavo/status" >"$statuses/$2.json" 2>/dev/null
	[ -z "${3:-}" ] || curl -s --max-time 5 "http://127.0.0.1:$3/metrics" >"$statuses/$2.metrics" 2>/dev/null
}

# --- a service account key file -----------------------------------------------
export GOOGLE_APPLICATION_CREDENTIALS="$tok/sa.json"
vm vm1 "$bucket_url" "metrics=127.0.0.1:$metrics_port"
mnt1=$mnt
ls "$mnt1/demo/train" >/dev/null
assert_eq "$(fixture_log | grep -c .)$(grep -c . "$GCS_PROXY_LOG")" "00" \
	"lazy: mounting and listing ask for no token and touch no bucket"
CHECK="service account: every shard reads with the published bytes"
check reads_ok "$mnt1" "$src" demo/train && reads_ok "$mnt1" "$big" demo/big
assert_eq "$(nginx_count 'GET /shards/')" $((N + 1)) "service account: a cold read goes to the origin"
assert_eq "$(gcs_wait_count region-auth $((N + 1)) 60)" $((N + 1)) "service account: the uploads (media and resumable) reach the bucket"
assert_eq "$(fixture_log | grep -c '^TOKEN jwt ok')" 1 \
	"service account: one token, for a JWT whose RS256 signature the token service verified with the public key"
assert_eq "$(grep -v 'upload_id=' "$GCS_PROXY_LOG" | grep -c ' 401 \| 403 \| none$')" 0 "service account: every bucket request but the session's PUT carried an accepted bearer token"
grep -q "upload_id=.* 200 none" "$GCS_PROXY_LOG" && pass "service account: the resumable session's PUT carried no token" ||
	fail "service account: the resumable session's PUT carried no token" "$(cat "$GCS_PROXY_LOG")"
grep -q "Google credentials: service account datavo-cache@demo-test.iam.gserviceaccount.com from $tok/sa.json" "$(dv_log "$mnt1")" &&
	pass "service account: the log names the account and the file" || fail "service account: the log names the account and the file"
save "$mnt1" vm1 "$metrics_port"
dv_umount "$mnt1"
unset GOOGLE_APPLICATION_CREDENTIALS

# --- the GCE metadata server --------------------------------------------------
export GCE_METADATA_HOST="127.0.0.1:$GCS_TOKEN_PORT"
vm vm2 "$bucket_url"
mnt2=$mnt
before=$(nginx_count 'GET /shards/')
CHECK="metadata server: every shard reads with the published bytes"
check reads_ok "$mnt2" "$src" demo/train && reads_ok "$mnt2" "$big" demo/big
assert_eq "$(nginx_count 'GET /shards/')" "$before" "metadata server: every shard came from the bucket"
assert_eq "$(fixture_log | grep -c '^TOKEN gce ok')" 1 "metadata server: one token (asked with Metadata-Flavor: Google)"
save "$mnt2" vm2
dv_umount "$mnt2"
export GCE_METADATA_HOST=127.0.0.1:1

# --- gcloud's well-known file (authorized_user) -------------------------------
gcloud=$(dv_tmp gcloud)
# The token service checks refresh grants against its user.json.
python3 - "$GCS_TOKEN_PORT" "$CLIENT_SECRET" "$REFRESH" "$gcloud/application_default_credentials.json" "$tok/user.json" <<-'PY'
	import json, sys
	port, secret, refresh = sys.argv[1:4]
	user = {"client_id": "764086051850-demo.apps.googleusercontent.com", "client_secret": secret,
	        "refresh_token": refresh, "type": "authorized_user",
	        "token_uri": "http://127.0.0.1:%s/token" % port}
	for path in sys.argv[4:]:
	    json.dump(user, open(path, "w"))
PY
export CLOUDSDK_CONFIG=$gcloud
vm vm3 "$bucket_url"
mnt3=$mnt
CHECK="gcloud user credentials: every shard reads with the published bytes"
check reads_ok "$mnt3" "$src" demo/train
assert_eq "$(nginx_count 'GET /shards/')" "$before" "gcloud user credentials: every shard came from the bucket"
assert_eq "$(fixture_log | grep -c '^TOKEN refresh ok')" 1 "gcloud user credentials: one refresh-token grant, checked by the token service"
save "$mnt3" vm3
dv_umount "$mnt3"
unset CLOUDSDK_CONFIG

# --- refused: never a miss ----------------------------------------------------
gcs_proxy_stop
gcs_proxy_start --deny || bail "deny proxy"
export GOOGLE_APPLICATION_CREDENTIALS="$tok/sa.json"
vm vm4 "$GCS_PROXY_URL"
mnt4=$mnt
before=$(nginx_count 'GET /shards/')
assert_eq "$(read_errno "$mnt4/demo/train/shard-000001.tar")" EACCES "bucket answers 403: the read fails with EACCES"
assert_eq "$(nginx_count 'GET /shards/')" "$before" "bucket answers 403: not a miss, no origin GET"
grep -q "tier 'region': access denied: metadata of gs://region-auth/.*: HTTP 403: proxy: caller does not have storage.objects access; credentials: service account" "$(dv_log "$mnt4")" &&
	pass "bucket answers 403: the log says access denied, with the bucket's reason and the account" ||
	fail "bucket answers 403: the log says access denied" "$(grep "tier 'region'" "$(dv_log "$mnt4")" | tail -5)"
save "$mnt4" vm4
dv_umount "$mnt4"

(cd "$tok" && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out other.pem 2>/dev/null)
python3 - "$tok" <<-'PY'
	import json, sys
	d = sys.argv[1]
	sa = json.load(open(d + "/sa.json"))
	sa["private_key"] = open(d + "/other.pem").read()
	json.dump(sa, open(d + "/sa-wrong.json", "w"))
PY
export GOOGLE_APPLICATION_CREDENTIALS="$tok/sa-wrong.json"
vm vm5 "$bucket_url"
mnt5=$mnt
assert_eq "$(read_errno "$mnt5/demo/train/shard-000002.tar")" EACCES "a key the token service does not know: EACCES"
assert_eq "$(nginx_count 'GET /shards/')" "$before" "a key the token service does not know: no origin GET"
grep -q "access denied: .*/token refused the credentials (HTTP 400: invalid_grant: Invalid JWT Signature.)" "$(dv_log "$mnt5")" &&
	pass "a key the token service does not know: the log gives the token service's reason" ||
	fail "a key the token service does not know: the log gives the token service's reason" "$(tail -5 "$(dv_log "$mnt5")")"
save "$mnt5" vm5
dv_umount "$mnt5"
unset GOOGLE_APPLICATION_CREDENTIALS

# --- secrets ------------------------------------------------------------------
secrets=("$(sed -n 2p "$tok/key.pem")" "$(sed -n 2p "$tok/other.pem")" "PRIVATE KEY" "$CLIENT_SECRET" "$REFRESH"
	"ya29." "Bearer " "eyJ" "upload_id=")
while IFS= read -r t; do [ -n "$t" ] && secrets+=("$t"); done <"$tok/issued"
leaks=""
for f in "$DV_WORK"/datavofs.*.log "$statuses"/*; do
	for s in "${secrets[@]}"; do
		grep -qF -- "$s" "$f" && leaks+="$(basename "$f") holds '${s:0:12}…'; "
	done
done
n_logs=$(ls "$DV_WORK"/datavofs.*.log | wc -l)
n_tokens=$(grep -c . "$tok/issued")
assert_eq "$leaks" "" "no secret (${#secrets[@]} strings, $n_tokens issued tokens) in $n_logs debug-level daemon logs, $(ls "$statuses"/*.json | wc -l) status files$([ -s "$statuses/vm1.metrics" ] && echo " and the metrics page")"
if [ "$(grep -c "new access token" "$DV_WORK"/datavofs.*.log | awk -F: '{ n += $2 } END { print n }')" -ge 3 ]; then
	pass "the secrets check covered daemons that fetched and used tokens"
else
	fail "the secrets check covered daemons that fetched and used tokens"
fi
summary
