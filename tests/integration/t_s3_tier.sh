#!/usr/bin/env bash
# The cloud topology for S3, against s3rver, every request going through
# tests/integration/sigv4check.py, a proxy that checks each SigV4 signature
# (session token included) and refuses a wrong one (s3rver checks none):
#   - miss: a cold read looks the bucket up (HEAD 404), then reads the origin;
#   - put: the shards are uploaded in the background, one PUT each, and the
#     shard above 64 MiB as a multipart upload whose parts go in parallel;
#     the bucket's objects have the source's bytes;
#   - get and range: a second daemon reads every shard from the bucket; the
#     proxy breaks the first GET of each object half way, and the download
#     resumes with a Range;
#   - no request had a bad signature; secrets never reach the logs.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/s3_lib.sh
. "$DV_ROOT/tests/integration/s3_lib.sh"
dv_need python3 sha256sum curl

N=4
src=$(dv_tmp src)
big=$(dv_tmp big)
origin=$(dv_tmp origin)
mktars "$src" $N --kb 700 --seed 31
mktars "$big" 1 --kb 70000 --seed 32 # 68 MiB: above the 64 MiB threshold
publish demo/train "$src" "$origin" || bail "publish demo/train"
publish demo/big "$big" "$origin" || bail "publish demo/big"
nginx_start "$origin" || bail "nginx"

s3_creds_env
# s3rver checks only the access key; the proxy checks the signatures.
export AWS_ACCESS_KEY_ID=S3RVER # the one access key s3rver knows
export AWS_SECRET_ACCESS_KEY="dvS3cret/Key+ForTests0123456789abcdefABCD"
export AWS_SESSION_TOKEN="dvSessionToken/FwoGZXIvYXdzE+testtoken=="
S3_SECRET=$AWS_SECRET_ACCESS_KEY
s3rver_start dvcache || bail "s3rver"
s3_proxy_start "$S3_URL" --cut-first-get || bail "proxy"

