#!/usr/bin/env bash
# A region container streams as the origin does: against Azurite (which
# verifies every Shared Key signature, the signed Range included), behind
# tests/integration/azproxy.py (its log counts each GET and its Range; it
# slows every ranged GET down), with nginx as the origin (its access log
# counts the origin's requests):
#   - VM1 reads a dataset published with chunk lists cold: the container
#     then holds every shard;
#   - VM2 (another daemon, empty local tier) reads a shard: its first 64 KiB
#     arrive while the fill still runs; the container saw one ranged GET
#     (206) per chunk and no whole GET; the bytes are right; the shard is
#     then in VM2's local tier; the origin saw the chunk list asked for
#     once and no GET of the shard; nothing was uploaded back;
#   - a chunk list the origin no longer has: the shard is downloaded whole
#     from the container, still no shard GET at the origin.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/azure_lib.sh
. "$DV_ROOT/tests/integration/azure_lib.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum curl

N=3
CS=65536
src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" $N --kb 1200 --seed 41
publish_chunked demo/stream "$src" "$origin" --chunk-size 64KiB || bail "publish"
nginx_start "$origin" || bail "nginx"
azurite_start || bail "azurite"
azure_env
region=$(az_container region) || bail "container region"

shard() { printf 'shard-%06d.tar' "$1"; }
size_of() { stat -c %s "$src/$1"; }
nchunks() { echo $(((($(size_of "$1") + CS - 1) / CS))); }
# gets NAME: "RANGE STATUS" of every GET of shard NAME's blob at the proxy.
gets() {
	local h
	h=$(hash_of "$origin" demo/stream "$1")
	awk -v b="/devstoreaccount1/region/$h.tar" '$1 == "GET" && $2 == b && $3 == "-" { print $4, $5 }' "$AZPROXY_LOG"
}
wait_installed() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -f "$1/$2.tar" ] && return 0
		sleep 0.1
	done
	return 1
}

# --- VM1: cold, from the origin -------------------------------------------------
azure_config "$DV_WORK/vm1.yaml" "$DV_WORK/vm1-tier" "$region"
mnt1=$(dv_tmp vm1-mnt)
dv_mount "$NGINX_URL" "$mnt1" "config=$DV_WORK/vm1.yaml" || bail "mount vm1"
bad=0
for ((i = 0; i < N; i++)); do
	[ "$(sha256sum <"$mnt1/demo/stream/$(shard $i)")" = "$(sha256sum <"$src/$(shard $i)")" ] || bad=$((bad + 1))
done
assert_eq "$bad" 0 "VM1: every shard reads with the published bytes"
assert_eq "$(az wait "$region" $N 60)" $N "VM1: the container then holds every shard"
dv_umount "$mnt1"
origin_gets=$(nginx_count 'GET /shards/[0-9a-f]+\.tar')

# --- VM2: the same container, an empty local tier, a slow link ---------------------
azproxy_start --delay-range 0.5 || bail "proxy"
azure_config "$DV_WORK/vm2.yaml" "$DV_WORK/vm2-tier" "$AZPROXY_URL/region" \
	"fill:" "  parallel: 2"
mnt2=$(dv_tmp vm2-mnt)
dv_mount "$NGINX_URL" "$mnt2" "config=$DV_WORK/vm2.yaml" || bail "mount vm2"
s=$(shard 0)
h=$(hash_of "$origin" demo/stream "$s")
shard_gets=$(nginx_count "GET /shards/$h\.tar")
first=$(head -c $CS "$mnt2/demo/stream/$s" | sha256sum)
n_at_read=$(gets "$s" | grep -c .)
streaming=$(python3 -c 'import json, sys
print(sum(1 for f in json.load(open(sys.argv[1]))["streaming"] if f["hash"] == sys.argv[2]))' "$mnt2/.datavo/status" "$h" 2>&1)
assert_eq "$first" "$(head -c $CS "$src/$s" | sha256sum)" "VM2: the first 64 KiB have the published bytes"
if [ "$n_at_read" -lt "$(nchunks "$s")" ]; then
	pass "VM2: the first 64 KiB arrived before the whole shard ($n_at_read of $(nchunks "$s") parts in)"
else
	fail "VM2: the first 64 KiB arrived before the whole shard" "$n_at_read of $(nchunks "$s") parts in"
fi
assert_eq "$streaming" 1 "VM2: status shows the shard streaming when the first read returned"
assert_eq "$(sha256sum <"$mnt2/demo/stream/$s")" "$(sha256sum <"$src/$s")" "VM2: the whole shard has the published bytes"
wait_installed "$DV_WORK/vm2-tier" "$h" && pass "VM2: the shard is then in VM2's local tier" || fail "VM2: the shard is then in VM2's local tier"
assert_eq "$(sha256sum <"$DV_WORK/vm2-tier/$h.tar" | cut -d' ' -f1)" "$(sha_of "$origin" demo/stream "$s")" "VM2: the installed file is the shard"
assert_eq "$(gets "$s" | grep -c ' 206$')" "$(nchunks "$s")" "VM2: one ranged GET (206, signed Range verified by Azurite) per chunk"
assert_eq "$(gets "$s" | cut -d' ' -f1 | sort | uniq -d | grep -c .)" 0 "VM2: no part asked for twice"
assert_eq "$(gets "$s" | grep -vc '^bytes=[0-9]*-[0-9]* 206$')" 0 "VM2: no whole GET, no refused GET"
assert_eq "$(nginx_count "GET /shards/$h\.tar")" "$shard_gets" "VM2: the origin saw no GET of the shard (VM1's $shard_gets ranged GETs only)"
assert_eq "$(nginx_count "GET /shards/$h\.chunks")" 2 "VM2: the origin was asked for the chunk list once (and VM1 once)"
assert_eq "$(grep -c '^PUT' "$AZPROXY_LOG")" 0 "VM2: nothing uploaded back to the container"
before=$(gets "$s" | grep -c .)
cat "$mnt2/demo/stream/$s" >/dev/null
assert_eq "$(gets "$s" | grep -c .)" "$before" "VM2: the next read is local"
hits=$(python3 -c 'import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tiers"]}
print(t["region"]["hits"])' "$mnt2/.datavo/status" 2>&1)
assert_eq "$hits" 1 "VM2: status counts the hit in the container tier"

# --- a chunk list the origin no longer has: the whole download -------------------
s=$(shard 1)
h=$(hash_of "$origin" demo/stream "$s")
mv "$origin/shards/$h.chunks" "$DV_WORK/held.chunks"
assert_eq "$(sha256sum <"$mnt2/demo/stream/$s")" "$(sha256sum <"$src/$s")" "no chunk list: the shard reads right"
assert_eq "$(gets "$s" | tr '\n' ' ')" "bytes=0-$(($(size_of "$s") - 1)) 206 " "no chunk list: one whole GET from the container"
grep -q "no usable chunk list .*downloading it whole from tier 'region'" "$(dv_log "$mnt2")" &&
	pass "no chunk list: logged" || fail "no chunk list: logged" "$(tail -5 "$(dv_log "$mnt2")")"
assert_eq "$(nginx_count 'GET /shards/[0-9a-f]+\.tar')" "$origin_gets" "VM2: no shard GET at the origin at all"
mv "$DV_WORK/held.chunks" "$origin/shards/$h.chunks"
dv_umount "$mnt2"
summary
