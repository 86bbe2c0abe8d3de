#!/usr/bin/env bash
# The cold-path benchmark of datavofs: shards whose manifest pins a chunk
# list, streamed while they fill. One nginx of its own serves one origin
# dir on two ports of 127.0.0.1: "capped", where every response is limited
# to DV_BENCH_RATE (nginx limit_rate, default 40m: as S3 and CDNs cap each
# connection), and "free", uncapped loopback. It prints, side by side in
# each round and as medians at the end, each with its target beside it:
#   1 ttfb     time to the first 64 KiB of a cold shard on the capped
#              origin: curl | head -c 65536, rclone mount (full VFS cache,
#              fresh cache dir), datavofs (fresh mount, empty tier); and one
#              stream's time for the whole shard (curl); the ratio
#              datavofs ttfb / one stream's time (target <= 0.05)
#   2 epoch    a cold epoch over 4 shards on the capped origin, 1 reader (each
#              shard whole, in turn) and 4 readers (one per shard, at once):
#              datavofs, curl with one stream per shard, and curl with P
#              ranged streams per shard written into one file (P = the fill's
#              parallel); ratio datavofs / curl-P (target >= 0.85)
#   3 kill     a shard on the capped origin read through the mount, the
#              daemon SIGKILLed once nginx has sent 80% of it, the dead mount
#              detached, a new mount on the same tier reads it whole (sha256
#              checked); bytes nginx sent for it / its size (target <= 1.1)
#   4 loopback the free origin: a cold sequential read of every shard of a
#              larger set through datavofs against curl into the filesystem
#              of the tier (curl-fill) (target >= 0.9), 4 readers against 4
#              concurrent curls (target >= 0.6); then the machine's own
#              limits: dd of a tier file in the page cache, OpenSSL's
#              SHA-256 on one core, curl of a shard to /dev/null; and the CPU
#              seconds per GB each side spent (daemon + reader, curl; nginx)
#   5 loader   a PyTorch DataLoader (4 workers, tarfile, each worker its own
#              shards; scripts/bench-cold-loader.py) over that set through a
#              mount: the cold epoch (fresh tier) against the warm epochs
#              after it on the same mount (target cold/warm >= 0.7)
# Before every cold measurement the page cache is dropped (the origin's
# files are then read back into it: the origin is a server with its own
# cache, not this machine's disk) and the tier is new and empty.
#
# usage: scripts/bench-cold.sh         (make bench-cold)
# Environment (defaults in brackets):
#   DV_BENCH_ROUNDS [3]        rounds; the medians are over them
#   DV_BENCH_RATE [40m]        nginx limit_rate of the capped port
#   DV_BENCH_PARALLEL [8]      fill: parallel, and the P of curl-P
#   DV_BENCH_SHARD_MIB [128]   shard size of parts 1 and 2
#   DV_BENCH_KILL_MIB [256]    shard size of part 3
#   DV_BENCH_LOOP_SHARDS [16], DV_BENCH_LOOP_MIB [128]   the set of parts 4, 5
#   DV_BENCH_LOADER_ORIGIN [capped]   capped or free: part 5's origin
#   DV_BENCH_LOADER_EPOCHS [3]  epochs of part 5 (the first is the cold one)
#   DV_BENCH_PARTS [1 2 3 4 5]  which parts run
#   DV_BENCH_QUICK=1            a run of under a minute: 1 round, 32 MiB
#                               shards, a 64 MiB kill shard, 8 x 32 MiB
# Never a pass/fail test of speed: the machine is shared and noisy; it
# prints figures, ratios and targets. It fails only when a read is wrong.
set -uo pipefail
DV_ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ "${DV_BENCH_QUICK:-0}" = 1 ]; then
	: "${DV_BENCH_ROUNDS:=1}" "${DV_BENCH_SHARD_MIB:=32}" "${DV_BENCH_KILL_MIB:=64}"
	: "${DV_BENCH_LOOP_SHARDS:=8}" "${DV_BENCH_LOOP_MIB:=32}"
