#!/usr/bin/env bash
# Self-test of lib.sh, without datavofs: nginx serves a temp dir, curl fetches
# a file twice, the access log counts both GETs and the bytes match; then the
# failure paths: a failed assertion, a test that dies early (its nginx must be
# stopped and its work dir removed), and dv_mount with a daemon that exits or
# never mounts.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dv_need nginx curl python3 sha256sum

# --- nginx as an origin ------------------------------------------------------
www=$(dv_tmp www)
case "$www" in "$DV_WORK"/*) pass "dv_tmp makes a directory inside the work dir" ;;
*) fail "dv_tmp makes a directory inside the work dir" "got $www" ;; esac
mkdir -p "$www/shards"
size=3000017
head -c "$size" /dev/urandom >"$www/shards/0123456789abcdef0123456789abcdef.tar"
chmod 0600 "$www/shards/0123456789abcdef0123456789abcdef.tar" # nginx_start makes it readable
want=$(sha256sum "$www/shards/0123456789abcdef0123456789abcdef.tar" | cut -d' ' -f1)

nginx_start "$www" || bail "nginx_start"
case "$NGINX_URL" in
"http://127.0.0.1:$NGINX_PORT") pass "nginx_start exports NGINX_URL on 127.0.0.1 ($NGINX_URL)" ;;
*) fail "nginx_start exports NGINX_URL on 127.0.0.1" "got $NGINX_URL" ;;
esac
listen=$(ss -Hltn "sport = :$NGINX_PORT" | awk '{ print $4 }' | sort -u | tr '\n' ' ')
assert_eq "$listen" "127.0.0.1:$NGINX_PORT " "nginx listens on 127.0.0.1 only"
for f in nginx.pid logs/error.log logs/access.log tmp/body; do
	if [ -e "$NGINX_DIR/$f" ]; then pass "nginx's $f is in the work dir"; else fail "nginx's $f is in the work dir"; fi
done
assert_eq "$(nginx_count .)" 0 "the readiness probe is not in the access log"

got=$(dv_tmp got)
url="$NGINX_URL/shards/0123456789abcdef0123456789abcdef.tar"
for i in 1 2; do
	curl -fsS -o "$got/$i" "$url" || fail "curl GET #$i"
done
assert_file_sha256 "$got/1" "$want" "first GET: bytes match"
assert_file_sha256 "$got/2" "$want" "second GET: bytes match"
assert_eq "$(nginx_wait_count 'GET /shards/' 2)" 2 "nginx_count sees 2 GETs of /shards/"
assert_eq "$(nginx_count '^GET /shards/[0-9a-f]{32}\.tar HTTP/')" 2 "nginx_count takes an extended regex"
assert_eq "$(nginx_count 'GET /datasets')" 0 "nginx_count: no false matches"
assert_eq "$(nginx_bytes 'GET /shards/')" $((2 * size)) "nginx_bytes adds up the body bytes"

# Range: 206 and the Range header in the log.
part=$(curl -fsS -r 100-199 "$url" | wc -c)
assert_eq "$part" 100 "a Range request returns 100 bytes"
nginx_wait_count 'GET /shards/' 3 >/dev/null
assert_eq "$(tail -1 "$NGINX_LOG" | awk -F'"' '{ split($3, f, " "); print f[1], f[2], $4 }')" \
	"206 100 bytes=100-199" "the access log records status, bytes and Range"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' "$NGINX_URL/shards/missing.tar")" 404 "a missing file is a 404"

# Stop, then restart on the same port (an "origin down, origin back" test does this).
port=$NGINX_PORT
pid=$NGINX_PID
nginx_stop
if kill -0 "$pid" 2>/dev/null; then fail "nginx_stop stops nginx"; else pass "nginx_stop stops nginx"; fi
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' "$url")" 000 "nothing answers after nginx_stop"
assert_eq "$(nginx_count 'GET /shards/')" 4 "the access log stays readable after nginx_stop"
nginx_start "$www" "$port" || bail "nginx_start on the same port"
assert_eq "$NGINX_PORT" "$port" "nginx_start DIR PORT reuses the port"
curl -fsS -o "$got/3" "$url" || fail "curl after restart"
assert_file_sha256 "$got/3" "$want" "served again after the restart"
assert_eq "$(nginx_wait_count 'GET /shards/' 1)" 1 "a restarted nginx has a fresh access log"

# --- the library's failure paths, each in a child test ------------------------
lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh

out=$(bash -c '. "$1"; assert_eq a b "strings differ"; pass "x"; summary; echo "not reached"' _ "$lib" 2>&1)
rc=$?
assert_eq "$rc" 1 "summary exits 1 after a failed assertion"
case "$out" in
*"not ok - strings differ"*"1 passed, 1 failed") pass "a failed assertion prints not ok and the summary counts it" ;;
*) fail "a failed assertion prints not ok and the summary counts it" "$out" ;;
esac

# A test that starts nginx and dies before summary: cleanup stops nginx, removes its work dir.
out=$(bash -c '. "$1"; d=$(dv_tmp www); echo x >"$d/x"; nginx_start "$d" || exit 9
	echo "CHILD $NGINX_PID $DV_WORK"; false_command_that_does_not_exist; exit 3' _ "$lib" 2>&1)
rc=$?
read -r _ cpid cwork < <(grep '^CHILD ' <<<"$out")
assert_eq "$rc" 3 "a test that dies keeps its exit status"
case "$out" in
*"not ok - "*"ended early"*) pass "dying before summary is reported as not ok" ;;
*) fail "dying before summary is reported as not ok" "$out" ;;
esac
if [ -n "${cpid:-}" ] && ! kill -0 "$cpid" 2>/dev/null; then pass "cleanup stopped the child's nginx"; else fail "cleanup stopped the child's nginx" "$out"; fi
if [ -n "${cwork:-}" ] && [ ! -e "$cwork" ]; then pass "cleanup removed the child's work dir"; else fail "cleanup removed the child's work dir" "$out"; fi

# dv_mount with a daemon that exits at once: fails and shows its log.
fake=$(dv_tmp fake)
# shellcheck disable=SC2016
printf '#!/bin/sh\necho "fake daemon: cannot mount $2" >&2\nexit 2\n' >"$fake/exits"
printf '#!/bin/sh\necho $$ >"%s/pid"\nexec sleep 300\n' "$fake" >"$fake/hangs"
chmod +x "$fake/exits" "$fake/hangs"
out=$(DATAVOFS="$fake/exits" bash -c '. "$1"; dv_mount http://127.0.0.1:1 "$(dv_tmp mnt)" ttl=1; echo "RC $?"; summary' _ "$lib" 2>&1)
case "$out" in
*"not ok - dv_mount"*"status 2"*"fake daemon: cannot mount"*"RC 1"*) pass "dv_mount reports a daemon that exits, with its log" ;;
*) fail "dv_mount reports a daemon that exits, with its log" "$out" ;;
esac
# ... and one that never mounts: fails after DV_MOUNT_TIMEOUT and is stopped.
out=$(DATAVOFS="$fake/hangs" DV_MOUNT_TIMEOUT=1 bash -c '. "$1"; dv_mount "" "$(dv_tmp mnt)"; echo "RC $?"; summary' _ "$lib" 2>&1)
case "$out" in
*"not ok - dv_mount"*"not mounted after 1 s"*"RC 1"*) pass "dv_mount gives up after DV_MOUNT_TIMEOUT" ;;
*) fail "dv_mount gives up after DV_MOUNT_TIMEOUT" "$out" ;;
esac
hpid=$(cat "$fake/pid" 2>/dev/null)
if [ -n "$hpid" ] && ! kill -0 "$hpid" 2>/dev/null; then pass "a daemon that never mounted is stopped"; else fail "a daemon that never mounted is stopped" "pid ${hpid:-?}"; fi

summary
