#!/usr/bin/env bash
# Builds the libFuzzer targets (make fuzz) and runs each for a while.
#
#   scripts/fuzz.sh [SECONDS] [TARGET…]     default: 60 s each, every target
#
# Each target first replays its regression inputs (tests/fuzz/regressions/
# TARGET/: every crash ever found), then fuzzes from its seed corpus
# (tests/fuzz/corpus/TARGET/) plus a working corpus kept in
# build-fuzz/corpus/TARGET/ (it grows from run to run; never committed).
# Targets run FUZZ_JOBS at a time (default: the number of CPUs). A crash
# leaves its input in build-fuzz/artifacts/TARGET/ and fails the run.
# See tests/fuzz/README.md.
set -uo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
shift || true
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
out=build-fuzz
mkdir -p "$out/logs"
make -s fuzz >"$out/build.log" 2>&1 || { cat "$out/build.log"; echo "fuzz: build failed"; exit 1; }
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi

run_one() {
	local t=$1 bin=$out/fuzz/$1 log=$out/logs/$1.log regs=()
	mkdir -p "$out/corpus/$t" "$out/artifacts/$t" "$out/logs"
	if [ -d "tests/fuzz/regressions/$t" ]; then
		mapfile -t regs < <(find "tests/fuzz/regressions/$t" -type f)
	fi
	if [ ${#regs[@]} -gt 0 ] && ! "$bin" "${regs[@]}" >"$log.regress" 2>&1; then
		echo "$t: a regression input crashes again"
		tail -30 "$log.regress"
		return 1
	fi
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-print_final_stats=1 -artifact_prefix="$out/artifacts/$t/" \
		"$out/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
	local rc=$?
	local runs cov
	runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
	if [ $rc -ne 0 ]; then
		echo "$t: CRASH (exit $rc) after ${runs:-?} runs; input in $out/artifacts/$t/"
		grep -E 'ERROR|SUMMARY|runtime error|#[0-9]+ 0x' "$log" | head -30
		return 1
	fi
	echo "$t: ok, ${runs:-?} runs in ${secs}s, ${cov:-cov ?}, ${#regs[@]} regression inputs replayed"
}

fails=0
pids=()
names=()
for t in "${targets[@]}"; do
	[ -x "$out/fuzz/$t" ] || { echo "$t: no such target"; fails=$((fails + 1)); continue; }
	run_one "$t" >"$out/logs/$t.result" 2>&1 &
	pids+=($!)
	names+=("$t")
	if [ ${#pids[@]} -ge "$jobs" ]; then
		wait "${pids[0]}" || fails=$((fails + 1))
		cat "$out/logs/${names[0]}.result"
		pids=("${pids[@]:1}")
		names=("${names[@]:1}")
	fi
done
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || fails=$((fails + 1))
	cat "$out/logs/${names[$i]}.result"
done
echo "fuzz: ${#targets[@]} targets, $fails failed"
[ "$fails" -eq 0 ]