fi
rounds=${DV_BENCH_ROUNDS:-3}
rate=${DV_BENCH_RATE:-40m}
P=${DV_BENCH_PARALLEL:-8}
shard_mib=${DV_BENCH_SHARD_MIB:-128}
kill_mib=${DV_BENCH_KILL_MIB:-256}
loop_n=${DV_BENCH_LOOP_SHARDS:-16}
loop_mib=${DV_BENCH_LOOP_MIB:-128}
loader_origin=${DV_BENCH_LOADER_ORIGIN:-capped}
loader_epochs=${DV_BENCH_LOADER_EPOCHS:-3}
parts=" ${DV_BENCH_PARTS:-1 2 3 4 5} "
export DATAVOFS=${DATAVOFS:-$DV_ROOT/build/datavofs}
export DATAVOCTL=${DATAVOCTL:-$DV_ROOT/build/datavoctl}
# shellcheck source=tests/integration/lib.sh
. "$DV_ROOT/tests/integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need curl dd nginx python3 sha256sum fusermount3 truncate
has() { [[ $parts == *" $1 "* ]]; }
has 1 && dv_need rclone
if has 5 && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	bail "part 5 needs Debian's python3-torch (scripts/setup.sh --test)"
fi

now() { echo "$EPOCHREALTIME"; }
calc() { awk "BEGIN { printf \"%.${2:-2}f\", $1 }"; }
secs() { calc "$2 - $1" 3; }
mbps() { calc "$1 / 1e6 / $2" 0; } # BYTES SECONDS
declare -A notes=()
note() { notes[$1]="${notes[$1]:-} $2"; }
median() {
	python3 -c 'import statistics, sys; print("%.*f" % (int(sys.argv[1]), statistics.median(map(float, sys.argv[2:]))))' \
		"${2:-2}" ${notes[$1]}
}

# ---------------------------------------------------------------- origin
# bench_nginx ROOT: one nginx, two servers (capped, free) over ROOT; the
# access log ends each line with the port. Exports CAP_URL FREE_URL and
# NGINX_LOG (for nginx_bytes of lib.sh); lib.sh's cleanup stops it by PID.
bench_nginx() {
	local www=$1 dir cport fport pid start i
	dir=$(dv_tmp nginx)
	mkdir -p "$dir/logs" "$dir/tmp"
	chmod -R a+rX "$www"
	cport=$(_dv_free_port)
	fport=$(_dv_free_port)
	while [ "$fport" = "$cport" ]; do fport=$(_dv_free_port); done
	cat >"$dir/nginx.conf" <<-EOF
		worker_processes 2;
		daemon off;
		pid $dir/nginx.pid;
		error_log $dir/logs/error.log warn;
		events { worker_connections 512; }
		http {
		    log_format dv '\$remote_addr [\$time_local] "\$request" \$status \$body_bytes_sent "\$http_range" \$server_port';
		    access_log $dir/logs/access.log dv;
		    client_body_temp_path $dir/tmp/body;
		    proxy_temp_path $dir/tmp/proxy;
		    fastcgi_temp_path $dir/tmp/fastcgi;
		    uwsgi_temp_path $dir/tmp/uwsgi;
		    scgi_temp_path $dir/tmp/scgi;
		    types { application/octet-stream bin tar chunks; application/json json; }
		    default_type application/octet-stream;
		    sendfile on;
		    keepalive_requests 100000;
		    server {
		        listen 127.0.0.1:$cport;
		        root $www;
		        autoindex on;
		        limit_rate $rate;
		        location = /.dv-ready { access_log off; return 204; }
		    }
		    server {
		        listen 127.0.0.1:$fport;
		        root $www;
		        autoindex on;
		        location = /.dv-ready { access_log off; return 204; }
		    }
		}
	EOF
	: >"$dir/logs/access.log"
	nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" >>"$dir/logs/stdout.log" 2>&1 &
	pid=$!
	start=$(_dv_start_of "$pid")
	_dv_reg_add nginx nginx "$pid" "$start" "$dir"
	for ((i = 0; i < 100; i++)); do
		if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$cport/.dv-ready")" = 204 ] &&
			[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$fport/.dv-ready")" = 204 ]; then
			export CAP_URL="http://127.0.0.1:$cport" FREE_URL="http://127.0.0.1:$fport" \
				NGINX_LOG="$dir/logs/access.log" NGINX_PID=$pid
			return 0
		fi
		_dv_alive "$pid" "$start" || break
		sleep 0.1
	done
	bail "nginx did not start" "$(cat "$dir/logs/error.log" "$dir/logs/stdout.log" 2>/dev/null)"
}

# ---------------------------------------------------------------- helpers
# cold_prep FILE…: nothing of the last run in the page cache, nothing dirty;
# the origin's FILEs read back in (the origin serves from its memory).
cold_prep() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	cat "$@" >/dev/null
}

