# shellcheck shell=bash
# tests/faults/lib_faults.sh: what the fault tests source after
# tests/integration/lib.sh and fixtures.sh.
#
#   fo_start ROOT              start the fault origin (origin.py) on ROOT; exports
#                              FO_URL FO_PORT FO_LOG FO_CTL FO_PID
#   fo_set KEY SPEC [KEY SPEC…] the control file maps each KEY (content hash or "*")
#                              to SPEC (see origin.py); resets its counters
#   fo_clear                   no fault at all
#   fo_count ERE               origin log lines matching ERE (grep -E)
#   timed_read FILE            reads FILE whole; prints "ERRNO SECONDS SHA256"
#                              (ERRNO 0 on success, else its name)
#   expect_read NAME FILE ERRNO MAX_SECS [SHA256]
#                              one check: the read ends with ERRNO within MAX_SECS
#                              seconds (and, on success, has SHA256)
#   scan_tiers NAME ORIGIN TIER… [--no-staging]
#                              one check: every <hash>.tar in every TIER matches
#                              the sha256 of its manifest (scan_tiers.py)
#   hash_of ORIGIN DATASET SHARD / sha_of ORIGIN DATASET SHARD
#   dv_kill_mount MNT          SIGKILL the daemon of MNT, detach the dead mount

FAULTS_DIR="$DV_ROOT/tests/faults"

fo_start() {
	local root=$1 i pid
	FO_CTL="$DV_WORK/faults.json"
	FO_LOG="$DV_WORK/origin.log"
	: >"$FO_LOG"
	echo '{}' >"$FO_CTL"
	rm -f "$DV_WORK/origin.port"
	python3 "$FAULTS_DIR/origin.py" --root "$root" --control "$FO_CTL" \
		--log "$FO_LOG" --port-file "$DV_WORK/origin.port" ${FO_PORT_WANT:+--port "$FO_PORT_WANT"} \
		>>"$DV_WORK/origin.stderr" 2>&1 &
	pid=$!
	dv_track "$pid" origin.py
	for ((i = 0; i < 100; i++)); do
		if [ -s "$DV_WORK/origin.port" ]; then
			FO_PORT=$(cat "$DV_WORK/origin.port")
			export FO_PORT FO_URL="http://127.0.0.1:$FO_PORT" FO_LOG FO_CTL FO_PID=$pid
			return 0
		fi
		sleep 0.1
	done
	fail "fo_start: origin.py did not start" "$(cat "$DV_WORK/origin.stderr")"
	return 1
}

fo_stop() {
	[ -n "${FO_PID:-}" ] && dv_stop_pid "$FO_PID" 5
	unset FO_PID
}

fo_set() {
	python3 - "$FO_CTL" "$@" <<-'PY'
		import json, os, sys
		path, args = sys.argv[1], sys.argv[2:]
		table = dict(zip(args[0::2], args[1::2]))
		with open(path + ".tmp", "w") as f:
		    json.dump(table, f)
		os.rename(path + ".tmp", path)
	PY
	# The server compares mtimes in ns; make sure two writes differ.
	sleep 0.02
}

fo_clear() { fo_set; }

fo_count() { grep -cE -- "$1" "$FO_LOG"; }

timed_read() {
	python3 - "$1" <<-'PY'
		import errno, hashlib, sys, time
		t0 = time.monotonic()
		h = hashlib.sha256()
		try:
		    with open(sys.argv[1], "rb") as f:
		        while True:
		            b = f.read(1 << 20)
		            if not b:
		                break
		            h.update(b)
		    e = "0"
		except OSError as ex:
		    e = errno.errorcode.get(ex.errno, str(ex.errno))
		print("%s %.1f %s" % (e, time.monotonic() - t0, h.hexdigest()))
	PY
}

expect_read() {
	local name=$1 file=$2 want=$3 max=$4 sha=${5:-} got e secs s
	got=$(timed_read "$file")
	read -r e secs s <<<"$got"
	DV_LAST_READ="$e ${secs}s"
	if [ "$e" != "$want" ]; then
		fail "$name" "got errno $e after ${secs}s, expected $want"
		return 1
	fi
	if ! awk -v s="$secs" -v m="$max" 'BEGIN { exit !(s <= m) }'; then
		fail "$name" "errno $e as expected, but after ${secs}s (bound ${max}s)"
		return 1
	fi
	if [ "$want" = 0 ] && [ -n "$sha" ] && [ "$s" != "$sha" ]; then
		fail "$name" "wrong bytes: sha256 $s, expected $sha"
		return 1
	fi
	pass "$name ($e in ${secs}s)"
}

scan_tiers() {
	local name=$1 out
	shift
	local args=() a flags=()
	for a in "$@"; do
		case "$a" in --*) flags+=("$a") ;; *) args+=("$a") ;; esac
	done
	if out=$(python3 "$FAULTS_DIR/scan_tiers.py" "${flags[@]}" "${args[@]}" 2>&1); then
		pass "$name: ${out##*$'\n'}"
	else
		fail "$name" "$out"
	fi
}

hash_of() { shard_field "$1" "$2" "$3" content_hash; }
sha_of() { shard_field "$1" "$2" "$3" sha256; }

# dv_kill_mount MNT: SIGKILL the daemon of MNT, then detach its dead mount
# and forget it (the next dv_mount on MNT is a remount).
dv_kill_mount() {
	local mnt pid line start
	mnt=$(_dv_abs "$1")
	line=$(_dv_reg_get mount "$mnt")
	[ -n "$line" ] || return 1
	IFS=$'\t' read -r _ _ pid start _ <<<"$line"
	_dv_alive "$pid" "$start" && kill -KILL "$pid"
	_dv_wait_exit "$pid" "$start" 10
	fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
	_dv_reg_del mount "$mnt"
}

# A config with the given tiers (NAME:PATH[:MAX_BYTES] each) and timeouts
# small enough that every fault resolves in seconds.
#   fault_config FILE TIERSPEC… [-- YAML LINE…]
fault_config() {
	local file=$1 t name path max
	shift
	{
		echo "tiers:"
		while [ $# -gt 0 ] && [ "$1" != -- ]; do
			IFS=: read -r name path max <<<"$1"
			echo "  - name: $name"
			echo "    path: $path"
			[ -n "$max" ] && echo "    max_bytes: $max"
			shift
		done
		[ "${1:-}" = -- ] && shift
		echo "http:"
		echo "  connect_timeout: 2"
		echo "  low_speed_time: ${FO_LOW_SPEED_TIME:-3}"
		echo "  low_speed_limit: ${FO_LOW_SPEED_LIMIT:-2048}"
		echo "  retries: ${FO_RETRIES:-2}"
		for t in "$@"; do echo "$t"; done
	} >"$file"
}

# dv_umount_ok MNT NAME: one check: MNT unmounts and its daemon exits with
# status 0 (under the sanitizers a report, or a leak at exit, makes it not 0).
dv_umount_ok() {
	local log
	log=$(dv_log "$1")
	if dv_umount "$1" && [ "${DV_LAST_EXIT:-0}" = 0 ]; then
		pass "$2 (exit status ${DV_LAST_EXIT:-?})"
	else
		fail "$2" "daemon exit status: ${DV_LAST_EXIT:-?}" "$(tail -30 "$log" 2>/dev/null)"
	fi
}
