#!/usr/bin/env bash
# `datavoctl inspect` says which config won and why (R10), shows
# each tier's capacity, use and free space, and warns about a secret in a
# world-readable file; `datavoctl bench` measures each local tier's read
# throughput with SHA-256 parity and leaves nothing behind.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"

export HOME="$DV_WORK/home"
mkdir -p "$HOME"
# The system file is searched too: on a machine that has one the default
# cases below would not hold, so they are skipped there.
has_system=0
[ -e /etc/datavo/shards.yaml ] && has_system=1

# --- inspect: the built-in default -------------------------------------------
if [ $has_system = 0 ]; then
	out=$(DATAVO_SHARD_CACHE_DIR="$DV_WORK/default-cache" "$DATAVOCTL" inspect 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	assert_eq "$rc" 0 "inspect with no config file exits 0"
	echo "$out" | grep -q "^config: built-in default" && pass "inspect: the built-in default won" ||
		fail "inspect: the built-in default won"
	echo "$out" | grep -Eq "2\. /etc/datavo/shards.yaml +not found" && echo "$out" | grep -Eq "3\. .*shards.yaml +not found" &&
		pass "inspect: says the system and user files were not found" ||
		fail "inspect: says the system and user files were not found"
	echo "$out" | grep -Eq "default +folder +$DV_WORK/default-cache +50(\.0)? GiB .*created on first use" &&
		pass "inspect: the default tier, its capacity, not yet created" || fail "inspect: the default tier"
	[ ! -e "$DV_WORK/default-cache" ] && pass "inspect creates nothing" || fail "inspect creates nothing"

	# --- the user file wins over the default ---
	mkdir -p "$HOME/.config/datavo"
	write_config "$HOME/.config/datavo/shards.yaml" "$DV_WORK/user-tier" "metrics: 127.0.0.1:9999"
	out=$("$DATAVOCTL" inspect 2>&1)
	echo "$out" | grep -q "^config: $HOME/.config/datavo/shards.yaml" && echo "$out" | grep -Eq "3\. .* found  <- used" &&
		pass "inspect: the user file won, and says so" || fail "inspect: the user file won, and says so" "$out"
	echo "$out" | grep -q "metrics: *127.0.0.1:9999" && pass "inspect shows the settings" || fail "inspect shows the settings"
else
	skip "inspect of the default and user configs" "/etc/datavo/shards.yaml exists on this machine"
fi

# --- inspect -c: use, free space, warnings ------------------------------------
tier="$DV_WORK/tier"
mkdir -p "$tier"
head -c 3000 /dev/urandom >"$tier/0123456789abcdef0123456789abcdef.tar"
head -c 5000 /dev/urandom >"$tier/fedcba9876543210fedcba9876543210.tar"
cfg="$DV_WORK/secret.yaml"
cat >"$cfg" <<-EOF
	tiers:
	  - name: nvme
	    path: $tier
	    max_bytes: 1PB
	  - name: region
	    type: azure_blob
	    container_url: https://example.invalid/shards
	    sas_token: "sv=2024&sig=SECRETSECRET"
EOF
chmod 0644 "$cfg"
out=$("$DATAVOCTL" inspect -c "$cfg" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
assert_eq "$rc" 0 "inspect -c exits 0"
echo "$out" | grep -Eq "1\. -c CONFIG +$cfg  <- used" && pass "inspect -c: the explicit file won" ||
	fail "inspect -c: the explicit file won"
echo "$out" | grep -Eq "nvme +folder +$tier +1(\.0)? PiB +7\.[0-9] KiB +2 +[0-9.]+ [KMGT]?i?B" &&
	pass "inspect: capacity, use, objects and free space of a folder tier" ||
	fail "inspect: capacity, use, objects and free space of a folder tier"
echo "$out" | grep -q "warning: $cfg holds a secret (sas_token) and is readable by everyone (mode 0644): chmod 600" &&
	pass "inspect warns about a secret in a world-readable file" ||
	fail "inspect warns about a secret in a world-readable file"
echo "$out" | grep -q "warning: tier 'nvme': max_bytes 1 PiB but its filesystem has" &&
	pass "inspect warns when max_bytes exceeds the free space" || fail "inspect warns when max_bytes exceeds the free space"
echo "$out" | grep -q SECRETSECRET && fail "inspect never prints the secret" || pass "inspect never prints the secret"
chmod 0600 "$cfg"
"$DATAVOCTL" inspect -c "$cfg" 2>&1 | grep -q "holds a secret" && fail "no secret warning once chmod 600" ||
	pass "no secret warning once chmod 600"
"$DATAVOCTL" inspect -c "$DV_WORK/missing.yaml" >/dev/null 2>&1
assert_eq "$?" 1 "inspect -c of a missing file exits 1"
echo "tiers: [ {name: x, path: relative} ]" >"$DV_WORK/bad.yaml"
out=$("$DATAVOCTL" inspect -c "$DV_WORK/bad.yaml" 2>&1)
assert_eq "$?" 1 "inspect of a bad config exits 1"
echo "$out" | grep -q "bad.yaml" && pass "and names the file" || fail "and names the file" "$out"

# --- bench --------------------------------------------------------------------
bcfg="$DV_WORK/bench.yaml"
printf 'tiers:\n  - name: disk\n    path: %s\n  - name: second\n    path: %s\n' "$DV_WORK/b1" "$DV_WORK/b2" >"$bcfg"
out=$("$DATAVOCTL" bench -c "$bcfg" --size-mb 24 --iterations 2 -j 4 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
assert_eq "$rc" 0 "bench exits 0"
assert_eq "$(echo "$out" | grep -c 'sha256 parity ok (6 chunks)')" 4 "two passes on two tiers, SHA-256 parity of every chunk"
echo "$out" | grep -Eq "pass 1: [0-9.]+ [KMGT]?i?B/s" && pass "bench reports a throughput" || fail "bench reports a throughput"
assert_eq "$(find "$DV_WORK/b1" "$DV_WORK/b2" -type f | wc -l)" 0 "bench leaves no file behind"
out=$("$DATAVOCTL" bench -c "$bcfg" --tier second --size-mb 4 --iterations 1 2>&1)
assert_eq "$(echo "$out" | grep -c "^tier ")" 1 "bench --tier NAME benches that tier only"
"$DATAVOCTL" bench -c "$bcfg" --tier nope --size-mb 4 >/dev/null 2>&1
assert_eq "$?" 1 "bench --tier with an unknown name exits 1"
"$DATAVOCTL" bench --size-mb 0 >/dev/null 2>&1
assert_eq "$?" 2 "bench --size-mb 0: usage error"
"$DATAVOCTL" frobnicate >/dev/null 2>&1
assert_eq "$?" 2 "an unknown subcommand: usage error"
"$DATAVOCTL" --help | grep -q "datavoctl preload" && pass "datavoctl --help lists preload" || fail "datavoctl --help lists preload"
summary
