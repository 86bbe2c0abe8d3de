#!/usr/bin/env bash
# The Azure Blob tier, against Azurite, which verifies every
# Shared Key and SAS signature. For Shared Key (AZURE_STORAGE_KEY) and for a
# SAS token (sas_token in shards.yaml):
#   - put: a cold read fetches from the origin (every blob a miss) and uploads
#     every shard in the background: Put Blob for small ones, Put Block + Put
#     Block List for one above 64 MiB (its committed blocks are counted);
#   - get and range-get: a second daemon with an empty local tier reads all
#     from the container, through a proxy that cuts the first GET of each blob
#     in half, so each download resumes with a Range GET; no origin GET;
#   - a missing blob is a miss: a shard not in the container comes from the origin.
# Then a wrong account key and a tampered SAS: the read fails with EACCES, the
# origin is not asked, and the log says why without the secret.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/azure_lib.sh
. "$DV_ROOT/tests/integration/azure_lib.sh"
dv_need python3 sha256sum curl

src=$(dv_tmp src)
big=$(dv_tmp big)
extra=$(dv_tmp extra)
origin=$(dv_tmp origin)
mktars "$src" 4 --kb 300 --seed 11
mktars "$big" 1 --kb 67000 --seed 12 --prefix big-
mktars "$extra" 1 --kb 200 --seed 13 --prefix extra-
publish demo/train "$src" "$origin" || bail "publish demo/train"
publish demo/big "$big" "$origin" || bail "publish demo/big"
publish demo/extra "$extra" "$origin" || bail "publish demo/extra"
nginx_start "$origin" || bail "nginx"
azurite_start || bail "azurite"
azure_env
azproxy_start --cut-first-get || bail "proxy"
bighash=$(shard_field "$origin" demo/big big-000000.tar content_hash)
xhash=$(shard_field "$origin" demo/extra extra-000000.tar content_hash)
[ "$(stat -c %s "$big/big-000000.tar")" -gt $((64 << 20)) ] || bail "the big shard is not above 64 MiB"

