#!/usr/bin/env bash
# Runs the fault matrix: every tests/faults/t_*.sh, with the accounting of
# tests/integration/run.sh (arguments keep only the tests whose file name
# contains one of them). Environment as there, plus DV_FAULT_REPORT=FILE
# (the tests append "fault|spec|outcome|requests" rows: docs/reliability.md's
# table). Each test file may take DV_TEST_TIMEOUT seconds, default 600.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DV_TEST_DIR=$here DV_TEST_TIMEOUT=${DV_TEST_TIMEOUT:-600} \
	exec "$here/../integration/run.sh" "$@"