reads_ok() {
	local mnt=$1 dir=$2 ds=$3 f
	for f in "$dir"/*.tar; do
		[ "$(sha256sum <"$mnt/$ds/$(basename "$f")")" = "$(sha256sum <"$f")" ] || return 1
	done
}

# --- VM1: miss, origin, then uploads -----------------------------------------
s3_config "$DV_WORK/vm1.yaml" "$DV_WORK/vm1-tier" dvcache "$S3P_URL"
mnt1=$(dv_tmp mnt1)
dv_mount "$NGINX_URL" "$mnt1" "config=$DV_WORK/vm1.yaml" log_level=debug || bail "mount vm1"
if reads_ok "$mnt1" "$src" demo/train && reads_ok "$mnt1" "$big" demo/big; then
	pass "cold reads through an s3 tier give the source's bytes"
else
	fail "cold reads through an s3 tier give the source's bytes"
fi
assert_eq "$(nginx_count 'GET /shards/')" $((N + 1)) "every cold shard came from the origin once"
got=$(s3_wait_count dvcache cache/ $((N + 1)) 60) || fail "uploads did not all arrive" "$got"
assert_eq "$got" $((N + 1)) "put: the bucket holds every shard under cache/<hash>.tar"
# Each cold shard: a HEAD by the lookup, and one before its upload (another
# VM may have put it there meanwhile).
assert_eq "$(grep -c '^HEAD /dvcache/cache/[0-9a-f]*\.tar 404 OK' "$S3P_LOG")" $((2 * (N + 1))) \
	"miss: each cold shard was looked up in the bucket (HEAD 404)"

ok=1
for f in "$src"/*.tar "$big"/*.tar; do
	ds=demo/train
	case "$f" in "$big"/*) ds=demo/big ;; esac
	h=$(shard_field "$origin" $ds "$(basename "$f")" content_hash)
	want=$(sha256sum <"$f")
	have=$(curl -sf "$S3_URL/dvcache/cache/$h.tar" | sha256sum)
	[ "$want" = "$have" ] || { ok=0; fail "object cache/$h.tar has the bytes of $(basename "$f")"; }
done
[ $ok = 1 ] && pass "put: every object in the bucket has the source's bytes"
bh=$(shard_field "$origin" demo/big shard-000000.tar content_hash)
assert_eq "$(grep -c "^POST /dvcache/cache/$bh\.tar?uploads= 200 OK" "$S3P_LOG")" 1 \
	"put: the 68 MiB shard went up as a multipart upload"
parts=$(grep -c "^PUT /dvcache/cache/$bh\.tar?partNumber=[0-9]*&uploadId=.* 200 OK" "$S3P_LOG")
assert_eq "$parts" 5 "put: in five parts of 16 MiB"
assert_eq "$(grep -c "^POST /dvcache/cache/$bh\.tar?uploadId=.* 200 OK" "$S3P_LOG")" 1 \
	"put: the multipart upload was completed"
assert_eq "$(grep -cE "^PUT /dvcache/cache/[0-9a-f]+\.tar 200 OK" "$S3P_LOG")" $N \
	"put: the small shards went up in one PUT each"
if grep -q "multipart upload of cache/$bh.tar: 5 parts" "$(dv_log "$mnt1")"; then
	pass "the daemon logged the multipart plan"
else
	fail "the daemon logged the multipart plan"
fi

# --- VM2: get and range -------------------------------------------------------
before=$(nginx_count 'GET /shards/')
s3_config "$DV_WORK/vm2.yaml" "$DV_WORK/vm2-tier" dvcache "$S3P_URL"
mnt2=$(dv_tmp mnt2)
dv_mount "$NGINX_URL" "$mnt2" "config=$DV_WORK/vm2.yaml" log_level=debug || bail "mount vm2"
if reads_ok "$mnt2" "$src" demo/train && reads_ok "$mnt2" "$big" demo/big; then
	pass "get: a second daemon reads every shard from the bucket, right bytes"
else
	fail "get: a second daemon reads every shard from the bucket, right bytes"
fi
assert_eq "$(nginx_count 'GET /shards/')" "$before" "get: no new origin GET"
assert_eq "$(ls "$DV_WORK/vm2-tier"/*.tar | wc -l)" $((N + 1)) "get: every shard is now in the second local tier"
assert_eq "$(grep -cE '^GET /dvcache/cache/[0-9a-f]+\.tar 206 OK' "$S3P_LOG")" $((N + 1)) \
	"range: each broken download resumed with a Range (206)"
if grep -q "resuming at byte" "$(dv_log "$mnt2")"; then
	pass "range: the daemon logged the resume"
else
	fail "range: the daemon logged the resume"
fi

# --- signatures and secrets ---------------------------------------------------
total=$(wc -l <"$S3P_LOG")
assert_eq "$(grep -c ' MISMATCH$' "$S3P_LOG")" 0 "every one of $total requests had a valid SigV4 signature"
[ "$total" -gt $((3 * N)) ] && pass "the proxy saw the requests ($total)" || fail "the proxy saw the requests ($total)"
cat "$mnt1/.datavo/status" >"$DV_WORK/status1.json"
cat "$mnt2/.datavo/status" >"$DV_WORK/status2.json"
leaks=$(grep -l -F -e "$AWS_SECRET_ACCESS_KEY" -e "$AWS_SESSION_TOKEN" \
	"$(dv_log "$mnt1")" "$(dv_log "$mnt2")" "$DV_WORK/status1.json" "$DV_WORK/status2.json")
assert_eq "$leaks" "" "no secret key or session token in the debug logs or the status files"
assert_eq "$(tier_stat "$DV_WORK/status2.json" region hits)" $((N + 1)) "the s3 tier counted its hits"
dv_umount "$mnt2"
dv_umount "$mnt1"
summary