# fresh_mount URL: a new empty tier and a new mount of URL; sets TIER MNT.
fresh_mount() {
	TIER=$(dv_tmp tier)
	local cfg="$TIER.yaml"
	write_config "$cfg" "$TIER" "fill:" "  parallel: $P" "  timeout: 60"
	MNT=$(dv_tmp mnt)
	dv_mount "$1" "$MNT" "config=$cfg" >/dev/null || bail "mount $1"
	ls -l "$MNT"/bench/* >/dev/null # names and sizes, before any clock
}

# drop_mount: unmount MNT, remove its tier. A daemon that does not exit
# cleanly (part 1 unmounts with its fill still running) is a failure,
# with the end of its log.
drop_mount() {
	local log
	log=$(dv_log "$MNT")
	dv_umount "$MNT" >/dev/null || fail "unmount $MNT" "$(tail -5 "$log")"
	if [ -n "${DV_LAST_EXIT:-}" ] && [ "$DV_LAST_EXIT" != 0 ]; then
		fail "the daemon exited with status $DV_LAST_EXIT at unmount" "$(tail -5 "$log")"
	fi
	rm -rf "$TIER" "$TIER.yaml" "$MNT"
}

# wait_pids PID…: waits for each (never a bare wait: nginx and the daemons
# are children of this shell too); returns 1 if any failed.
wait_pids() {
	local p rc=0
	for p in "$@"; do wait "$p" || rc=1; done
	return $rc
}

read_files() { local f; for f in "$@"; do dd if="$f" of=/dev/null bs=1M status=none || return 1; done; }
curl_files() { # DIR URL… : one stream each, into DIR
	local d=$1 u
	shift
	for u in "$@"; do curl -fsS -o "$d/${u##*/}" "$u" || return 1; done
}
# curl_ranges DIR URL SIZE: P concurrent `curl -r a-b` into one file of DIR.
curl_ranges() {
	local out="$1/${2##*/}" url=$2 size=$3 step a b i pids=()
	step=$(((size + P - 1) / P))
	truncate -s "$size" "$out"
	for ((i = 0; i < P; i++)); do
		a=$((i * step))
		[ "$a" -lt "$size" ] || break
		b=$((a + step - 1))
		[ "$b" -lt "$size" ] || b=$((size - 1))
		(curl -fsS -r "$a-$b" "$url" | dd of="$out" bs=1M seek="$a" oflag=seek_bytes conv=notrunc iflag=fullblock status=none) &
		pids+=($!)
	done
	wait_pids "${pids[@]}"
}
curl_files_ranges() { # DIR SIZE URL…
	local d=$1 size=$2 u
	shift 2
	for u in "$@"; do curl_ranges "$d" "$u" "$size" || return 1; done
}

# at_once CMD ARG…: CMD ARG for every ARG, all at once; waits for all.
at_once() {
	local cmd=$1 a pids=()
	shift
	for a in "$@"; do
		eval "$cmd \"\$a\"" &
		pids+=($!)
	done
	wait_pids "${pids[@]}"
}

# timed CMD…: runs CMD, prints its wall-clock seconds; bails if it fails.
timed() {
	local t0 t1
	t0=$(now)
	"$@" || bail "benchmark step failed: $*"
	t1=$(now)
	secs "$t0" "$t1"
}

hashes_of() { python3 -c 'import json,sys; [print(s["content_hash"]) for s in json.load(open(sys.argv[1]))["shards"]]' "$origin/$1/manifest.json"; }

