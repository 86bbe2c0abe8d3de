#!/usr/bin/env bash
# The cloud topology for Azure Blob,
# against Azurite, counted from nginx's access log and the container listing:
#   - VM1 and VM2 (separate local tiers) share one container; VM1 reads a
#     dataset cold: origin GETs = shards, and the container then holds every
#     shard; VM2 reads it: no new origin GET, every shard from the container,
#     now in VM2's local tier; VM3, with another container (and a SAS token),
#     fetches from the origin again;
#   - a slow container (a proxy that holds every PUT): a cold read returns
#     before its upload ends; the container down (Azurite stopped): reads
#     still succeed from the origin, and the failures are logged and counted;
#   - secrets: no daemon log (debug level), status file or metrics page holds
#     the account key, the SAS signature or a bearer token (one daemon gets
#     its token from a local IMDS stand-in, tests/unit/azure_fixture.py).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/azure_lib.sh
. "$DV_ROOT/tests/integration/azure_lib.sh"
dv_need python3 sha256sum curl

N=6
src=$(dv_tmp src)
fresh=$(dv_tmp fresh)
origin=$(dv_tmp origin)
mktars "$src" $N --kb 400 --seed 21
mktars "$fresh" 3 --kb 300 --seed 22
publish demo/train "$src" "$origin" || bail "publish demo/train"
publish demo/fresh "$fresh" "$origin" || bail "publish demo/fresh"
nginx_start "$origin" || bail "nginx"
azurite_start || bail "azurite"
azure_env
region=$(az_container region) || bail "container region"
other=$(az_container other) || bail "container other"
slow=$(az_container slow) || bail "container slow"
sas=$(az sas racw "$other") || bail "SAS for other"
sig=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.parse_qs(sys.argv[1])["sig"][0])' "$sas")
metrics_port=$(_dv_free_port)
statuses=$(dv_tmp statuses)

