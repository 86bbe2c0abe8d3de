#!/usr/bin/env bash
# Runs the integration tests: every tests/integration/t_*.sh, each in its own
# bash process, in name order (arguments, if any, keep only the tests whose
# file name contains one of them). Adds up their "ok - " / "not ok - " lines;
# a test that exits non-zero without a "not ok" line counts as one failure, and
# so does a test that reports no check at all. Prints "N passed, M failed" last;
# exits non-zero if anything failed or if no test ran.
#
# Environment: DATAVOFS / DATAVOCTL (binaries, default build/), DV_TEST_TIMEOUT
# (seconds per test file, default 900), DV_KEEP=1 (keep work dirs), DV_TEST_DIR
# (where the t_*.sh are, default this directory: tests/faults/run.sh uses it).
set -uo pipefail

here=${DV_TEST_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
tests=()
for t in "$here"/t_*.sh; do
	[ -f "$t" ] || continue
	if [ $# -gt 0 ]; then
		keep=0
		for a in "$@"; do
			case "$(basename "$t")" in *"$a"*) keep=1 ;; esac
		done
		[ "$keep" = 1 ] || continue
	fi
	tests+=("$t")
done

passed=0 failed=0 ran=0
out=$(mktemp "${TMPDIR:-/tmp}/datavofs-run.XXXXXX")
trap 'rm -f "$out"' EXIT

for t in "${tests[@]}"; do
	name=$(basename "$t")
	echo "== $name"
	t0=$(date +%s)
	timeout --kill-after=30 "${DV_TEST_TIMEOUT:-900}" bash "$t" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	ran=$((ran + 1))
	p=$(grep -c '^ok - ' "$out")
	f=$(grep -c '^not ok - ' "$out")
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		if [ "$f" -eq 0 ]; then
			echo "not ok - $name timed out after ${DV_TEST_TIMEOUT:-900} s"
			f=1
		else
			echo "# $name timed out after ${DV_TEST_TIMEOUT:-900} s"
		fi
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited with status $rc"
		f=$((f + 1))
	elif [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name reported no check"
		f=$((f + 1))
	fi
	echo "# $name: $p passed, $f failed in $(($(date +%s) - t0)) s"
	passed=$((passed + p))
	failed=$((failed + f))
done

[ "$ran" -eq 0 ] && echo "no test ran (no $here/t_*.sh${1:+ matching $*})"
echo "$passed passed, $failed failed"
[ "$ran" -gt 0 ] && [ "$failed" -eq 0 ]
