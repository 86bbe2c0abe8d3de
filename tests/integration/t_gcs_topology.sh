#!/usr/bin/env bash
# The cloud topology for GCS, against
# the GCS emulator, counted from nginx's access log and the bucket listing:
#   - VM1 and VM2 (separate local tiers) share one bucket: VM1 reads a
#     dataset cold: origin GETs = shards, and the bucket then holds every
#     shard; VM2 reads it: no new origin GET, every shard from the bucket and
#     now in VM2's local tier; VM3, with another bucket, fetches from the
#     origin again;
#   - a slow bucket (a proxy that holds every upload): a cold read returns
#     before its upload ends; the bucket down (the emulator stopped): reads
#     still succeed from the origin, and the failures are logged and counted
#     (status and metrics).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/gcs_lib.sh
. "$DV_ROOT/tests/integration/gcs_lib.sh"
dv_need python3 sha256sum curl

N=6
src=$(dv_tmp src)
fresh=$(dv_tmp fresh)
origin=$(dv_tmp origin)
mktars "$src" $N --kb 400 --seed 41
mktars "$fresh" 3 --kb 300 --seed 42
publish demo/train "$src" "$origin" || bail "publish demo/train"
publish demo/fresh "$fresh" "$origin" || bail "publish demo/fresh"
nginx_start "$origin" || bail "nginx"
gcs_emu_start || bail "emulator"
export STORAGE_EMULATOR_HOST="127.0.0.1:$GCS_EMU_PORT"
metrics_port=$(_dv_free_port)