reads_ok() {
	local mnt=$1 dir=$2 f
	for f in "$dir"/*.tar; do
		[ "$(sha256sum <"$mnt/$3/$(basename "$f")")" = "$(sha256sum <"$f")" ] || return 1
	done
}

# vm NAME CONTAINER_URL [YAML…]: mounts a daemon with its own local tier; sets $mnt.
vm() {
	local name=$1 url=$2
	shift 2
	azure_config "$DV_WORK/$name.yaml" "$DV_WORK/$name-tier" "$url" "$@"
	mnt=$(dv_tmp "$name-mnt")
	dv_mount "$NGINX_URL" "$mnt" "config=$DV_WORK/$name.yaml" log_level=debug ${VM_OPTS:-} || bail "mount $name"
}

save_status() { cat "$1/.datavo/status" >"$statuses/$2.json" 2>/dev/null; }

# --- VM1: cold ----------------------------------------------------------------
vm vm1 "$region"
mnt1=$mnt
if reads_ok "$mnt1" "$src" demo/train; then pass "VM1: every shard reads with the published bytes"; else fail "VM1: every shard reads with the published bytes"; fi
assert_eq "$(nginx_count 'GET /shards/')" $N "VM1: origin GETs = $N shards"
assert_eq "$(az wait "$region" $N 60)" $N "VM1: the container then holds every shard (listing)"
save_status "$mnt1" vm1
dv_umount "$mnt1"

# --- VM2: same container, empty local tier ------------------------------------
VM_OPTS="metrics=127.0.0.1:$metrics_port" vm vm2 "$region"
mnt2=$mnt
if reads_ok "$mnt2" "$src" demo/train; then pass "VM2: every shard reads with the published bytes"; else fail "VM2: every shard reads with the published bytes"; fi
assert_eq "$(nginx_count 'GET /shards/')" $N "VM2: no new origin GET"
assert_eq "$(ls "$DV_WORK/vm2-tier"/*.tar | wc -l)" $N "VM2: every shard is now in VM2's local tier"
hits=$(python3 -c 'import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tiers"]}
print(t["region"]["hits"], t["local"]["installs"] if "installs" in t["local"] else "?")' "$mnt2/.datavo/status" 2>&1)
assert_eq "${hits%% *}" $N "VM2: status counts $N hits in the container tier"
save_status "$mnt2" vm2
curl -s --max-time 5 "http://127.0.0.1:$metrics_port/metrics" >"$statuses/vm2.metrics" 2>/dev/null
dv_umount "$mnt2"

# --- VM3: another region's container, with a SAS token ------------------------
vm vm3 "$other" "    sas_token: \"$sas\""
mnt3=$mnt
if reads_ok "$mnt3" "$src" demo/train; then pass "VM3: every shard reads with the published bytes"; else fail "VM3: every shard reads with the published bytes"; fi
assert_eq "$(nginx_count 'GET /shards/')" $((2 * N)) "VM3 (another container): the origin is asked again, $N GETs"
assert_eq "$(az wait "$other" $N 60)" $N "VM3: its own container fills too"
save_status "$mnt3" vm3
dv_umount "$mnt3"

# --- a slow container: the read does not wait for the upload ------------------
azproxy_start --delay-put 4 || bail "proxy"
vm vm4 "$AZPROXY_URL/slow"
mnt4=$mnt
t0=$EPOCHREALTIME
sha=$(sha256sum <"$mnt4/demo/train/shard-000000.tar")
t1=$EPOCHREALTIME
assert_eq "$sha" "$(sha256sum <"$src/shard-000000.tar")" "slow container: the cold read has the right bytes"
elapsed=$(python3 -c "print('%.2f' % ($t1 - $t0))")
if python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 3 else 1)"; then
	pass "slow container: the cold read returned in ${elapsed}s, before the 4 s upload"
else
	fail "slow container: the cold read returned in ${elapsed}s, before the 4 s upload"
fi
assert_eq "$(az list "$slow" | wc -l)" 0 "slow container: the blob is not there yet when the read returns"
assert_eq "$(az wait "$slow" 1 30)" 1 "slow container: the upload finishes in the background"
dv_umount "$mnt4"

# --- the container down: reads come from the origin ---------------------------
azurite_stop
before=$(nginx_count 'GET /shards/')
vm vm5 "$region"
mnt5=$mnt
if reads_ok "$mnt5" "$fresh" demo/fresh; then pass "container down: every read succeeds from the origin"; else fail "container down: every read succeeds from the origin"; fi
assert_eq "$(nginx_count 'GET /shards/')" $((before + 3)) "container down: three origin GETs"
log5=$(dv_log "$mnt5")
for ((i = 0; i < 300; i++)); do
	[ "$(grep -c "tier 'region': gave up uploading" "$log5")" -ge 3 ] && break
	sleep 0.1
done
if grep -q "tier 'region': lookup of .* failed" "$log5" && grep -q "tier 'region': HEAD .* failed" "$log5"; then
	pass "container down: the failed lookups are logged"
else
	fail "container down: the failed lookups are logged" "$(tail -20 "$log5")"
fi
assert_eq "$(grep -c "tier 'region': gave up uploading" "$log5")" 3 "container down: each failed upload is logged"
errors=$(python3 -c 'import json, sys
print(next(t["errors"] for t in json.load(open(sys.argv[1]))["tiers"] if t["name"] == "region"))' "$mnt5/.datavo/status")
if [ "${errors:-0}" -ge 6 ]; then pass "container down: status counts the errors ($errors)"; else fail "container down: status counts the errors" "errors: $errors"; fi
save_status "$mnt5" vm5
dv_umount "$mnt5"

# --- a bearer token (managed identity through a local IMDS stand-in) ----------
fix=$(dv_tmp fixture)
python3 "$DV_ROOT/tests/unit/azure_fixture.py" blob_size=1 mi_client_id=uami-1 >"$fix/port" 2>"$fix/stderr" &
fixpid=$!
dv_track "$fixpid" azure_fixture
for ((i = 0; i < 100; i++)); do [ -s "$fix/port" ] && break; sleep 0.05; done
fixurl="http://127.0.0.1:$(head -1 "$fix/port")"
# Only the token may authorize this one: no account key in its environment.
unset AZURE_STORAGE_KEY
export AZURE_POD_IDENTITY_AUTHORITY_HOST=$fixurl
vm vm6 "$fixurl/devstoreaccount1/shards" "    managed_identity_client_id: uami-1"
mnt6=$mnt
azure_env
sha=$(sha256sum <"$mnt6/demo/train/shard-000001.tar")
assert_eq "$sha" "$(sha256sum <"$src/shard-000001.tar")" "bearer: a read works (the stand-in's blob is the wrong size: a miss)"
curl -s "$fixurl/_log" >"$fix/log"
if grep -q "^OK imds" "$fix/log" && grep -q "^OK blob HEAD /devstoreaccount1/shards/.* tok-imds-1" "$fix/log"; then
	pass "bearer: the daemon got a token from IMDS and sent it (Authorization: Bearer)"
else
	fail "bearer: the daemon got a token from IMDS and sent it (Authorization: Bearer)" "$(cat "$fix/log")"
fi
save_status "$mnt6" vm6
dv_umount "$mnt6"

# --- secrets ------------------------------------------------------------------
leaks=""
for f in "$DV_WORK"/datavofs.*.log "$statuses"/*; do
	for s in "$AZ_KEY_WELL_KNOWN" "$sig" "tok-imds-" "Bearer "; do
		grep -qF -- "$s" "$f" && leaks+="$(basename "$f") holds '${s:0:12}…'; "
	done
done
n_logs=$(ls "$DV_WORK"/datavofs.*.log | wc -l)
n_status=$(ls "$statuses"/*.json | wc -l)
assert_eq "$leaks" "" "no secret in $n_logs debug-level daemon logs, $n_status status files$([ -s "$statuses/vm2.metrics" ] && echo " and the metrics page")"
if grep -q "^OK blob" "$fix/log" && grep -q "authorizing with bearer token (managed identity (IMDS), client 'uami-1')" "$DV_WORK"/datavofs.*.log; then
	pass "the secrets check covered a daemon that used a bearer token"
else
	fail "the secrets check covered a daemon that used a bearer token"
fi
summary
