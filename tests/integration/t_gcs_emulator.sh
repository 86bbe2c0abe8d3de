#!/usr/bin/env bash
# The cloud topology for GCS, against the GCS emulator (firebase-tools):
# miss (an empty bucket sends every read to the origin), put (media uploads
# for small shards, a resumable upload for one above 8 MiB; every object's
# bytes equal the shard), get (a second daemon reads every shard from the
# bucket, none from the origin), range (a download cut in the middle resumes
# with a Range request; answered with the whole object instead, as the
# emulator does past the end, the daemon starts over). Objects are named
# <prefix>/<content_hash>.tar; STORAGE_EMULATOR_HOST makes the tier anonymous.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/gcs_lib.sh
. "$DV_ROOT/tests/integration/gcs_lib.sh"
dv_need python3 sha256sum curl

PREFIX=region/us-central1
BUCKET=datavo-cache-us-central1
small=$(dv_tmp small)
big=$(dv_tmp big)
origin=$(dv_tmp origin)
mktars "$small" 4 --kb 500 --seed 31
mktars "$big" 1 --kb 9300 --seed 32
publish demo/small "$small" "$origin" || bail "publish demo/small"
publish demo/big "$big" "$origin" || bail "publish demo/big"
nginx_start "$origin" || bail "nginx"
gcs_emu_start || bail "emulator"
export STORAGE_EMULATOR_HOST="127.0.0.1:$GCS_EMU_PORT"

# vm NAME [ENDPOINT]: a daemon with its own local tier over the bucket; sets $mnt.
vm() {
	gcs_config "$DV_WORK/$1.yaml" "$DV_WORK/$1-tier" "$BUCKET" "${2:-}" "    prefix: $PREFIX"
	mnt=$(dv_tmp "$1-mnt")
	dv_mount "$NGINX_URL" "$mnt" "config=$DV_WORK/$1.yaml" log_level=debug || bail "mount $1"
}

reads_ok() {
	local mnt=$1 dir=$2 ds=$3 f
	for f in "$dir"/*.tar; do
		[ "$(sha256sum <"$mnt/$ds/$(basename "$f")")" = "$(sha256sum <"$f")" ] || return 1
	done
}

check() { if "$@"; then pass "$CHECK"; else fail "$CHECK"; fi; }

# --- miss, then put -----------------------------------------------------------
assert_eq "$(gcs_count "$BUCKET")" 0 "the bucket starts empty"
vm vm1
mnt1=$mnt
CHECK="VM1: every shard reads with the published bytes (small and big)"
check reads_ok "$mnt1" "$small" demo/small && reads_ok "$mnt1" "$big" demo/big
assert_eq "$(nginx_count 'GET /shards/')" 5 "miss: an empty bucket sends all 5 reads to the origin"
assert_eq "$(gcs_wait_count "$BUCKET" 5 60 "$PREFIX/")" 5 "put: the bucket then holds 5 objects under $PREFIX/"
ok=1
for f in "$small"/*.tar "$big"/*.tar; do
	ds=demo/small
	case "$f" in "$big"/*) ds=demo/big ;; esac
	h=$(shard_field "$origin" "$ds" "$(basename "$f")" content_hash)
	name="$PREFIX/$h.tar"
	[ "$(gcs_sha256 "$BUCKET" "$name")" = "$(sha256sum <"$f" | cut -d' ' -f1)" ] || { ok=0; fail "put: bytes of $name"; }
	[ "$(gcs_size "$BUCKET" "$name")" = "$(stat -c %s "$f")" ] || { ok=0; fail "put: size of $name"; }
done
[ $ok = 1 ] && pass "put: every object is <prefix>/<content_hash>.tar with the shard's bytes and size"
log1=$(dv_log "$mnt1")
assert_eq "$(grep -c "tier 'region': uploaded gs://$BUCKET/$PREFIX/.* media upload, 1 request)" "$log1")" 4 \
	"put: the four small shards went up as media uploads"
assert_eq "$(grep -c "tier 'region': uploaded gs://$BUCKET/$PREFIX/.* resumable upload, 2 requests)" "$log1")" 1 \
	"put: the $(stat -c %s "$big"/shard-000000.tar)-byte shard went up as a resumable upload (session + 1 chunk)"
grep -q "anonymous (STORAGE_EMULATOR_HOST)" "$log1" && pass "STORAGE_EMULATOR_HOST: no credentials" ||
	fail "STORAGE_EMULATOR_HOST: no credentials" "$(grep "tier 'region'" "$log1" | head -5)"
dv_umount "$mnt1"

# --- get ----------------------------------------------------------------------
vm vm2
mnt2=$mnt
CHECK="get: VM2 reads every shard with the published bytes"
check reads_ok "$mnt2" "$small" demo/small && reads_ok "$mnt2" "$big" demo/big
assert_eq "$(nginx_count 'GET /shards/')" 5 "get: no new origin GET"
assert_eq "$(ls "$DV_WORK/vm2-tier"/*.tar | wc -l)" 5 "get: every shard is now in VM2's local tier"
assert_eq "$(grep -c "tier 'region': uploaded" "$(dv_log "$mnt2")")" 0 "get: nothing is uploaded again"
dv_umount "$mnt2"

# --- range: a cut download resumes --------------------------------------------
gcs_proxy_start --cut-media 1 || bail "proxy"
vm vm3 "$GCS_PROXY_URL"
mnt3=$mnt
CHECK="range: the big shard reads right though its first download was cut"
check reads_ok "$mnt3" "$big" demo/big
if grep -q '?alt=media - 200-cut' "$GCS_PROXY_LOG" && grep -qE '\?alt=media bytes=[0-9]+- 206' "$GCS_PROXY_LOG"; then
	pass "range: the daemon resumed with Range: bytes=N- and the emulator answered 206"
else
	fail "range: the daemon resumed with Range: bytes=N- and the emulator answered 206" "$(cat "$GCS_PROXY_LOG")"
fi
grep -q "resuming at byte" "$(dv_log "$mnt3")" && pass "range: the resume is logged" || fail "range: the resume is logged"
assert_eq "$(nginx_count 'GET /shards/')" 5 "range: still no origin GET"
dv_umount "$mnt3"
gcs_proxy_stop

# --- range answered with the whole object -------------------------------------
gcs_proxy_start --cut-media 1 --drop-range || bail "proxy"
vm vm4 "$GCS_PROXY_URL"
mnt4=$mnt
CHECK="whole object: the big shard reads right"
check reads_ok "$mnt4" "$big" demo/big
assert_eq "$(grep -cE '\?alt=media bytes=[0-9]+- 200 ' "$GCS_PROXY_LOG")" 1 \
	"whole object: the retry was answered 200 with the whole object"
grep -q "answered with the whole object, starting over" "$(dv_log "$mnt4")" &&
	pass "whole object: the daemon started its staging file over" ||
	fail "whole object: the daemon started its staging file over" "$(cat "$GCS_PROXY_LOG")"
dv_umount "$mnt4"
summary
