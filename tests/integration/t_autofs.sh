#!/usr/bin/env bash
# the autofs map of scripts/deploy/ works with
# Debian's automount. Inside a private mount namespace (the machine's
# automounter, /etc and /run are never touched) automount -f serves the
# map, with its paths pointed into the work dir: the first access to a key
# mounts its origin through mount.fuse3 (an HTTP origin with escaped colons
# and a directory origin), shards read with the right bytes, and an idle
# mount expires and its daemon exits.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 unshare automount setsid findmnt

grep -qw autofs /proc/filesystems || modprobe autofs4 2>/dev/null
grep -qw autofs /proc/filesystems || { skip "autofs map" "the kernel has no autofs"; summary; exit 0; }

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 3 --kb 100 --seed 41
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier" "state_dir: $DV_WORK/state"
auto="$DV_WORK/auto"
mkdir -p "$auto"

# The repo's map and master entry, with the machine's paths replaced.
esc_url=$(sed 's/:/\\\\:/g' <<<"$NGINX_URL")
sed -e "s#:https\\\\://origin.example/datavo#:$esc_url#" -e "s#:/srv/datavo/origin#:$origin#" \
	-e "s#config=/etc/datavo/shards.yaml#config=$cfg#" "$DV_ROOT/scripts/deploy/auto.datavo" >"$DV_WORK/auto.datavo"
sed -e "s#^/datavo /etc/auto.datavo --timeout=600#$auto file:$DV_WORK/auto.datavo --timeout=3#" \
	"$DV_ROOT/scripts/deploy/datavo.autofs" >"$DV_WORK/auto.master"
grep -v '^#' "$DV_WORK/auto.master" "$DV_WORK/auto.datavo" | sed 's/^/# /'
grep -q "^$auto " "$DV_WORK/auto.master" && grep -q "^public .*:$esc_url" "$DV_WORK/auto.datavo" ||
	bail "the map of scripts/deploy/ has the expected shape"

sbin=$(dv_tmp sbin)
ln -s "$(_dv_bin)" "$sbin/datavofs"
want=$(sha256sum <"$src/shard-000002.tar")
out=$(timeout 90 unshare -m --propagation private bash -c '
	auto=$1 w=$2
	mount --bind "$3" /usr/local/sbin
	mount -t tmpfs tmpfs /run
	setsid automount -f -d -p "$w/automount.pid" "$w/auto.master" >"$w/automount.log" 2>&1 &
	ap=$!
	for i in $(seq 50); do findmnt -n "$auto" >/dev/null && break; sleep 0.1; done
	echo "local: $(ls "$auto/local/demo/train" | tr "\n" " ")"
	echo "local sha: $(sha256sum <"$auto/local/demo/train/shard-000002.tar")"
	echo "public sha: $(sha256sum <"$auto/public/demo/train/shard-000002.tar")"
	findmnt -rn -o TARGET,FSTYPE -R "$auto" | sed "s#^$auto#AUTO#" | sed "s/^/mount: /"
	echo "daemons: $(pgrep -xc datavofs)"
	# Polled in mountinfo: looking the path up would count as a use.
	mounted() { grep -q " $auto/local fuse" /proc/self/mountinfo; }
	for i in $(seq 150); do mounted || break; sleep 0.1; done
	mounted && echo "local after idle: mounted" || echo "local after idle: expired"
	kill -TERM $ap
	for i in $(seq 100); do kill -0 $ap 2>/dev/null || break; sleep 0.1; done
	kill -0 $ap 2>/dev/null && { echo "automount still running"; kill -KILL $ap; }
	for m in $(findmnt -rn -o TARGET -R "$auto" | sort -r); do umount -l "$m"; done
	findmnt -n "$auto" >/dev/null && echo "autofs after stop: mounted" || echo "autofs after stop: gone"
' _ "$auto" "$DV_WORK" "$sbin" 2>&1)
echo "$out" | sed 's/^/# /'
grep -q "^local: shard-000000.tar shard-000001.tar shard-000002.tar" <<<"$out" &&
	pass "the first access to a key mounts its origin (directory origin)" ||
	fail "the first access to a key mounts its origin (directory origin)" "$(tail -20 "$DV_WORK/automount.log")"
grep -q "^local sha: $want" <<<"$out" && pass "a shard reads with the right bytes through autofs" ||
	fail "a shard reads with the right bytes through autofs"
grep -q "^public sha: $want" <<<"$out" && pass "an HTTP origin with escaped colons mounts and reads" ||
	fail "an HTTP origin with escaped colons mounts and reads" "$(tail -20 "$DV_WORK/automount.log")"
grep -q "^mount: AUTO/local fuse.datavofs" <<<"$out" && grep -q "^mount: AUTO/public fuse.datavofs" <<<"$out" &&
	pass "both keys are fuse.datavofs mounts" || fail "both keys are fuse.datavofs mounts"
grep -q "^local after idle: expired" <<<"$out" && pass "an idle mount expires" || fail "an idle mount expires"
grep -q "^autofs after stop: gone" <<<"$out" && pass "stopping automount removes its mounts" ||
	fail "stopping automount removes its mounts"
[ "$(nginx_count 'GET /datasets.json')" -ge 1 ] && pass "the HTTP key's daemon read its origin over HTTP" ||
	fail "the HTTP key's daemon read its origin over HTTP"
# The daemons mount.fuse3 started exit with their mounts.
for i in $(seq 50); do
	pgrep -f "datavofs .*$DV_WORK" >/dev/null || break
	sleep 0.1
done
pgrep -f "datavofs .*$DV_WORK" >/dev/null && fail "no datavofs daemon of this test is left" ||
	pass "no datavofs daemon of this test is left"
summary
