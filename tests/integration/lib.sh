# shellcheck shell=bash
# tests/integration/lib.sh: what every integration test sources.
#
#   #!/usr/bin/env bash
#   . "$(dirname "$0")/lib.sh"
#   www=$(dv_tmp www); echo hi >"$www/a.txt"
#   nginx_start "$www"
#   dv_mount "$NGINX_URL" "$(dv_tmp mnt)" config="$cfg" || bail "mount"
#   assert_eq "$(nginx_count 'GET /shards/')" 1 "one origin download"
#   summary
#
# Output is TAP-like: "ok - NAME" / "not ok - NAME" lines (details follow as
# "#" lines), then summary's "N passed, M failed". run.sh adds these up.
#
# Everything a test starts is recorded (mounts, nginx, other PIDs, each with
# its process start time so that a recycled PID is never signalled) in a
# registry file inside the work dir, and an EXIT trap undoes it all, whether the
# test passes, fails, dies on an error or is interrupted: unmount every mount,
# stop nginx and every recorded PID, remove the work dir (DV_KEEP=1 keeps it).
# Functions that start something (nginx_start, dv_mount) export variables, so
# call them in the test's own shell, not inside $(...).
#
# Environment: DATAVOFS (daemon binary, default build/datavofs of the repo),
# DV_MOUNT_TIMEOUT / DV_UMOUNT_TIMEOUT (seconds, default 20), DV_KEEP=1,
# TMPDIR (where the work dir goes).
#
# Functions:
#   dv_tmp [NAME]              new directory inside the work dir; prints its path
#   nginx_start DIR [PORT]     serve DIR on 127.0.0.1; exports NGINX_PORT NGINX_URL NGINX_LOG NGINX_PID
#   nginx_stop                 stop that nginx (its log stays readable)
#   nginx_count PATTERN        access-log lines whose request line matches PATTERN (ERE)
#   nginx_bytes PATTERN        body bytes sent for those lines
#   nginx_wait_count PATTERN N [SECS]  wait until nginx_count PATTERN >= N; prints the count
#   dv_mount ORIGIN MNT [OPT…] start the daemon on MNT, wait until it is mounted
#   dv_umount MNT              unmount MNT and wait for its daemon to exit
#   dv_pid MNT / dv_log MNT    the daemon PID / log file of MNT
#   dv_track PID [NAME]        register another background PID for cleanup
#   dv_stop_pid PID [SECS]     stop a recorded PID (TERM, then KILL after SECS)
#   dv_need CMD…               bail out unless every CMD is on PATH
#   pass NAME / fail NAME [DETAIL…] / skip NAME REASON / bail REASON
#   assert_eq ACTUAL EXPECTED MSG
#   assert_file_sha256 FILE HEX [MSG]
#   summary                    "N passed, M failed"; exits 1 if any failed or none passed

set -uo pipefail

DV_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DV_TEST=$(basename "${BASH_SOURCE[1]:-$0}")
DV_PASS=0
DV_FAIL=0
DV_SKIP=0
DV_SUMMARY_DONE=0

# The work dir: created once, here, so that dv_tmp is safe inside $(...).
# 0755 (not mktemp's 0700): nginx's workers run as nobody and must reach files in it.
DV_WORK=$(mktemp -d "${TMPDIR:-/tmp}/datavofs-test.XXXXXX") || {
	echo "not ok - $DV_TEST: cannot create a work dir"
	exit 1
}
chmod 0755 "$DV_WORK"
DV_REG="$DV_WORK/.registry"
: >"$DV_REG"
export DV_WORK

# ---------------------------------------------------------------- results

# pass NAME: one passing check.
pass() {
	DV_PASS=$((DV_PASS + 1))
	echo "ok - $*"
}

# fail NAME [DETAIL…]: one failing check; each DETAIL is printed as a "#" line.
fail() {
	DV_FAIL=$((DV_FAIL + 1))
	echo "not ok - $1"
	shift
	local d
	for d in "$@"; do
		printf '%s\n' "$d" | sed 's/^/#   /'
	done
}

