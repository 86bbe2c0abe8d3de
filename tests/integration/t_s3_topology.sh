#!/usr/bin/env bash
# The cloud topology for S3, against
# s3rver, counted from nginx's access log and the bucket's listing:
#   - VM1 and VM2 (separate local tiers) share one bucket; VM1 reads a
#     dataset cold: origin GETs = shards, and the bucket then holds every
#     shard; VM2 reads it: no new origin GET, every shard from the bucket,
#     now in VM2's local tier; VM3, with another bucket, fetches from the
#     origin again (and warms its own bucket);
#   - a slow bucket (sigv4check.py holding every PUT for 4 s): a cold read
#     returns before its upload ends; the bucket down (nothing listening):
#     reads still succeed from the origin, the failures are logged and
#     counted (status file and metrics);
#   - secrets: no daemon log (debug level), status file or metrics page
#     holds the secret key or the session token.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/s3_lib.sh
. "$DV_ROOT/tests/integration/s3_lib.sh"
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

s3_creds_env
export AWS_SECRET_ACCESS_KEY="topoSecret/9f8e7d6c5b4a+S3KeyForTheTopology"
export AWS_SESSION_TOKEN="topoSessionToken/IQoJb3JpZ2luX2VjE+secret=="
S3_SECRET=$AWS_SECRET_ACCESS_KEY
s3rver_start region-east region-west slow-bucket || bail "s3rver"
metrics_port=$(_dv_free_port)
statuses=$(dv_tmp statuses)

