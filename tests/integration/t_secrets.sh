#!/usr/bin/env bash
# Secrets of the origin URL stay out of the process table: mounted with
# `datavofs http://USER:PASS@HOST/?token=TOKEN MNT` (and with -o origin=),
# the daemon serves, and /proc/PID/cmdline shows the host but neither the
# password nor the token. The daemon is not dumpable while it holds them:
# run as nobody (while it waits on an origin that never answers: a mount
# by nobody needs /dev/fuse opened up), its /proc/PID/environ belongs to
# root, as the kernel does for a non-dumpable process; a plain process of
# nobody's (the control) keeps its own.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 setpriv

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 64 --seed 7
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
pass_word=Pa55w0rdSecret
token=T0kenSecretValue
url="http://reader:$pass_word@127.0.0.1:$NGINX_PORT/?token=$token"

# check_cmdline MNT WHAT: the daemon's argv has the host, not the secrets.
check_cmdline() {
	local pid cmd
	pid=$(dv_pid "$1")
	cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
	echo "# cmdline: $cmd"
	case "$cmd" in
	*"$pass_word"* | *"$token"*) fail "$2: /proc/PID/cmdline holds no secret" "$cmd" ;;
	*"127.0.0.1:$NGINX_PORT"*) pass "$2: /proc/PID/cmdline holds no secret" ;;
	*) fail "$2: /proc/PID/cmdline still names the host" "$cmd" ;;
	esac
}

mnt=$(dv_tmp mnt)
dv_mount "$url" "$mnt" "config=$cfg" || bail "mount with a positional URL"
assert_eq "$(ls "$mnt/demo/train" | wc -l)" 2 "the mount lists the dataset"
cmp -s "$mnt/demo/train/$(ls "$src" | head -1)" "$src/$(ls "$src" | head -1)" &&
	pass "a shard reads right" || fail "a shard reads right"
assert_eq "$(nginx_count "token=$token")" "$(nginx_count 'GET /')" "every origin request carries the token"
check_cmdline "$mnt" "positional origin"

dv_umount "$mnt"

mnt2=$(dv_tmp mnt2)
dv_mount "" "$mnt2" "config=$cfg" "origin=$url" || bail "mount with -o origin="
assert_eq "$(ls "$mnt2/demo/train" | wc -l)" 2 "-o origin=: the mount lists the dataset"
check_cmdline "$mnt2" "-o origin="
dv_umount "$mnt2"
assert_eq "${DV_LAST_EXIT:-?}" 0 "the daemon exits 0"

# --- a config holding a secret that others can read: the daemon warns ------
cfg_secret="$DV_WORK/secret.yaml"
write_config "$cfg_secret" "$DV_WORK/tier" "origin: $url"
chmod 0644 "$cfg_secret"
mnt3=$(dv_tmp mnt3)
dv_mount "" "$mnt3" "config=$cfg_secret" || bail "mount with the origin in the config"
if grep -q "holds a secret (origin credentials) and is readable by everyone (mode 0644)" "$(dv_log "$mnt3")"; then
	pass "a world-readable config with credentials: the daemon warns at load"
else
	fail "a world-readable config with credentials: the daemon warns at load" "$(cat "$(dv_log "$mnt3")")"
fi
if grep -q "$pass_word" "$(dv_log "$mnt3")"; then
	fail "the warning does not show the secret"
else
	pass "the warning does not show the secret"
fi
dv_umount "$mnt3"

# --- not dumpable ------------------------------------------------------------
hang_port_file="$DV_WORK/hang.port"
python3 - "$hang_port_file" <<-'PY' &
	import socket, sys, time
	s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
	open(sys.argv[1], "w").write(str(s.getsockname()[1]))
	held = []
	end = time.time() + 60
	while time.time() < end:
	    c, _ = s.accept()
	    held.append(c)  # never answered
PY
hang=$!
dv_track "$hang" hang-origin
for _ in $(seq 50); do [ -s "$hang_port_file" ] && break; sleep 0.1; done
nb=$(dv_tmp nobody)
mkdir "$nb/mnt"
chmod 0777 "$nb" "$nb/mnt"
chmod 0644 "$cfg"
setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$nb" DATAVO_SHARD_CACHE_DIR="$nb/cache" \
	"$DATAVOFS" "http://u:$pass_word@127.0.0.1:$(cat "$hang_port_file")/?token=$token" "$nb/mnt" -f \
	-o "state_dir=$nb/state" >"$DV_WORK/nobody.log" 2>&1 &
nbpid=$!
dv_track "$nbpid" datavofs-nobody
setpriv --reuid 65534 --regid 65534 --clear-groups sleep 30 &
ctl=$!
dv_track "$ctl" control
sleep 1
assert_eq "$(awk '/^Uid:/ { print $2 }' "/proc/$nbpid/status")" 65534 "the daemon runs as nobody"
assert_eq "$(stat -c %U "/proc/$nbpid/environ")" root \
	"the daemon is not dumpable: its /proc/PID/environ belongs to root"
assert_eq "$(stat -c %U "/proc/$ctl/environ")" nobody "control: a plain process of nobody's owns its environ"
cmd=$(tr '\0' ' ' <"/proc/$nbpid/cmdline")
case "$cmd" in
*"$pass_word"* | *"$token"*) fail "as nobody too, /proc/PID/cmdline holds no secret" "$cmd" ;;
*127.0.0.1:*) pass "as nobody too, /proc/PID/cmdline holds no secret" ;;
*) fail "as nobody too, /proc/PID/cmdline still names the host" "$cmd" "$(cat "$DV_WORK/nobody.log")" ;;
esac
dv_stop_pid "$nbpid" 5
dv_stop_pid "$ctl" 2
dv_stop_pid "$hang" 2
summary
