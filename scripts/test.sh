#!/usr/bin/env bash
# The test command of datavofs (README): builds and runs every test.
#
#   1. make DEVELOPER=1, unit tests (Check) and integration tests (real
#      FUSE mounts against nginx) built against the system libfuse, whose
#      read path is keep_cache + splice;
#   2. the same built against libfuse 3.17 (scripts/build-libfuse.sh), whose
#      read path is kernel passthrough;
#   3. unit and integration tests again under SANITIZE=address,undefined.
#
# DV_TEST_QUICK=1 runs step 1 only. Prints "N passed, M failed" at the end.
set -uo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc 2>/dev/null || echo 2)
passed=0
failed=0
failures=()

step() {
	local name=$1
	shift
	echo "=== $name"
	if "$@"; then
		passed=$((passed + 1))
		echo "=== ok: $name"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "=== FAILED: $name"
	fi
}

step "build (system libfuse)" make -j"$jobs" DEVELOPER=1
step "unit tests" make DEVELOPER=1 unit
step "integration tests (keep_cache read path)" make DEVELOPER=1 integration

if [ "${DV_TEST_QUICK:-0}" != 1 ]; then
	step "build libfuse 3.17" scripts/build-libfuse.sh
	step "build (libfuse 3.17)" make -j"$jobs" DEVELOPER=1 BUILD=build-pt FUSE_PREFIX=build/libfuse
	step "integration tests (passthrough read path)" \
		make DEVELOPER=1 BUILD=build-pt FUSE_PREFIX=build/libfuse integration
	step "build (address,undefined sanitizers)" \
		make -j"$jobs" DEVELOPER=1 BUILD=build-asan SANITIZE=address,undefined
	step "unit + integration tests under sanitizers" \
		env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		make DEVELOPER=1 BUILD=build-asan SANITIZE=address,undefined check
fi

echo
for f in "${failures[@]}"; do
	echo "failed step: $f"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