reads_ok() {
	local mnt=$1 dir=$2 ds=$3 f
	for f in "$dir"/*.tar; do
		[ "$(sha256sum <"$mnt/$ds/$(basename "$f")")" = "$(sha256sum <"$f")" ] || return 1
	done
}

# vm NAME BUCKET ENDPOINT [OPT…]: a daemon with its own local tier; sets $mnt.
vm() {
	local name=$1 bucket=$2 endpoint=$3
	shift 3
	s3_config "$DV_WORK/$name.yaml" "$DV_WORK/$name-tier" "$bucket" "$endpoint"
	mnt=$(dv_tmp "$name-mnt")
	dv_mount "$NGINX_URL" "$mnt" "config=$DV_WORK/$name.yaml" log_level=debug "$@" || bail "mount $name"
}

save_status() { cat "$1/.datavo/status" >"$statuses/$2.json" 2>/dev/null; }

# --- VM1: cold -----------------------------------------------------------------
vm vm1 region-east "$S3_URL"
mnt1=$mnt
reads_ok "$mnt1" "$src" demo/train && pass "VM1 reads every shard with the source's bytes" ||
	fail "VM1 reads every shard with the source's bytes"
assert_eq "$(nginx_count 'GET /shards/')" $N "VM1 cold: origin GETs = shards ($N)"
got=$(s3_wait_count region-east cache/ $N 60) || fail "VM1's uploads did not all arrive" "$got"
assert_eq "$got" $N "VM1 cold: the bucket then holds every shard (listing)"
ok=1
for f in "$src"/*.tar; do
	h=$(shard_field "$origin" demo/train "$(basename "$f")" content_hash)
	# grep reads the whole listing: -q would stop at the first match, and the
	# lister (unbuffered: PYTHONUNBUFFERED) would fail on the closed pipe.
	s3_keys region-east cache/ | grep -x "cache/$h.tar" >/dev/null || { ok=0; fail "cache/$h.tar is listed"; }
done
[ $ok = 1 ] && pass "the listing names each shard by its content hash"
save_status "$mnt1" vm1

# --- VM2: same bucket, another local tier ----------------------------------------
vm vm2 region-east "$S3_URL" "metrics=127.0.0.1:$metrics_port"
mnt2=$mnt
reads_ok "$mnt2" "$src" demo/train && pass "VM2 reads every shard with the source's bytes" ||
	fail "VM2 reads every shard with the source's bytes"
assert_eq "$(nginx_count 'GET /shards/')" $N "VM2: no new origin GET"
assert_eq "$(ls "$DV_WORK/vm2-tier"/*.tar 2>/dev/null | wc -l)" $N "VM2: every shard is now in its local tier"
save_status "$mnt2" vm2
assert_eq "$(tier_stat "$statuses/vm2.json" region hits)" $N "VM2: every shard came from the bucket (tier hits)"
assert_eq "$(tier_stat "$statuses/vm2.json" local misses)" $N "VM2: every shard missed the local tier first"
curl -sf --max-time 5 "http://127.0.0.1:$metrics_port/metrics" >"$statuses/vm2.metrics" ||
	fail "scrape VM2's metrics"
grep -q 'tier="region"' "$statuses/vm2.metrics" && pass "VM2's metrics carry the s3 tier" ||
	fail "VM2's metrics carry the s3 tier"

# --- VM3: another bucket (another region) ---------------------------------------
vm vm3 region-west "$S3_URL"
mnt3=$mnt
reads_ok "$mnt3" "$src" demo/train && pass "VM3 reads every shard with the source's bytes" ||
	fail "VM3 reads every shard with the source's bytes"
assert_eq "$(nginx_count 'GET /shards/')" $((2 * N)) "VM3, another bucket: the origin again ($N more GETs)"
got=$(s3_wait_count region-west cache/ $N 60) || fail "VM3's uploads did not all arrive" "$got"
assert_eq "$got" $N "VM3 warms its own bucket"
save_status "$mnt3" vm3
dv_umount "$mnt3"

# --- a slow bucket: reads never wait for uploads (B5) ------------------------------
s3_proxy_start "$S3_URL" --delay-writes 4 || bail "slow proxy"
vm slow slow-bucket "$S3P_URL"
mnts=$mnt
t0=$(date +%s%N)
sha256sum <"$mnts/demo/fresh/shard-000000.tar" >/dev/null || fail "read through a slow bucket"
ms=$((($(date +%s%N) - t0) / 1000000))
listed=$(s3_count slow-bucket cache/)
if [ "$ms" -lt 3000 ] && [ "$listed" = 0 ]; then
	pass "slow bucket: the cold read returned in $ms ms, before its upload ended"
else
	fail "slow bucket: the cold read returned in $ms ms, before its upload ended" "objects listed then: $listed"
fi
got=$(s3_wait_count slow-bucket cache/ 1 30) || fail "the slow upload did not arrive" "$got"
assert_eq "$got" 1 "slow bucket: the upload ends later"
assert_eq "$(grep -c ' MISMATCH$' "$S3P_LOG")" 0 "slow bucket: every request signed correctly (sigv4check.py)"
save_status "$mnts" slow
dv_umount "$mnts"

# --- the bucket down: reads still work -------------------------------------------
dead=$(_dv_free_port)
vm down region-east "http://127.0.0.1:$dead"
mntd=$mnt
if reads_ok "$mntd" "$fresh" demo/fresh; then
	pass "bucket down: every read still succeeds from the origin"
else
	fail "bucket down: every read still succeeds from the origin"
fi
logd=$(dv_log "$mntd")
for ((i = 0; i < 300; i++)); do
	[ "$(grep -c "gave up uploading" "$logd")" -ge 3 ] && break
	sleep 0.1
done
if grep -q "tier 'region': lookup of demo/fresh/shard-000000.tar failed" "$logd" &&
	[ "$(grep -c "tier 'region': gave up uploading" "$logd")" = 3 ]; then
	pass "bucket down: failed lookups and uploads are logged, naming the tier"
else
	fail "bucket down: failed lookups and uploads are logged, naming the tier" "$(grep region "$logd" | tail -5)"
fi
save_status "$mntd" down
errs=$(tier_stat "$statuses/down.json" region errors)
[ "$errs" -ge 6 ] && pass "bucket down: the failures are counted ($errs tier errors)" ||
	fail "bucket down: the failures are counted ($errs tier errors)"
dv_umount "$mntd"

# --- secrets -------------------------------------------------------------------
save_status "$mnt1" vm1-end
save_status "$mnt2" vm2-end
curl -sf --max-time 5 "http://127.0.0.1:$metrics_port/metrics" >"$statuses/vm2-end.metrics"
logs=()
for m in "$mnt1" "$mnt2"; do logs+=("$(dv_log "$m")"); done
logs+=("$logd")
for f in "$DV_WORK"/datavofs.*.log; do logs+=("$f"); done
leaks=$(grep -l -F -e "$AWS_SECRET_ACCESS_KEY" -e "$AWS_SESSION_TOKEN" "${logs[@]}" "$statuses"/* 2>/dev/null | sort -u)
assert_eq "$leaks" "" "no secret key or session token in any debug log, status file or metrics page"
grep -q "debug:" "$(dv_log "$mnt1")" && pass "the logs searched were at debug level" ||
	fail "the logs searched were at debug level"
dv_umount "$mnt2"
dv_umount "$mnt1"
summary
