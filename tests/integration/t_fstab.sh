#!/usr/bin/env bash
# an fstab line of type fuse.datavofs mounts with
# `mount MOUNTPOINT`, through mount.fuse3, inside a private mount namespace
# (so the machine's own /etc/fstab is never touched), options honoured.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 unshare mount findmnt

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 100 --seed 8
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
fstab="$DV_WORK/fstab"
echo "$NGINX_URL $mnt fuse.datavofs ro,allow_other,_netdev,config=$cfg,manifest_ttl=5,state_dir=$DV_WORK/state 0 0" >"$fstab"
bindir=$(dirname "$(_dv_bin)")
want=$(sha256sum <"$src/shard-000001.tar")

# mount(8) runs mount.fuse3, which runs `datavofs` from mount's own PATH
# (not ours) and daemonizes: inside the namespace a directory holding a
# link to the binary under test covers /usr/local/sbin, as an install would.
sbin=$(dv_tmp sbin)
ln -s "$bindir/datavofs" "$sbin/datavofs"
out=$(HOME="$DV_WORK/home" unshare -m --propagation private bash -c '
	set -e
	mount --bind "$1" /etc/fstab
	mount --bind "$3" /usr/local/sbin
	mount "$2"
	findmnt -no FSTYPE,OPTIONS "$2"
	sha256sum <"$2/demo/train/shard-000001.tar"
	ls "$2/demo/train" | wc -l
	daemon() { for p in $(pgrep -x datavofs); do tr "\0" " " </proc/$p/cmdline | grep -qF " $1 " && echo $p; done; return 0; }
	pid=$(daemon "$2")
	echo "daemon pid ${pid:-none}"
	umount "$2"
	for i in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	kill -0 $pid 2>/dev/null && echo "daemon still running" || echo "daemon gone"
' _ "$fstab" "$mnt" "$sbin" 2>&1)
echo "$out" | sed 's/^/# /'
case "$out" in *fuse.datavofs*) pass "mount MOUNTPOINT mounts a fuse.datavofs line" ;; *) fail "mount MOUNTPOINT mounts a fuse.datavofs line" ;; esac
case "$out" in *allow_other*) pass "allow_other is honoured" ;; *) fail "allow_other is honoured" ;; esac
case "$(echo "$out" | sed -n 1p)" in *" ro"*|*"ro,"*) pass "the mount is read-only" ;; *) fail "the mount is read-only" ;; esac
case "$out" in *"$want"*) pass "a shard reads with the right bytes through the fstab mount" ;; *) fail "a shard reads through the fstab mount" ;; esac
case "$out" in *"daemon pid "[0-9]*"daemon gone"*) pass "umount stops the daemon" ;; *) fail "umount stops the daemon" ;; esac
assert_eq "$(find "$DV_WORK/tier" -maxdepth 1 -name '*.tar' | wc -l)" 1 "the config= option was honoured (its tier was filled)"
[ -d "$DV_WORK/state" ] && pass "state_dir= was honoured" || fail "state_dir= was honoured"
summary
