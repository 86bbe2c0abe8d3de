#!/usr/bin/env bash
# the s3://bucket/prefix origin (docs/design.md "Kinds of origin"),
# against s3rver behind sigv4check.py (which checks every signature):
# datasets.json and manifests list and stat, shards read with the source's
# bytes, each shard fetched once; AWS_ENDPOINT_URL_S3 points the daemon at
# the store, as it does the AWS SDKs; a revalidation of an unchanged
# manifest answers 304; a missing bucket fails the mount's listing cleanly.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/s3_lib.sh
. "$DV_ROOT/tests/integration/s3_lib.sh"
dv_need python3 sha256sum curl

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 3 --kb 500 --seed 51
publish voice/train "$src" "$origin" || bail "publish"

s3_creds_env
export AWS_SECRET_ACCESS_KEY="originSecret/0a1b2c3d4e5f+S3OriginKey"
S3_SECRET=$AWS_SECRET_ACCESS_KEY
s3rver_start datavo-origin || bail "s3rver"
(cd "$origin" && find . -type f | sed 's|^\./||') | while read -r rel; do
	s3_put datavo-origin "pub/v1/$rel" "$origin/$rel" || echo "upload of $rel failed" >&2
done
assert_eq "$(s3_count datavo-origin pub/v1/)" "$(find "$origin" -type f | wc -l)" "the origin layout is in the bucket"
s3_proxy_start "$S3_URL" || bail "proxy"
export AWS_ENDPOINT_URL_S3=$S3P_URL

cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier" "manifest_ttl: 1"
mnt=$(dv_tmp mnt)
dv_mount "s3://datavo-origin/pub/v1/" "$mnt" "config=$cfg" log_level=debug || bail "mount s3:// origin"
assert_eq "$(ls "$mnt")" "voice" "the root lists datasets.json's datasets"
assert_eq "$(ls "$mnt/voice/train")" "$(ls "$src")" "the dataset lists its shards"
ok=1
for f in "$src"/*.tar; do
	[ "$(sha256sum <"$mnt/voice/train/$(basename "$f")")" = "$(sha256sum <"$f")" ] || { ok=0; fail "bytes of $(basename "$f")"; }
done
[ $ok = 1 ] && pass "every shard reads with the source's bytes"
for f in "$src"/*.tar; do sha256sum <"$mnt/voice/train/$(basename "$f")" >/dev/null; done
assert_eq "$(grep -c '^GET /datavo-origin/pub/v1/shards/[0-9a-f]*\.tar 200 OK' "$S3P_LOG")" 3 \
	"each shard was fetched from the bucket once"
sleep 2
ls "$mnt/voice/train" >/dev/null
for ((i = 0; i < 50; i++)); do
	grep -q '^GET /datavo-origin/pub/v1/voice/train/manifest.json 304 OK' "$S3P_LOG" && break
	sleep 0.1
done
grep -q '^GET /datavo-origin/pub/v1/voice/train/manifest.json 304 OK' "$S3P_LOG" &&
	pass "an unchanged manifest revalidates with If-None-Match (304)" ||
	fail "an unchanged manifest revalidates with If-None-Match (304)" "$(cat "$S3P_LOG")"
assert_eq "$(grep -c ' MISMATCH$' "$S3P_LOG")" 0 "every origin request had a valid SigV4 signature"
grep -q "datavo-origin" "$mnt/.datavo/status" && pass "status names the s3:// origin" ||
	fail "status names the s3:// origin"
leaks=$(grep -l -F -e "$AWS_SECRET_ACCESS_KEY" "$(dv_log "$mnt")" "$mnt/.datavo/status")
assert_eq "$leaks" "" "no secret key in the debug log or the status file"
dv_umount "$mnt"

# A bucket that does not exist: the mount fails at once, saying why.
mnt2=$(dv_tmp mnt2)
out=$(HOME=$DV_WORK/home timeout 30 "$(_dv_bin)" "s3://no-such-bucket/x" "$mnt2" -f -o "config=$cfg" 2>&1)
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && echo "$out" | grep -q "bucket 'no-such-bucket' does not exist" && ! mountpoint -q "$mnt2"; then
	pass "a missing bucket fails the mount with a clear message"
else
	fail "a missing bucket fails the mount with a clear message" "exit $rc" "$out"
	mountpoint -q "$mnt2" && fusermount3 -u "$mnt2"
fi
summary
