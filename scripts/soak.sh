#!/usr/bin/env bash
# The soak: a randomized run against the fault origin.
#
#   scripts/soak.sh [SECONDS]      default 600 (DV_SOAK_SECONDS); CI runs 120
#
# One daemon (DATAVOFS, default build/datavofs) over two tiers far smaller
# than the dataset (tier 0: ~4 shards, tier 1: ~12 of 48), so that fills
# evict constantly; DV_SOAK_READERS readers (default 6) open random shards
# and read random ranges (and one time in four the whole shard), every read
# compared by sha256 with the origin's bytes; the fault origin injects a
# fault into DV_SOAK_FAULT_P (default 0.1) of the shard requests, picked
# among 503, reset, truncated body, corrupted bytes and a wrong
# Content-Length. The daemon's RSS is sampled every 10 s.
#
# Passes when: no wrong byte; every error a reader saw is explained by a
# fault injected on that shard while it was being opened or read; the
# daemon still serves and unmounts; every <hash>.tar in both tiers matches
# its sha256; RSS is bounded (the largest sample of the last quarter is at
# most 1.25 x the largest of the first quarter + 16 MiB, and under 256 MiB).
# Prints the figures; DV_SOAK_JSON=FILE keeps them.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tests/integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum

secs=${1:-${DV_SOAK_SECONDS:-600}}
readers=${DV_SOAK_READERS:-6}
p=${DV_SOAK_FAULT_P:-0.1}
echo "# soak: $secs s, $readers readers, fault probability $p per shard request"

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 48 --kb 256 --seed 123
publish soak/set "$src" "$origin" || bail "publish"
fo_start "$origin" || bail "fault origin"
fo_set "*" "random,p=$p,kinds=status|reset|truncate|corrupt|badlen"
t0="$DV_WORK/t0"
t1="$DV_WORK/t1"
cfg="$DV_WORK/shards.yaml"
fault_config "$cfg" "fast:$t0:1100KiB" "slow:$t1:3300KiB"
mnt=$(dv_tmp mnt)
dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "mount"
pid=$(dv_pid "$mnt")
json=${DV_SOAK_JSON:-$DV_WORK/soak.json}

out=$(python3 "$FAULTS_DIR/readers.py" --origin "$origin" --dataset soak/set \
	--mounts "$mnt" --readers "$readers" --duration "$secs" --mode random \
	--seed "${DV_SOAK_SEED:-$RANDOM}" --fault-log "$FO_LOG" \
	--rss-pid "$pid" --rss-every 10 --json "$json" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
grep -q 'wrong reads 0 (wrong bytes 0)' <<<"$out" && pass "soak: 0 wrong bytes" || fail "soak: 0 wrong bytes" "$out"
grep -q '(unexplained 0)' <<<"$out" && pass "soak: every error is one of an injected fault" ||
	fail "soak: every error is one of an injected fault" "$out"
[ "$rc" = 0 ] || fail "soak: readers.py exited with $rc"

# RSS: bounded, no upward trend.
if rss=$(python3 - "$json" <<-'PY'
	import json, sys
	s = json.load(open(sys.argv[1]))
	v = [r[1] for r in s["rss_kb"] if r[1]]
	if len(v) < 4:
	    print("only %d samples" % len(v)); sys.exit(0)
	q = max(1, len(v) // 4)
	first, last = max(v[:q]), max(v[-q:])
	print("RSS %.1f MiB at start, %.1f MiB max, %.1f MiB at the end; largest first/last quarter %.1f/%.1f MiB"
	      % (v[0] / 1024, max(v) / 1024, v[-1] / 1024, first / 1024, last / 1024))
	sys.exit(0 if last <= first * 1.25 + 16384 and max(v) < 256 * 1024 else 1)
	PY
); then
	pass "soak: $rss (bounded)"
else
	fail "soak: RSS bounded" "$rss"
fi
fo_clear
expect_read "soak: the daemon still serves" "$mnt/soak/set/shard-000000.tar" 0 15 "$(sha_of "$origin" soak/set shard-000000.tar)"
errors=$(grep -c "error" "$(dv_log "$mnt")")
echo "# daemon log: $errors error lines, $(grep -c 'retrying' "$(dv_log "$mnt")") retries"
dv_umount_ok "$mnt" "soak: the daemon unmounts and exits"
scan_tiers "soak: tier scan" "$origin" "$t0" "$t1" --no-staging
summary