# skip NAME REASON: a check that cannot run here (TAP "ok … # SKIP"); not a failure.
skip() {
	DV_SKIP=$((DV_SKIP + 1))
	echo "ok - $1 # SKIP ${2:-}"
}

# bail REASON: a failure after which the test cannot go on: fail, summary, exit 1.
bail() {
	fail "${1:-bail out}" "${@:2}"
	summary
	exit 1
}

# summary: prints "N passed, M failed" on its own line; exits 1 if any check
# failed or if no check passed at all, else returns 0 (the test then ends).
summary() {
	DV_SUMMARY_DONE=1
	[ "$DV_SKIP" -gt 0 ] && echo "# $DV_SKIP skipped"
	[ "$DV_PASS" -eq 0 ] && [ "$DV_FAIL" -eq 0 ] && echo "# no check ran"
	echo "$DV_PASS passed, $DV_FAIL failed"
	if [ "$DV_FAIL" -gt 0 ] || [ "$DV_PASS" -eq 0 ]; then
		exit 1
	fi
	return 0
}

# assert_eq ACTUAL EXPECTED MSG: passes when the two strings are equal.
assert_eq() {
	if [ "$1" == "$2" ]; then
		pass "$3"
	else
		fail "$3" "got:      '$1'" "expected: '$2'"
	fi
}

# assert_file_sha256 FILE HEX [MSG]: passes when FILE is readable and its sha256 is HEX.
assert_file_sha256() {
	local f=$1 want=$2 msg=${3:-"sha256 of $1"} got
	if ! got=$(sha256sum -- "$f" 2>&1); then
		fail "$msg" "cannot read $f: $got"
		return 1
	fi
	got=${got%% *}
	if [ "$got" == "$want" ]; then
		pass "$msg"
	else
		fail "$msg" "got:      $got" "expected: $want"
		return 1
	fi
}

# dv_need CMD…: bails out (a failure, not a skip) unless every CMD is on PATH:
# scripts/setup.sh --test installs what the tests need.
dv_need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || bail "$DV_TEST needs $c (scripts/setup.sh --test)"
	done
}

# ---------------------------------------------------------------- processes

# Start time of PID (field 22 of /proc/PID/stat), the guard against PID reuse.
_dv_starttime() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) } # fields after "(comm) "; state is the first
	# shellcheck disable=SC2086
	set -- $s
	echo "${20}"
}

_dv_state() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	echo "${s%% *}"
}

# True while PID is alive (not a zombie) and is still the process recorded
# with START (0: the process was gone before its start time could be read).
_dv_alive() {
	local pid=$1 start=$2 now
	now=$(_dv_starttime "$pid") || return 1
	[ "$now" = "$start" ] || return 1
	[ "$(_dv_state "$pid")" != Z ]
}

# Start time of a process just started, 0 if it is already gone.
_dv_start_of() { _dv_starttime "$1" || echo 0; }

# Registry lines: KIND<TAB>KEY<TAB>PID<TAB>START<TAB>EXTRA (no field is empty:
# read with IFS=tab would merge empty fields).
_dv_reg_add() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:--}" >>"$DV_REG"; }
_dv_reg_get() { awk -F'\t' -v k="$1" -v key="$2" '$1 == k && $2 == key { l = $0 } END { if (l != "") print l }' "$DV_REG"; }
_dv_reg_del() {
	awk -F'\t' -v k="$1" -v key="$2" '!($1 == k && $2 == key)' "$DV_REG" >"$DV_REG.new" &&
		mv -f "$DV_REG.new" "$DV_REG"
}