# CPU seconds (user + system) of running processes PID…, threads that
# ended included.
proc_cpu() {
	local p t=0
	for p in "$@"; do
		t=$((t + $(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	calc "$t / $(getconf CLK_TCK)" 2
}
# cpu_mark VAR sets VAR to this shell's children's CPU seconds so far
# (bash's times must run in this shell: in a $(...) it reports the
# subshell's own children, none).
cpu_mark() {
	times >"$DV_WORK/times"
	printf -v "$1" '%s' "$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.2f\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$DV_WORK/times")"
}
nginx_workers() { pgrep -P "$NGINX_PID" | tr '\n' ' '; }

# ---------------------------------------------------------------- data
origin=$(dv_tmp origin)
src=$(dv_tmp src)
mktars "$src/cold" 4 --kb $((shard_mib * 1024)) --seed 21
mktars "$src/kill" 1 --kb $((kill_mib * 1024)) --seed 22 --prefix kill-
mktars "$src/loop" "$loop_n" --kb $((loop_mib * 1024)) --seed 23 --prefix loop-
for ds in cold kill loop; do
	publish_chunked "bench/$ds" "$src/$ds" "$origin" || bail "publish bench/$ds"
done
rm -rf "$src"
bench_nginx "$origin"
mapfile -t cold_h < <(hashes_of bench/cold)
mapfile -t loop_h < <(hashes_of bench/loop)
kill_h=$(hashes_of bench/kill)
size_of() { stat -c %s "$origin/shards/$1.tar"; }
cold_size=$(size_of "${cold_h[0]}")
kill_size=$(size_of "$kill_h")
loop_bytes=0
for h in "${loop_h[@]}"; do loop_bytes=$((loop_bytes + $(size_of "$h"))); done
cold_files=() loop_files=()
for h in "${cold_h[@]}"; do cold_files+=("$origin/shards/$h.tar"); done
for h in "${loop_h[@]}"; do loop_files+=("$origin/shards/$h.tar"); done
chunk=$(awk '$1 == "chunk_size" { print $2 / 1048576 " MiB"; exit }' "$origin/shards/${cold_h[0]}.chunks")

echo "# datavofs cold-path benchmark: binary $DATAVOFS, $rounds rounds, medians at the end"
echo "# capped origin $CAP_URL (limit_rate $rate per response), free origin $FREE_URL; fill parallel $P"
echo "# shards: 4 x $((cold_size >> 20)) MiB (parts 1, 2), 1 x $((kill_size >> 20)) MiB (part 3)," \
	"$loop_n x $((loop_bytes / loop_n >> 20)) MiB (parts 4, 5); chunks of $chunk"

# ---------------------------------------------------------------- 1 ttfb
# rclone_ttfb URL PATH: time to the first 64 KiB of PATH through a fresh
# rclone mount (full VFS cache in a new directory).
rclone_ttfb() {
	local url=$1 path=$2 mnt cache pid start t i
	mnt=$(dv_tmp rmnt)
	cache=$(dv_tmp rcache)
	rclone mount :http: "$mnt" --http-url "$url/" --vfs-cache-mode full --cache-dir "$cache" \
		--read-only --config /dev/null >"$cache.log" 2>&1 &
	pid=$!
	start=$(_dv_start_of "$pid")
	_dv_reg_add pid "$pid" "$pid" "$start" rclone
	for ((i = 0; i < 200; i++)); do
		mountpoint -q "$mnt" && break
		sleep 0.05
	done
	mountpoint -q "$mnt" || bail "rclone mount" "$(cat "$cache.log")"
	ls -l "$mnt/${path%/*}" >/dev/null
	t=$(timed dd if="$mnt/$path" of=/dev/null bs=64k count=1 status=none)
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
	dv_stop_pid "$pid" 10
	rm -rf "$mnt" "$cache" "$cache.log"
	echo "$t"
}

part_ttfb() {
	local r url="$CAP_URL/shards/${cold_h[0]}.tar" c w rc d
	for r in $(seq 1 "$rounds"); do
		cold_prep "${cold_files[0]}"
		c=$(timed bash -c "curl -s '$url' | head -c 65536 >/dev/null")
		cold_prep "${cold_files[0]}"
		w=$(timed curl -fsS -o /dev/null "$url")
		cold_prep "${cold_files[0]}"
		rc=$(rclone_ttfb "$CAP_URL" "shards/${cold_h[0]}.tar")
		fresh_mount "$CAP_URL"
		cold_prep "${cold_files[0]}"
		d=$(timed dd if="$MNT/bench/cold/shard-000000.tar" of=/dev/null bs=64k count=1 status=none)
		drop_mount
		echo "round $r ttfb (first 64 KiB, capped): curl $c s, rclone $rc s, datavofs $d s;" \
			"one stream whole $w s ($(mbps "$cold_size" "$w") MB/s); datavofs ttfb / one stream $(calc "$d / $w" 3) (target <= 0.05)"
		note ttfb_curl "$c"
		note ttfb_rclone "$rc"
		note ttfb_dv "$d"
		note one_stream "$w"
		note ttfb_ratio "$(calc "$d / $w" 4)"
	done
}

# ---------------------------------------------------------------- 2 epoch
part_epoch() {
	local r bytes=$((4 * cold_size)) urls=() dl t d1 d4 c1 c4 p1 p4 f
	for f in "${cold_h[@]}"; do urls+=("$CAP_URL/shards/$f.tar"); done
	for r in $(seq 1 "$rounds"); do
		fresh_mount "$CAP_URL"
		set -- "$MNT"/bench/cold/*.tar
		cold_prep "${cold_files[@]}"
		d1=$(timed read_files "$@")
		drop_mount
		fresh_mount "$CAP_URL"
		set -- "$MNT"/bench/cold/*.tar
		cold_prep "${cold_files[@]}"
		d4=$(timed at_once read_files "$@")
		drop_mount
		dl=$(dv_tmp dl)
		cold_prep "${cold_files[@]}"
		c1=$(timed curl_files "$dl" "${urls[@]}")
		rm -f "$dl"/*
		cold_prep "${cold_files[@]}"
		c4=$(timed at_once "curl_files $dl" "${urls[@]}")
		rm -f "$dl"/*
		cold_prep "${cold_files[@]}"
		p1=$(timed curl_files_ranges "$dl" "$cold_size" "${urls[@]}")
		rm -f "$dl"/*
		cold_prep "${cold_files[@]}"
		p4=$(timed at_once "curl_files_ranges $dl $cold_size" "${urls[@]}")
		rm -rf "$dl"
		echo "round $r cold epoch (capped, 4 shards), MB/s: 1 reader datavofs $(mbps $bytes "$d1")," \
			"curl $(mbps $bytes "$c1"), curl-$P ranges $(mbps $bytes "$p1"), ratio datavofs / curl-$P $(calc "$p1 / $d1");" \
			"4 readers datavofs $(mbps $bytes "$d4"), curl $(mbps $bytes "$c4"), curl-$P ranges $(mbps $bytes "$p4")," \
			"ratio $(calc "$p4 / $d4") (target >= 0.85)"
		note e1_dv "$(mbps $bytes "$d1")"
		note e1_c "$(mbps $bytes "$c1")"
		note e1_p "$(mbps $bytes "$p1")"
		note e4_dv "$(mbps $bytes "$d4")"
		note e4_c "$(mbps $bytes "$c4")"
		note e4_p "$(mbps $bytes "$p4")"
		note e1_ratio "$(calc "$p1 / $d1" 3)"
		note e4_ratio "$(calc "$p4 / $d4" 3)"
	done
}

# ---------------------------------------------------------------- 3 kill
# sent_for HASH: bytes nginx has logged as sent for that shard's payload
# (one awk: it is polled while the shard streams in).
sent_for() {
	awk -F'"' -v p="GET /shards/$1.tar " 'index($2, p) == 1 { split($3, f, " "); n += f[2] } END { printf "%d\n", n }' "$NGINX_LOG"
}

part_kill() {
	local r want target before reader sent_kill partial got after i n m
	want=$(shard_field "$origin" bench/kill kill-000000.tar sha256)
	target=$((kill_size * 8 / 10))
	for r in $(seq 1 "$rounds"); do
		fresh_mount "$CAP_URL"
		cold_prep "$origin/shards/$kill_h.tar"
		before=$(sent_for "$kill_h")
		dd if="$MNT/bench/kill/kill-000000.tar" of=/dev/null bs=1M status=none 2>/dev/null &
		reader=$!
		for ((i = 0; i < 6000; i++)); do
			[ $(($(sent_for "$kill_h") - before)) -ge "$target" ] && break
			sleep 0.02
		done
		dv_kill_mount "$MNT" || bail "SIGKILL of the daemon"
		wait "$reader" 2>/dev/null
		sent_kill=$(($(sent_for "$kill_h") - before))
		partial=$(stat -c %s "$TIER/.staging/$kill_h.partial" 2>/dev/null || echo none)
		dv_mount "$CAP_URL" "$MNT" "config=$TIER.yaml" >/dev/null || bail "remount after SIGKILL"
		got=$(sha256sum <"$MNT/bench/kill/kill-000000.tar" | cut -d' ' -f1)
		[ "$got" = "$want" ] || bail "SIGKILL at 80%: the remount's read is wrong" "got $got" "want $want"
		for ((i = 0; i < 300; i++)); do
			[ -f "$TIER/$kill_h.tar" ] && break
			sleep 0.1
		done
		# nginx logs a request when it ends: wait until nothing new comes.
		n=$(wc -l <"$NGINX_LOG")
		for ((i = 0; i < 20; i++)); do
			sleep 0.25
			m=$(wc -l <"$NGINX_LOG")
			[ "$m" = "$n" ] && break
			n=$m
		done
		after=$(($(sent_for "$kill_h") - before))
		drop_mount
		echo "round $r SIGKILL at 80% ($((kill_size >> 20)) MiB, capped): sent before the kill $(calc "$sent_kill / $kill_size")" \
			"of the shard (staging file: $partial bytes), in all $(calc "$after / $kill_size" 3) of it (target <= 1.1), sha256 right"
		note kill_ratio "$(calc "$after / $kill_size" 4)"
	done
	pass "SIGKILL at 80%: every remount read the shard right"
}

# ---------------------------------------------------------------- 4 loopback
part_loop() {
	local r urls=() dl ds dc d4 c4 h f i k files=() lists=() clists=() keep=""
	for h in "${loop_h[@]}"; do urls+=("$FREE_URL/shards/$h.tar"); done
	for r in $(seq 1 "$rounds"); do
		fresh_mount "$FREE_URL"
		set -- "$MNT"/bench/loop/*.tar
		cold_prep "${loop_files[@]}"
		local cc1 dpid cc0 dc0 nc0
		dpid=$(dv_pid "$MNT")
		cpu_mark cc0
		dc0=$(proc_cpu "$dpid") nc0=$(proc_cpu $(nginx_workers))
		ds=$(timed read_files "$@")
		cpu_mark cc1
		cpu_dv="daemon $(calc "($(proc_cpu "$dpid") - $dc0) * 1e9 / $loop_bytes") + reader (dd) $(calc "($cc1 - $cc0) * 1e9 / $loop_bytes")"
		cpu_dv+=", nginx $(calc "($(proc_cpu $(nginx_workers)) - $nc0) * 1e9 / $loop_bytes")"
		drop_mount
		fresh_mount "$FREE_URL"
		files=("$MNT"/bench/loop/*.tar)
		# reader k reads shards k, k+4, ... in turn
		lists=()
		for ((k = 0; k < 4; k++)); do
			f=""
			for ((i = k; i < ${#files[@]}; i += 4)); do f+=" $(printf '%q' "${files[i]}")"; done
			lists+=("$f")
		done
		cold_prep "${loop_files[@]}"
		d4=$(timed at_once read_files_of "${lists[@]}")
		if [ "$r" = "$rounds" ]; then keep=$TIER; else drop_mount; fi
		dl=$(dv_tmp dl) # the filesystem of the tiers
		cold_prep "${loop_files[@]}"
		cpu_mark cc0
		nc0=$(proc_cpu $(nginx_workers))
		dc=$(timed curl_files "$dl" "${urls[@]}")
		cpu_mark cc1
		cpu_c="curl $(calc "($cc1 - $cc0) * 1e9 / $loop_bytes"), nginx $(calc "($(proc_cpu $(nginx_workers)) - $nc0) * 1e9 / $loop_bytes")"
		rm -f "$dl"/*
		clists=()
		for ((k = 0; k < 4; k++)); do
			f=""
			for ((i = k; i < ${#urls[@]}; i += 4)); do f+=" ${urls[i]}"; done
			clists+=("$f")
		done
		cold_prep "${loop_files[@]}"
		c4=$(timed at_once "curl_files_of $dl" "${clists[@]}")
		rm -rf "$dl"
		echo "round $r loopback (free, $loop_n shards), MB/s: sequential datavofs $(mbps $loop_bytes "$ds")," \
			"curl-fill $(mbps $loop_bytes "$dc"), ratio $(calc "$dc / $ds") (target >= 0.9);" \
			"4 readers datavofs $(mbps $loop_bytes "$d4"), 4 curls $(mbps $loop_bytes "$c4"), ratio $(calc "$c4 / $d4") (target >= 0.6)"
		echo "round $r loopback sequential, CPU seconds per GB: datavofs: $cpu_dv; curl-fill: $cpu_c"
		note l_seq_dv "$(mbps $loop_bytes "$ds")"
		note l_seq_c "$(mbps $loop_bytes "$dc")"
		note l4_dv "$(mbps $loop_bytes "$d4")"
		note l4_c "$(mbps $loop_bytes "$c4")"
		note l_seq_ratio "$(calc "$dc / $ds" 3)"
		note l4_ratio "$(calc "$c4 / $d4" 3)"
	done
	# The machine's own limits, on a tier file of the last round (page cache).
	set -- "$keep"/*.tar
	f=$1
	cat "$f" >/dev/null
	local sz t_dd sha t_curl
	sz=$(stat -c %s "$f")
	t_dd=$(timed dd if="$f" of=/dev/null bs=1M status=none)
	sha=$(openssl speed -seconds 1 -bytes 4194304 -evp sha256 2>/dev/null | awk '$1 == "sha256" { sub(/k$/, "", $2); printf "%.0f", $2 / 1000 }')
	t_curl=$(timed curl -fsS -o /dev/null "${urls[0]}")
	LIMITS="dd of a tier file (page cache) $(mbps "$sz" "$t_dd") MB/s, SHA-256 (openssl speed, 4 MiB blocks, as the daemon hashes) ${sha:-?} MB/s (one core),"
	LIMITS+=" curl of a shard over loopback to /dev/null $(mbps "$sz" "$t_curl") MB/s"
	echo "machine: $LIMITS"
	drop_mount
}
# read_files_of "Q-QUOTED PATHS": read_files over a list in one word.
read_files_of() { eval "read_files $1"; }
curl_files_of() { local d=$1; shift; eval "curl_files $d $1"; }

# ---------------------------------------------------------------- 5 loader
part_loader() {
	local r url out cold warm e b t
	url=$([ "$loader_origin" = free ] && echo "$FREE_URL" || echo "$CAP_URL")
	for r in $(seq 1 "$rounds"); do
		fresh_mount "$url"
		cold_prep "${loop_files[@]}"
		out=$(/usr/bin/python3 "$DV_ROOT/scripts/bench-cold-loader.py" "$MNT/bench/loop" "$loader_epochs" 4) ||
			bail "the DataLoader failed" "$out"
		drop_mount
		cold="" warm=""
		while read -r _ e b t _; do
			[ "$b" -gt 0 ] || bail "the DataLoader read nothing"
			if [ "$e" = 1 ]; then cold=$(mbps "$loop_bytes" "$t"); else warm+=" $(mbps "$loop_bytes" "$t")"; fi
		done <<<"$out"
		warm=$(python3 -c 'import statistics, sys; print("%.0f" % statistics.median(map(float, sys.argv[1:])))' $warm)
		echo "round $r DataLoader (4 workers, tarfile, $loader_origin origin), MB/s: cold epoch $cold, warm epochs $warm," \
			"ratio cold / warm $(calc "$cold / $warm") (target >= 0.7)"
		note t_cold "$cold"
		note t_warm "$warm"
		note t_ratio "$(calc "$cold / $warm" 3)"
	done
}

has 1 && part_ttfb
has 2 && part_epoch
has 3 && part_kill
has 4 && part_loop
has 5 && part_loader

echo "# medians over $rounds rounds"
has 1 && echo "ttfb: curl $(median ttfb_curl 3) s, rclone $(median ttfb_rclone 3) s, datavofs $(median ttfb_dv 3) s;" \
	"one stream whole $(median one_stream 2) s; datavofs ttfb / one stream $(median ttfb_ratio 3) (target <= 0.05)"
has 2 && echo "cold epoch, capped, MB/s: 1 reader datavofs $(median e1_dv 0), curl $(median e1_c 0), curl-$P $(median e1_p 0)," \
	"ratio $(median e1_ratio); 4 readers datavofs $(median e4_dv 0), curl $(median e4_c 0), curl-$P $(median e4_p 0)," \
	"ratio $(median e4_ratio) (target >= 0.85)"
has 3 && echo "SIGKILL at 80%: bytes sent / shard size $(median kill_ratio 3) (target <= 1.1)"
has 4 && echo "loopback, MB/s: sequential datavofs $(median l_seq_dv 0), curl-fill $(median l_seq_c 0), ratio $(median l_seq_ratio)" \
	"(target >= 0.9); 4 readers datavofs $(median l4_dv 0), curls $(median l4_c 0), ratio $(median l4_ratio) (target >= 0.6)"
has 4 && echo "machine: $LIMITS"
has 5 && echo "DataLoader, MB/s: cold $(median t_cold 0), warm $(median t_warm 0), ratio $(median t_ratio) (target >= 0.7)"
pass "benchmark ran"
summary