# every_shard_reads MNT: sha256 of every shard of demo/train and demo/big as published.
every_shard_reads() {
	local mnt=$1 f want got
	for f in "$src"/*.tar "$big"/*.tar; do
		want=$(sha256sum "$f" | cut -d' ' -f1)
		case "$f" in "$big"/*) got=$(sha256sum "$mnt/demo/big/$(basename "$f")") ;;
		*) got=$(sha256sum "$mnt/demo/train/$(basename "$f")") ;; esac
		[ "${got%% *}" = "$want" ] || return 1
	done
}

# run_kind NAME CONTAINER [YAML…]: the put / get / range-get / miss sequence.
run_kind() {
	local kind=$1 cont=$2 url cfg before n blobs mnt_a mnt_b resumed what want got
	shift 2
	url=$(az_container "$cont") || bail "$kind: create container $cont"
	before=$(nginx_count 'GET /shards/')

	cfg="$DV_WORK/$kind-a.yaml"
	azure_config "$cfg" "$DV_WORK/$kind-tier-a" "$url" "    prefix: team-a" "$@"
	mnt_a=$(dv_tmp "$kind-mnt-a")
	dv_mount "$NGINX_URL" "$mnt_a" "config=$cfg" log_level=debug || bail "$kind: mount A"
	what=$([ "$kind" = sas ] && echo "SAS token (sas_token in shards.yaml)" ||
		echo "Shared Key (AZURE_STORAGE_KEY, account 'devstoreaccount1')")
	if every_shard_reads "$mnt_a"; then pass "$kind: a cold read gives the published bytes"; else fail "$kind: a cold read gives the published bytes"; fi
	assert_eq "$(nginx_count 'GET /shards/')" $((before + 5)) "$kind: every blob a miss, five origin GETs"
	assert_eq "$(grep -c "tier 'region': authorizing with $what" "$(dv_log "$mnt_a")")" 1 "$kind: requests are authorized with $what"
	n=$(az wait "$url" 5 60)
	assert_eq "$n" 5 "$kind: the container holds all five shards after the background uploads"
	blobs=$(az list "$url" | sort | tr '\n' ' ')
	want=$(for d in train big; do python3 -c 'import json,sys; [print("team-a/%s.tar" % s["content_hash"]) for s in json.load(open(sys.argv[1]))["shards"]]' "$origin/demo/$d/manifest.json"; done | sort | tr '\n' ' ')
	assert_eq "$blobs" "$want" "$kind: blobs are <prefix>/<content_hash>.tar"
	assert_eq "$(az blocks "$url/team-a/$bighash.tar")" 9 "$kind: the 67 MB shard went up as a list of 9 blocks"
	assert_eq "$(grep -c "tier 'region': $bighash: 9 blocks of 8388608 bytes sent on 4 threads" "$(dv_log "$mnt_a")")" 1 \
		"$kind: its blocks went up on 4 threads in parallel"
	assert_eq "$(az blocks "$url/team-a/$(basename "$(ls "$DV_WORK/$kind-tier-a"/*.tar | grep -v "$bighash" | head -1)")")" 0 \
		"$kind: a small shard went up with one Put Blob"
	dv_umount "$mnt_a"

	# VM B: empty local tier, the container through the cutting proxy.
	cfg="$DV_WORK/$kind-b.yaml"
	azure_config "$cfg" "$DV_WORK/$kind-tier-b" "$AZPROXY_URL/$cont" "    prefix: team-a" "$@"
	mnt_b=$(dv_tmp "$kind-mnt-b")
	: >"$AZPROXY_LOG"
	dv_mount "$NGINX_URL" "$mnt_b" "config=$cfg" log_level=debug || bail "$kind: mount B"
	if every_shard_reads "$mnt_b"; then pass "$kind: every shard read from the container has the right bytes"; else fail "$kind: every shard read from the container has the right bytes"; fi
	assert_eq "$(nginx_count 'GET /shards/')" $((before + 5)) "$kind: no origin GET when the container has the shards"
	assert_eq "$(ls "$DV_WORK/$kind-tier-b"/*.tar | wc -l)" 5 "$kind: every shard is now in the second local tier"
	resumed=$(awk -v c="/devstoreaccount1/$cont/team-a/" '$1 == "GET" && index($2, c) == 1 && $4 ~ /^bytes=[1-9][0-9]*-/ && $5 == 206' "$AZPROXY_LOG" | wc -l)
	assert_eq "$resumed" 5 "$kind: each cut download resumed with a Range GET (206)"
	assert_eq "$(grep -c '^CUT ' "$AZPROXY_LOG")" 5 "$kind: the proxy cut five downloads"
	# A blob the container lacks: HEAD 404, a miss, the origin serves it.
	got=$(sha256sum "$mnt_b/demo/extra/extra-000000.tar" | cut -d' ' -f1)
	assert_eq "$got" "$(sha256sum "$extra/extra-000000.tar" | cut -d' ' -f1)" "$kind: a missing blob is a miss: right bytes from the origin"
	assert_eq "$(nginx_count "GET /shards/$xhash")" "$([ "$kind" = sharedkey ] && echo 1 || echo 2)" "$kind: the missing blob cost one origin GET"
	# (the background upload that follows asks again before its PUT)
	n=$(grep -c "HEAD /devstoreaccount1/$cont/team-a/$xhash.tar - - 404" "$AZPROXY_LOG")
	if [ "$n" -ge 1 ]; then pass "$kind: the miss was a HEAD answered 404"; else fail "$kind: the miss was a HEAD answered 404" "$(cat "$AZPROXY_LOG")"; fi
	if grep -q 'access denied' "$(dv_log "$mnt_b")"; then fail "$kind: no access-denied line" "$(grep 'access denied' "$(dv_log "$mnt_b")")"; else pass "$kind: no access-denied line"; fi
	dv_umount "$mnt_b"
}

# --- Shared Key -----------------------------------------------------------------
run_kind sharedkey sharedkey

# --- SAS --------------------------------------------------------------------------
sas=$(az sas racw "$AZURITE_URL/sastest") || bail "make a SAS"
sig=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.parse_qs(sys.argv[1])["sig"][0])' "$sas")
run_kind sas sastest "    sas_token: \"?$sas\""
for f in "$DV_WORK"/datavofs.*.log; do
	if grep -qF -- "$sig" "$f" || grep -qF -- "$AZ_KEY_WELL_KNOWN" "$f"; then
		fail "no key or SAS signature in $(basename "$f")"
	fi
done
pass "no daemon log (debug level) holds the account key or the SAS signature"

# --- a wrong key: EACCES, not a miss ---------------------------------------------
wrong_key=$(head -c 64 /dev/urandom | base64 -w0)
url=$(az_container denied) || bail "container denied"
before=$(nginx_count 'GET /shards/')
cfg="$DV_WORK/wrongkey.yaml"
azure_config "$cfg" "$DV_WORK/wrongkey-tier" "$url"
mnt=$(dv_tmp wrongkey-mnt)
AZURE_STORAGE_KEY=$wrong_key dv_mount "$NGINX_URL" "$mnt" "config=$cfg" log_level=debug || bail "mount with a wrong key"
assert_eq "$(read_errno "$mnt/demo/train/shard-000000.tar")" EACCES "a wrong account key: the read fails with EACCES"
assert_eq "$(nginx_count 'GET /shards/')" "$before" "a wrong account key: the origin is not asked"
log=$(dv_log "$mnt")
if grep -q "access denied: HTTP 403.* to HEAD .*/denied/.*\.tar with Shared Key (AZURE_STORAGE_KEY, account 'devstoreaccount1'): check the account key" "$log"; then
	pass "a wrong account key: a log line says access denied, with which credential and what to check"
else
	fail "a wrong account key: a log line says access denied, with which credential and what to check" "$(cat "$log")"
fi
if grep -qF -- "$wrong_key" "$log"; then fail "the wrong key is not in the log"; else pass "the wrong key is not in the log"; fi
assert_eq "$(find "$DV_WORK/wrongkey-tier" -name '*.tar' | wc -l)" 0 "a wrong account key: nothing lands in the local tier"
dv_umount "$mnt"

# --- a tampered SAS: EACCES too --------------------------------------------------
bad=$(python3 -c 'import sys, urllib.parse as u
q = u.parse_qs(sys.argv[1]); q["sig"] = ["AAAA" + q["sig"][0][4:]]
print(u.urlencode({k: v[0] for k, v in q.items()}))' "$(az sas racw "$url")")
badsig=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.parse_qs(sys.argv[1])["sig"][0])' "$bad")
cfg="$DV_WORK/badsas.yaml"
azure_config "$cfg" "$DV_WORK/badsas-tier" "$url" "    sas_token: \"$bad\""
mnt=$(dv_tmp badsas-mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" log_level=debug || bail "mount with a tampered SAS"
assert_eq "$(read_errno "$mnt/demo/train/shard-000001.tar")" EACCES "a tampered SAS: the read fails with EACCES"
assert_eq "$(nginx_count 'GET /shards/')" "$before" "a tampered SAS: the origin is not asked"
log=$(dv_log "$mnt")
if grep -q "access denied: HTTP 403.* to HEAD .* with SAS token (sas_token in shards.yaml): check that the SAS token" "$log"; then
	pass "a tampered SAS: a log line says access denied and what to check"
else
	fail "a tampered SAS: a log line says access denied and what to check" "$(cat "$log")"
fi
if grep -qF -- "$badsig" "$log"; then fail "the SAS signature is not in the log"; else pass "the SAS signature is not in the log"; fi
dv_umount "$mnt"
summary