# Waits up to SECS for PID (started at START) to exit; sets DV_LAST_EXIT to its
# exit status when it was this shell's child (else to an empty string).
_dv_wait_exit() {
	local pid=$1 start=$2 secs=$3 i
	DV_LAST_EXIT=""
	for ((i = 0; i < secs * 10; i++)); do
		if ! _dv_alive "$pid" "$start"; then
			wait "$pid" 2>/dev/null
			DV_LAST_EXIT=$?
			[ "$DV_LAST_EXIT" = 127 ] && DV_LAST_EXIT="" # not our child
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# Sends TERM to a recorded PID, then KILL after SECS; only if it is still the
# process that was recorded.
_dv_terminate() {
	local pid=$1 start=$2 secs=${3:-10}
	_dv_alive "$pid" "$start" || { wait "$pid" 2>/dev/null; return 0; } # reaps our zombie
	kill -TERM "$pid" 2>/dev/null
	_dv_wait_exit "$pid" "$start" "$secs" && return 0
	_dv_alive "$pid" "$start" && kill -KILL "$pid" 2>/dev/null
	_dv_wait_exit "$pid" "$start" 5
}

# dv_track PID [NAME]: registers a background process this test started, so that
# the cleanup stops it (TERM, then KILL).
dv_track() {
	local start
	start=$(_dv_starttime "$1") || return 1
	_dv_reg_add pid "$1" "$1" "$start" "${2:-}"
}

# dv_stop_pid PID [SECS]: stops a PID recorded with dv_track (TERM, KILL after SECS).
dv_stop_pid() {
	local line pid start
	line=$(_dv_reg_get pid "$1")
	[ -n "$line" ] || { echo "# dv_stop_pid: $1 was not recorded" >&2; return 1; }
	IFS=$'\t' read -r _ _ pid start _ <<<"$line"
	_dv_terminate "$pid" "$start" "${2:-10}"
	_dv_reg_del pid "$1"
}

# dv_tmp [NAME]: creates and prints a new directory inside the test's work dir
# (which the cleanup removes). Safe to call as d=$(dv_tmp).
dv_tmp() {
	local d
	d=$(mktemp -d "$DV_WORK/${1:-tmp}.XXXXXX") || return 1
	chmod 0755 "$d"
	echo "$d"
}

# ---------------------------------------------------------------- nginx

_dv_free_port() {
	python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# nginx_start DIR [PORT]: serves DIR (made world-readable: the workers run as
# nobody) on 127.0.0.1:PORT (default: a free port) with an nginx whose config,
# pid file, temp paths and logs all live in a new directory of the work dir.
# Waits until it answers; exports NGINX_PORT, NGINX_URL (no trailing slash),
# NGINX_LOG (access log: "addr [time] "REQUEST" STATUS BYTES "RANGE"") and NGINX_PID.
# One nginx at a time; nginx_stop then nginx_start DIR "$NGINX_PORT" restarts it on the same port.
nginx_start() {
	local www=$1 want_port=${2:-} dir port conf pid start i code
	[ -d "$www" ] || { fail "nginx_start: no directory $www"; return 1; }
	if [ -n "${NGINX_PID:-}" ] && [ -n "$(_dv_reg_get nginx nginx)" ]; then
		fail "nginx_start: nginx already running (PID $NGINX_PID)"
		return 1
	fi
	dv_need nginx curl python3
	www=$(cd "$www" && pwd)
	chmod -R a+rX "$www"
	dir=$(dv_tmp nginx) || return 1
	mkdir -p "$dir/logs" "$dir/tmp"
	for _ in 1 2 3 4 5; do
		port=${want_port:-$(_dv_free_port)}
		conf="$dir/nginx.conf"
		cat >"$conf" <<-EOF
			worker_processes 1;
			daemon off;
			master_process on;
			pid $dir/nginx.pid;
			error_log $dir/logs/error.log warn;
			events { worker_connections 256; }
			http {
			    log_format dv '\$remote_addr [\$time_local] "\$request" \$status \$body_bytes_sent "\$http_range"';
			    access_log $dir/logs/access.log dv;
			    client_body_temp_path $dir/tmp/body;
			    proxy_temp_path $dir/tmp/proxy;
			    fastcgi_temp_path $dir/tmp/fastcgi;
			    uwsgi_temp_path $dir/tmp/uwsgi;
			    scgi_temp_path $dir/tmp/scgi;
			    types { application/octet-stream bin tar; application/json json; text/plain txt; }
			    default_type application/octet-stream;
			    sendfile on;
			    server {
			        listen 127.0.0.1:$port;
			        root $www;
			        autoindex on;
			        location = /.dv-ready { access_log off; return 204; }
			    }
			}
		EOF
		: >"$dir/logs/access.log"
		nginx -p "$dir" -c "$conf" -e "$dir/logs/error.log" >>"$dir/logs/stdout.log" 2>&1 &
		pid=$!
		start=$(_dv_start_of "$pid")
		_dv_reg_add nginx nginx "$pid" "$start" "$dir"
		for ((i = 0; i < 100; i++)); do
			_dv_alive "$pid" "$start" || break
			code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/.dv-ready" 2>/dev/null)
			if [ "$code" = 204 ]; then
				export NGINX_PORT=$port NGINX_URL="http://127.0.0.1:$port" \
					NGINX_LOG="$dir/logs/access.log" NGINX_PID=$pid NGINX_DIR=$dir
				return 0
			fi
			sleep 0.1
		done
		_dv_terminate "$pid" "$start" 5
		_dv_reg_del nginx nginx
		# Someone took the port between the probe and nginx's bind: try another one.
		if [ -z "$want_port" ] && grep -q 'Address already in use' "$dir/logs/error.log" 2>/dev/null; then
			continue
		fi
		break
	done
	fail "nginx_start: nginx did not answer on 127.0.0.1:$port" "$(cat "$dir/logs/error.log" "$dir/logs/stdout.log" 2>/dev/null)"
	return 1
}

# nginx_stop: stops the nginx of nginx_start (TERM, KILL after 10 s) and unsets
# NGINX_PID; NGINX_LOG stays readable.
nginx_stop() {
	local line pid start
	line=$(_dv_reg_get nginx nginx)
	[ -n "$line" ] || return 0
	IFS=$'\t' read -r _ _ pid start _ <<<"$line"
	_dv_terminate "$pid" "$start" 10
	_dv_reg_del nginx nginx
	unset NGINX_PID
}

# nginx_count PATTERN: how many access-log lines have a request line
# ("GET /path HTTP/1.1") matching the extended regex PATTERN, e.g. "GET /shards/".
nginx_count() {
	[ -n "${NGINX_LOG:-}" ] || { echo 0; return 1; }
	_dv_nginx_lines "$1" | wc -l
}

# Access-log line numbers whose request line matches the ERE (grep -E: mawk
# has no {n,m}). nginx writes a '"' inside the request as \x22, so the request
# is always the second '"'-separated field.
_dv_nginx_lines() {
	cut -d'"' -f2 "$NGINX_LOG" | grep -nE -- "$1" | cut -d: -f1
}

# nginx_bytes PATTERN: total body bytes nginx sent for the requests nginx_count counts.
nginx_bytes() {
	[ -n "${NGINX_LOG:-}" ] || { echo 0; return 1; }
	_dv_nginx_lines "$1" | awk -F'"' 'NR == FNR { want[$1]; next }
		FNR in want { split($3, f, " "); n += f[2] } END { printf "%d\n", n }' - "$NGINX_LOG"
}

# nginx_wait_count PATTERN N [SECS]: waits (default 5 s) until nginx_count
# PATTERN reaches N (nginx logs a request just after its last byte is sent);
# prints the final count; fails if N was not reached.
nginx_wait_count() {
	local pat=$1 n=$2 secs=${3:-5} i c
	for ((i = 0; i <= secs * 20; i++)); do
		c=$(nginx_count "$pat")
		[ "$c" -ge "$n" ] && { echo "$c"; return 0; }
		sleep 0.05
	done
	echo "$c"
	return 1
}

# ---------------------------------------------------------------- datavofs

_dv_bin() {
	local b=${DATAVOFS:-build/datavofs}
	case "$b" in /*) ;; *) b="$DV_ROOT/$b" ;; esac
	echo "$b"
}

_dv_abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }

# dv_mount ORIGIN MNT [OPT…]: runs "$DATAVOFS ORIGIN MNT -f -o OPT,OPT…" in the
# background (ORIGIN "" leaves it out; an OPT starting with "-" is passed as
# is, e.g. -d) with its output in a log file of the work dir. Unless the test
# exported them, HOME is a directory of the work dir and DATAVO_SHARD_CACHE_DIR
# the work dir's "cache", so that no test reads the user's config or fills the
# user's cache. Waits (DV_MOUNT_TIMEOUT, 20 s) until MNT is a mountpoint; if the
# daemon exits or the time runs out: prints its log, records a failure, returns 1.
dv_mount() {
	local origin=$1 mnt=$2 bin log pid start opts=() flags=() o i
	shift 2
	bin=$(_dv_bin)
	[ -x "$bin" ] || { fail "dv_mount: no daemon at $bin (make, or set DATAVOFS)"; return 1; }
	# DV_TEST_MOUNT_OPTS (a comma-separated -o list) goes to every mount of a
	# run, before the test's own options, which win (scripts/test.sh runs the
	# suite over io_uring with fuse_io_uring=on).
	if [ -n "${DV_TEST_MOUNT_OPTS:-}" ]; then
		IFS=, read -ra opts <<<"$DV_TEST_MOUNT_OPTS"
	fi
	for o in "$@"; do
		case "$o" in
		-*) flags+=("$o") ;;
		*) opts+=("$o") ;;
		esac
	done
	mkdir -p "$mnt"
	mnt=$(_dv_abs "$mnt")
	if [ -n "$(_dv_reg_get mount "$mnt")" ]; then
		fail "dv_mount: $mnt is already mounted by this test"
		return 1
	fi
	log=$(mktemp "$DV_WORK/datavofs.XXXXXX.log")
	mkdir -p "$DV_WORK/home"
	local args=()
	[ -n "$origin" ] && args+=("$origin")
	args+=("$mnt" -f)
	if [ ${#opts[@]} -gt 0 ]; then
		args+=(-o "$(
			IFS=,
			echo "${opts[*]}"
		)")
	fi
	args+=("${flags[@]}")
	echo "# datavofs ${args[*]}" >"$log"
	HOME=${DV_HOME:-$DV_WORK/home} \
		DATAVO_SHARD_CACHE_DIR=${DATAVO_SHARD_CACHE_DIR:-$DV_WORK/cache} \
		"$bin" "${args[@]}" >>"$log" 2>&1 &
	pid=$!
	start=$(_dv_start_of "$pid")
	_dv_reg_add mount "$mnt" "$pid" "$start" "$log"
	for ((i = 0; i < ${DV_MOUNT_TIMEOUT:-20} * 10; i++)); do
		# A user's mount without allow_other cannot be stat'ed by root:
		# the mount table shows it.
		if mountpoint -q "$mnt" || grep -q " $mnt fuse" /proc/self/mounts; then
			return 0
		fi
		if ! _dv_alive "$pid" "$start"; then
			wait "$pid" 2>/dev/null
			local rc=$?
			_dv_reg_del mount "$mnt"
			fail "dv_mount $mnt: datavofs exited with status $rc before mounting" "$(cat "$log")"
			return 1
		fi
		sleep 0.1
	done
	_dv_terminate "$pid" "$start" 5
	mountpoint -q "$mnt" && { fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"; }
	_dv_reg_del mount "$mnt"
	fail "dv_mount $mnt: not mounted after ${DV_MOUNT_TIMEOUT:-20} s" "$(cat "$log")"
	return 1
}

# dv_pid MNT: prints the daemon PID of a mount made by dv_mount.
dv_pid() {
	local line
	line=$(_dv_reg_get mount "$(_dv_abs "$1")")
	[ -n "$line" ] || return 1
	cut -f3 <<<"$line"
}

# dv_log MNT: prints the path of the daemon's log file for a mount made by dv_mount.
dv_log() {
	local line
	line=$(_dv_reg_get mount "$(_dv_abs "$1")")
	[ -n "$line" ] || return 1
	cut -f5 <<<"$line"
}

# dv_umount MNT: fusermount3 -u MNT (falling back to -uz when busy), then waits
# (DV_UMOUNT_TIMEOUT, 20 s) for its daemon to exit; a daemon that does not is
# sent TERM, then KILL, and that is a failure. Sets DV_LAST_EXIT to the daemon's
# exit status. Returns 0 when the daemon exited by itself.
dv_umount() {
	local mnt line pid start log err rc=0 lazy=""
	mnt=$(_dv_abs "$1")
	line=$(_dv_reg_get mount "$mnt")
	if [ -z "$line" ]; then
		fail "dv_umount: $mnt was not mounted by dv_mount"
		return 1
	fi
	IFS=$'\t' read -r _ _ pid start log <<<"$line"
	if mountpoint -q "$mnt" || grep -q " $mnt fuse" /proc/self/mounts; then
		if ! err=$(fusermount3 -u "$mnt" 2>&1); then
			echo "# fusermount3 -u $mnt: $err; lazy unmount" >&2
			lazy=" (lazily unmounted: is a file under it still open?)"
			fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
		fi
	fi
	if ! _dv_wait_exit "$pid" "$start" "${DV_UMOUNT_TIMEOUT:-20}"; then
		fail "dv_umount $mnt: datavofs (PID $pid) still running ${DV_UMOUNT_TIMEOUT:-20} s after unmount$lazy" "$(tail -20 "$log")"
		_dv_terminate "$pid" "$start" 5
		rc=1
	fi
	_dv_reg_del mount "$mnt"
	return $rc
}

# ---------------------------------------------------------------- cleanup

# Mount points (fuse or not) under the work dir, deepest first.
_dv_mounts_under_work() {
	awk -v w="$DV_WORK/" '{ gsub(/\\040/, " ", $2); if (index($2, w) == 1) print $2 }' /proc/self/mounts |
		awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-
}

_dv_cleanup() {
	local rc=$? kind key pid start m
	trap - EXIT INT TERM HUP
	if [ "$DV_SUMMARY_DONE" = 0 ]; then
		# The test ended without summary: an error or a signal.
		fail "$DV_TEST ended early (exit status $rc) before summary"
		echo "$DV_PASS passed, $DV_FAIL failed"
		[ "$rc" = 0 ] && rc=1
	fi
	# 1. mounts (their daemons may still be talking to nginx)
	while IFS=$'\t' read -r kind key pid start _; do
		[ "$kind" = mount ] || continue
		if mountpoint -q "$key" || grep -q " $key fuse" /proc/self/mounts; then
			fusermount3 -u "$key" 2>/dev/null || fusermount3 -uz "$key" 2>/dev/null || umount -l "$key" 2>/dev/null
		fi
		_dv_wait_exit "$pid" "$start" 10 || _dv_terminate "$pid" "$start" 5
	done <"$DV_REG"
	# 2. nginx and other recorded processes
	while IFS=$'\t' read -r kind key pid start _; do
		case "$kind" in nginx | pid) _dv_terminate "$pid" "$start" 10 ;; esac
	done <"$DV_REG"
	# 3. anything still mounted under the work dir (made by this test's commands)
	while IFS= read -r m; do
		[ -n "$m" ] || continue
		fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
			echo "# cleanup: could not unmount $m" >&2
	done < <(_dv_mounts_under_work)
	# 4. the work dir
	if [ "${DV_KEEP:-0}" = 1 ]; then
		echo "# work dir kept: $DV_WORK"
	elif [ -z "$(_dv_mounts_under_work)" ]; then
		rm -rf --one-file-system "$DV_WORK"
	else
		echo "# cleanup: $DV_WORK left in place (a mount under it remains)" >&2
	fi
	exit "$rc"
}

trap _dv_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
