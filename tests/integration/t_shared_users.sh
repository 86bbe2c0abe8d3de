#!/usr/bin/env bash
# Two users' daemons share one tier directory (shards.yaml `mode: 0770`
# and `group`): user B's daemon serves a shard that user A's daemon filled,
# with no second origin GET (counted in nginx's access log). Both daemons
# run under umask 077: the tier's mode and group win over it for the tier,
# and what is not the tier (each daemon's manifest cache) stays private.
# Needs root to make the users and the group; /dev/fuse is made 0666 for
# the test (as Debian ships it) and given its old mode back after.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum setpriv useradd groupadd fusermount3

[ "$(id -u)" = 0 ] || { skip "shared tier of two users" "making users needs root"; summary; exit 0; }

group=dvshare
users=(dvshare_a dvshare_b)
made=()
getent group "$group" >/dev/null || { groupadd --system "$group" && made+=("group:$group"); } || bail "groupadd $group"
for u in "${users[@]}"; do
	if ! id "$u" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin "$u" || bail "useradd $u"
		made+=("user:$u")
	fi
	usermod -a -G "$group" "$u" || bail "usermod $u"
done
fuse_mode=$(stat -c %a /dev/fuse)
chmod 0666 /dev/fuse
# What this test made goes after the mounts; the lib's cleanup runs first,
# so it is called here, and it exits with the test's status.
undo() {
	local m
	chmod "$fuse_mode" /dev/fuse
	for m in "${made[@]}"; do
		case "$m" in user:*) userdel "${m#user:}" ;; esac
	done
	for m in "${made[@]}"; do
		case "$m" in group:*) groupdel "${m#group:}" ;; esac
	done
}
trap 'rc=$?; trap - EXIT; (exit $rc); (_dv_cleanup); rc=$?; undo; exit $rc' EXIT

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 300 --seed 41
publish shared/users "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"

# The tier's parent belongs to the group; the tier in it is A's to create.
share="$DV_WORK/share"
mkdir -p "$share"
chgrp "$group" "$share"
chmod 2770 "$share"
tier="$share/tier"
bin="$DV_WORK/bin"
mkdir -p "$bin"
for u in "${users[@]}"; do
	home="$DV_WORK/home-$u"
	mkdir -p "$home"
	chown "$u:" "$home"
	chmod 0700 "$home"
	cat >"$home/shards.yaml" <<-YAML
		state_dir: $home/manifests
		tiers:
		  - name: shared
		    path: $tier
		    mode: 0770
		    group: $group
	YAML
	chown "$u:" "$home/shards.yaml"
	# dv_mount runs this as DATAVOFS: the daemon as $u, under umask 077.
	cat >"$bin/datavofs-$u" <<-SH
		#!/bin/sh
		umask 077
		exec setpriv --reuid=$u --regid=$u --init-groups -- "$(_dv_bin)" "\$@"
	SH
	chmod 0755 "$bin/datavofs-$u"
	m="$DV_WORK/mnt-$u"
	mkdir -p "$m"
	chown "$u:" "$m"
done
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups -- "$@"; }
ma="$DV_WORK/mnt-${users[0]}"
mb="$DV_WORK/mnt-${users[1]}"
s=shard-000000.tar
want=$(sha256sum "$src/$s" | cut -d' ' -f1)

DATAVOFS="$bin/datavofs-${users[0]}" dv_mount "$NGINX_URL" "$ma" "config=$DV_WORK/home-${users[0]}/shards.yaml" || bail "mount as ${users[0]}"
DATAVOFS="$bin/datavofs-${users[1]}" dv_mount "$NGINX_URL" "$mb" "config=$DV_WORK/home-${users[1]}/shards.yaml" || bail "mount as ${users[1]}"
assert_eq "$(stat -c %U "/proc/$(dv_pid "$ma")")" "${users[0]}" "daemon A runs as ${users[0]}"
assert_eq "$(stat -c %U "/proc/$(dv_pid "$mb")")" "${users[1]}" "daemon B runs as ${users[1]}"

assert_eq "$(as "${users[0]}" sha256sum "$ma/shared/users/$s" | cut -d' ' -f1)" "$want" "A reads the shard (its daemon fills the tier)"
assert_eq "$(nginx_count "GET /shards/")" 1 "A's fill: one origin GET"
h=$(shard_field "$origin" shared/users "$s" content_hash)
assert_eq "$(stat -c '%a %U %G' "$tier")" "2770 ${users[0]} $group" "the tier directory: 2770, A's, the shared group"
for d in .staging .locks .unsynced; do
	assert_eq "$(stat -c '%a %G' "$tier/$d")" "2770 $group" "$d: 2770, the shared group"
done
assert_eq "$(stat -c '%a %U %G' "$tier/$h.tar")" "660 ${users[0]} $group" "the shard: 0660, A's, the shared group"

assert_eq "$(as "${users[1]}" sha256sum "$mb/shared/users/$s" | cut -d' ' -f1)" "$want" "B reads the same shard"
assert_eq "$(nginx_count "GET /shards/")" 1 "B's read is a hit in the shared tier: still one origin GET"
if grep -q "Permission denied" "$(dv_log "$mb")"; then
	fail "B's daemon saw no permission error" "$(grep "Permission denied" "$(dv_log "$mb")" | head -3)"
else
	pass "B's daemon saw no permission error"
fi

# B fills the next one; A reads it from the tier.
s1=shard-000001.tar
want1=$(sha256sum "$src/$s1" | cut -d' ' -f1)
assert_eq "$(as "${users[1]}" sha256sum "$mb/shared/users/$s1" | cut -d' ' -f1)" "$want1" "B reads a second shard (B fills it)"
assert_eq "$(as "${users[0]}" sha256sum "$ma/shared/users/$s1" | cut -d' ' -f1)" "$want1" "A reads it"
assert_eq "$(nginx_count "GET /shards/")" 2 "two shards, two origin GETs in all"
h1=$(shard_field "$origin" shared/users "$s1" content_hash)
assert_eq "$(stat -c '%a %U %G' "$tier/$h1.tar")" "660 ${users[1]} $group" "B's shard: 0660, B's, the shared group"

# What is not the tier follows the umask: each daemon's manifest cache is private.
mf=$(find "$DV_WORK/home-${users[0]}/manifests" -name manifest.json | head -1)
if [ -n "$mf" ]; then
	assert_eq "$(stat -c %a "$mf")" 600 "A's cached manifest: 0600 (umask 077)"
else
	fail "A's cached manifest exists"
fi

dv_umount "$ma"
dv_umount "$mb"
assert_eq "$(find "$tier/.staging" "$tier/.locks" -type f | wc -l)" 0 "no staging file or lock left behind"

summary
