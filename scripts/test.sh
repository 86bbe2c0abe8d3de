#!/usr/bin/env bash
# The test command of datavofs (README): builds and runs every test.
#
#   1. make DEVELOPER=1 (the default build: against libfuse 3.18, built by
#      scripts/build-libfuse.sh when the system's is older, whose read path
#      is kernel passthrough and whose transport can be FUSE over io_uring), the README's first command (scripts/demo.sh,
#      run to the end and unmounted), unit tests (Check) and integration
#      tests (real FUSE mounts against nginx);
#   2. the integration tests again over FUSE over io_uring (every mount
#      with fuse_io_uring=on; enable_uring set for the step, then put back),
#      and built against the system libfuse
#      (make SYSTEM_FUSE=1 BUILD=build-sys), whose read path on Debian 12
#      (libfuse 3.14) is keep_cache + splice;
#   3. unit and integration tests again under SANITIZE=address,undefined;
#   4. reliability: the fault matrix (default build and sanitizers), the
#      valgrind smoke test, 60 s of each fuzz target, a 2-minute soak, the
#      RSS benchmark (docs/reliability.md).
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

if ! pkg-config --atleast-version=3.18 fuse3 2>/dev/null; then
	# As scripts/setup.sh: sid's 3.18, else trixie's 3.17 (no io_uring).
	step "build libfuse 3.18 (scripts/build-libfuse.sh)" bash -c \
		'scripts/build-libfuse.sh || LIBFUSE_SUITE=trixie LIBFUSE_MIN=3.17 scripts/build-libfuse.sh'
fi
step "build (default: passthrough)" make -j"$jobs" DEVELOPER=1
demo_dir=$(mktemp -d "${TMPDIR:-/tmp}/datavo-demo.XXXXXX")
step "the first command (scripts/demo.sh)" env DATAVO_DEMO_DIR="$demo_dir" scripts/demo.sh --unmount
rm -rf "$demo_dir"
step "unit tests" make DEVELOPER=1 unit
step "integration tests (default build: $(build/datavofs --version 2>/dev/null | sed 's/^datavofs [^ ]* //'))" \
	make DEVELOPER=1 integration

# The integration suite again with every mount over FUSE over io_uring
# (fuse_io_uring=on), where the kernel has it and the build's libfuse does:
# the fuse module's enable_uring is set for the step and put back after.
uring_param=/sys/module/fuse/parameters/enable_uring
uring_integration() {
	local prev rc
	prev=$(cat "$uring_param") || return 1
	echo Y >"$uring_param" || return 1
	DV_TEST_MOUNT_OPTS=fuse_io_uring=on make DEVELOPER=1 integration
	rc=$?
	echo "$prev" >"$uring_param"
	return $rc
}

if [ "${DV_TEST_QUICK:-0}" != 1 ]; then
	if [ -w "$uring_param" ] && grep -q DV_FUSE_URING build/fuse-flags 2>/dev/null; then
		step "integration tests over io_uring (fuse_io_uring=on)" uring_integration
	else
		echo "=== skipped: integration tests over io_uring (no $uring_param to set, or a libfuse without io_uring)"
	fi
	step "build (system libfuse)" make -j"$jobs" DEVELOPER=1 SYSTEM_FUSE=1 BUILD=build-sys
	step "integration tests (system libfuse: $(pkg-config --modversion fuse3 2>/dev/null))" \
		make DEVELOPER=1 SYSTEM_FUSE=1 BUILD=build-sys integration
	step "build (address,undefined sanitizers)" \
		make -j"$jobs" DEVELOPER=1 BUILD=build-asan SANITIZE=address,undefined
	step "unit + integration tests under sanitizers" \
		env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		make DEVELOPER=1 BUILD=build-asan SANITIZE=address,undefined check
	# Reliability (docs/reliability.md): the fault matrix with the
	# default build and under the sanitizers, the mount smoke test under
	# valgrind, each fuzz target for DV_FUZZ_SECONDS, a DV_SOAK_SECONDS soak,
	# the RSS with 100,000 shards. About 12 minutes in all on 2 cores.
	step "fault matrix (tests/faults)" make DEVELOPER=1 faults
	step "fault matrix under sanitizers" \
		env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		make DEVELOPER=1 BUILD=build-asan SANITIZE=address,undefined faults
	step "mount smoke test under valgrind" make DEVELOPER=1 valgrind
	step "fuzzing (${DV_FUZZ_SECONDS:-60} s per target)" scripts/fuzz.sh "${DV_FUZZ_SECONDS:-60}"
	step "soak (${DV_SOAK_SECONDS:-120} s)" bash scripts/soak.sh "${DV_SOAK_SECONDS:-120}"
	step "RSS with 100,000 shards" bash scripts/bench-rss.sh
fi

echo
for f in "${failures[@]}"; do
	echo "failed step: $f"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