reads_ok() {
	local mnt=$1 dir=$2 ds=$3 f
	for f in "$dir"/*.tar; do
		[ "$(sha256sum <"$mnt/$ds/$(basename "$f")")" = "$(sha256sum <"$f")" ] || return 1
	done
}

check() { if "$@"; then pass "$CHECK"; else fail "$CHECK"; fi; }

# vm NAME BUCKET [ENDPOINT [OPT…]]: a daemon with its own local tier; sets $mnt.
vm() {
	local name=$1 bucket=$2 endpoint=${3:-}
	shift 3 2>/dev/null || shift $#
	gcs_config "$DV_WORK/$name.yaml" "$DV_WORK/$name-tier" "$bucket" "$endpoint"
	mnt=$(dv_tmp "$name-mnt")
	dv_mount "$NGINX_URL" "$mnt" "config=$DV_WORK/$name.yaml" log_level=debug "$@" || bail "mount $name"
}

tier_stat() {
	python3 -c 'import json, sys
print(next(t[sys.argv[3]] for t in json.load(open(sys.argv[1]))["tiers"] if t["name"] == sys.argv[2]))' \
		"$1/.datavo/status" "$2" "$3"
}

# --- VM1: cold ----------------------------------------------------------------
vm vm1 region-a
mnt1=$mnt
CHECK="VM1: every shard reads with the published bytes"
check reads_ok "$mnt1" "$src" demo/train
assert_eq "$(nginx_count 'GET /shards/')" $N "VM1: origin GETs = $N shards"
# Uploads run in the background (B5): wait for the listing.
assert_eq "$(gcs_wait_count region-a $N 60)" $N "VM1: the bucket then holds every shard (listing)"
want=$(for f in "$src"/*.tar; do echo "$(shard_field "$origin" demo/train "$(basename "$f")" content_hash).tar"; done | sort)
assert_eq "$(gcs_list region-a | sort)" "$want" "VM1: the listing is <content_hash>.tar of every shard"
dv_umount "$mnt1"

# --- VM2: same bucket, empty local tier ---------------------------------------
vm vm2 region-a
mnt2=$mnt
CHECK="VM2: every shard reads with the published bytes"
check reads_ok "$mnt2" "$src" demo/train
assert_eq "$(nginx_count 'GET /shards/')" $N "VM2: no new origin GET"
assert_eq "$(ls "$DV_WORK/vm2-tier"/*.tar | wc -l)" $N "VM2: every shard is now in VM2's local tier"
assert_eq "$(tier_stat "$mnt2" region hits)" $N "VM2: status counts $N hits in the bucket tier"
assert_eq "$(grep -c "tier 'region': uploaded" "$(dv_log "$mnt2")")" 0 "VM2: nothing is uploaded again"
dv_umount "$mnt2"

# --- VM3: another region's bucket ---------------------------------------------
vm vm3 region-b
mnt3=$mnt
CHECK="VM3: every shard reads with the published bytes"
check reads_ok "$mnt3" "$src" demo/train
assert_eq "$(nginx_count 'GET /shards/')" $((2 * N)) "VM3 (another bucket): the origin is asked again, $N GETs"
assert_eq "$(gcs_wait_count region-b $N 60)" $N "VM3: its own bucket fills too"
assert_eq "$(gcs_count region-a)" $N "VM3: the first bucket is unchanged"
dv_umount "$mnt3"

# --- a slow bucket: the read does not wait for the upload ---------------------
gcs_proxy_start --delay-upload 4 || bail "proxy"
vm vm4 region-slow "$GCS_PROXY_URL"
mnt4=$mnt
t0=$EPOCHREALTIME
sha=$(sha256sum <"$mnt4/demo/train/shard-000000.tar")
t1=$EPOCHREALTIME
assert_eq "$sha" "$(sha256sum <"$src/shard-000000.tar")" "slow bucket: the cold read has the right bytes"
elapsed=$(python3 -c "print('%.2f' % ($t1 - $t0))")
if python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 3 else 1)"; then
	pass "slow bucket: the cold read returned in ${elapsed}s, before the 4 s upload"
else
	fail "slow bucket: the cold read returned in ${elapsed}s, before the 4 s upload"
fi
assert_eq "$(gcs_count region-slow)" 0 "slow bucket: the object is not there yet when the read returns"
assert_eq "$(gcs_wait_count region-slow 1 30)" 1 "slow bucket: the upload finishes in the background"
dv_umount "$mnt4"
gcs_proxy_stop

# --- the bucket down: reads come from the origin ------------------------------
gcs_emu_stop
before=$(nginx_count 'GET /shards/')
vm vm5 region-a "" "metrics=127.0.0.1:$metrics_port"
mnt5=$mnt
CHECK="bucket down: every read succeeds from the origin"
check reads_ok "$mnt5" "$fresh" demo/fresh
assert_eq "$(nginx_count 'GET /shards/')" $((before + 3)) "bucket down: three origin GETs"
log5=$(dv_log "$mnt5")
for ((i = 0; i < 600; i++)); do
	[ "$(grep -c "tier 'region': gave up uploading" "$log5")" -ge 3 ] && break
	sleep 0.1
done
if grep -q "tier 'region': lookup of .* failed" "$log5" && grep -q "tier 'region': metadata of gs://region-a/.* failed after 2 attempts" "$log5"; then
	pass "bucket down: the failed lookups are logged"
else
	fail "bucket down: the failed lookups are logged" "$(tail -20 "$log5")"
fi
assert_eq "$(grep -c "tier 'region': gave up uploading" "$log5")" 3 "bucket down: each failed upload is logged"
errors=$(tier_stat "$mnt5" region errors)
if [ "${errors:-0}" -ge 6 ]; then pass "bucket down: status counts the errors ($errors)"; else fail "bucket down: status counts the errors" "errors: $errors"; fi
page=$(curl -s --max-time 5 "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null)
if [ -n "$page" ]; then
	m=$(awk '/^datavofs_tier_errors_total\{.*tier="region"/ { print $NF }' <<<"$page")
	if [ "${m%.*}" -ge 6 ] 2>/dev/null; then pass "bucket down: metrics count the errors ($m)"; else fail "bucket down: metrics count the errors" "$(grep region <<<"$page")"; fi
else
	skip "bucket down: metrics count the errors" "no metrics page in this build"
fi
dv_umount "$mnt5"
summary
