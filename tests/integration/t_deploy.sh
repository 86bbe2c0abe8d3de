#!/usr/bin/env bash
# `systemd-analyze verify` accepts the unit of
# scripts/deploy/; the Kubernetes files parse as YAML and have the shape the
# README promises (privileged daemon, /dev/fuse, Bidirectional hostPath
# /mnt/datavo; a pod with HostToContainer); every man page renders with
# `man -l` and `groff -ww` without a warning; `make install` installs the
# binaries, the mount helper and the man pages under DESTDIR.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dv_need groff man systemd-analyze python3 make ldd readelf

deploy="$DV_ROOT/scripts/deploy"
bindir=$(dirname "$(_dv_bin)")

# --- make install ---------------------------------------------------------------
dest=$(dv_tmp dest)
missing=""
# -o all: install what the test runs against, as built (the sanitizer build's
# flags are not known here, and relinking without them would fail).
if out=$(make -C "$DV_ROOT" -s -o all BUILD="$bindir" install DESTDIR="$dest" PREFIX=/usr/local 2>&1); then
	pass "make install DESTDIR=… PREFIX=/usr/local"
else
	bail "make install DESTDIR=… PREFIX=/usr/local" "$out"
fi
for f in usr/local/bin/datavofs usr/local/bin/datavoctl usr/local/share/man/man8/datavofs.8 \
	usr/local/share/man/man8/datavoctl.8 usr/local/share/man/man5/datavo-shards.yaml.5 \
	usr/local/share/man/man5/datavo-origin.5; do
	[ -f "$dest/$f" ] || missing+=" /$f"
done
assert_eq "${missing:-}" "" "make install puts both binaries and the four man pages in place"
assert_eq "$(readlink "$dest/sbin/mount.fuse.datavofs")" /usr/local/bin/datavofs \
	"make install links the mount.fuse.datavofs helper"

# The installed daemon finds its libfuse without the build tree: a private
# libfuse (3.17 on a Debian 12 machine) is linked in, so it names no
# libfuse3.so and no path into the build tree.
inst="$dest/usr/local/bin/datavofs"
assert_eq "$(ldd "$inst" | grep -c 'not found')" 0 "the installed datavofs finds every library it needs"
assert_eq "$(readelf -d "$inst" | grep -cE "R(UN)?PATH.*$DV_ROOT")" 0 "the installed datavofs has no rpath into the build tree"
inst_fuse=$("$inst" --version | sed -n 's/.*(libfuse \([0-9.]*\)).*/\1/p')
sys_fuse=$(pkg-config --modversion fuse3 2>/dev/null || echo none)
if [ "$inst_fuse" != "$sys_fuse" ]; then
	assert_eq "$(readelf -d "$inst" | grep -c 'NEEDED.*libfuse3')" 0 \
		"libfuse $inst_fuse (the system has $sys_fuse) is linked into the installed datavofs"
else
	assert_eq "$(ldd "$inst" | grep -c 'libfuse3.so')" 1 "the installed datavofs loads the system's libfuse $sys_fuse"
fi

# --- man pages ------------------------------------------------------------------
pages=("$DV_ROOT"/man/*.[0-9])
assert_eq "${#pages[@]}" 4 "four man pages"
for m in "${pages[@]}"; do
	n=$(basename "$m")
	warn=$(groff -ww -man -Tutf8 -z "$m" 2>&1)
	assert_eq "$warn" "" "groff -ww -man renders $n without a warning"
	out=$(MANWIDTH=80 man -l "$m" 2>&1 >"$DV_WORK/$n.txt")
	if [ -z "$out" ] && grep -q "^NAME" "$DV_WORK/$n.txt" && [ "$(wc -l <"$DV_WORK/$n.txt")" -gt 20 ]; then
		pass "man -l $n renders without a warning"
	else
		fail "man -l $n renders without a warning" "$out"
	fi
done
# Every option of datavofs --help and every config key is in the man pages.
missing=""
for o in $("$(_dv_bin)" --help | grep -oE -- '-o [a-z_]+' | cut -c4-); do
	grep -q "$o" "$DV_WORK/datavofs.8.txt" || missing+=" $o"
done
for k in tiers origin verify fuse_io_uring manifest_ttl metrics dollars_per_gb state_dir http connect_timeout \
	low_speed_time low_speed_limit retries ca_file ca_path root name type max_bytes path devices \
	chunk_bytes format bucket region project container_url sas_token managed_identity_client_id \
	prefix endpoint; do
	grep -qw "$k" "$DV_WORK/datavo-shards.yaml.5.txt" || missing+=" $k"
done
for c in publish status inspect preload verify bench; do
	grep -q "^   $c" "$DV_WORK/datavoctl.8.txt" || missing+=" $c"
done
assert_eq "$missing" "" "the man pages cover every option, config key and subcommand"

# --- systemd --------------------------------------------------------------------
# The unit as installed: its binary is the one under DESTDIR, its
# Documentation= pages are found through MANPATH.
unit=$(dv_tmp unit)
sed "s#/usr/local/bin/#$dest/usr/local/bin/#g" "$deploy/datavofs.service" >"$unit/datavofs.service"
out=$(MANPATH="$dest/usr/local/share/man" systemd-analyze verify "$unit/datavofs.service" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ -z "$out" ]; then
	pass "systemd-analyze verify accepts datavofs.service"
else
	fail "systemd-analyze verify accepts datavofs.service" "rc=$rc" "$out"
fi
# The check is not a rubber stamp: a broken unit is refused.
printf '[Service]\nExecStart=/nonexistent/datavofs\nBogusKey=1\n' >"$unit/broken.service"
out=$(systemd-analyze verify "$unit/broken.service" 2>&1)
[ -n "$out" ] && pass "systemd-analyze verify complains about a broken unit" ||
	fail "systemd-analyze verify complains about a broken unit"
grep -q '^ExecStart=/usr/local/bin/datavofs /mnt/datavo -f ' "$deploy/datavofs.service" &&
	pass "the unit runs the daemon in the foreground on /mnt/datavo" ||
	fail "the unit runs the daemon in the foreground on /mnt/datavo"

# --- Kubernetes -----------------------------------------------------------------
py=python3
$py -c 'import yaml' 2>/dev/null || py=/usr/bin/python3
if out=$($py - "$deploy/datavofs-daemonset.yaml" "$deploy/datavofs-example-pod.yaml" 2>&1 <<-'PY'
	import sys, yaml
	ds = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[1]))}
	pod = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[2]))}
	spec = ds["DaemonSet"]["spec"]["template"]["spec"]
	c = spec["containers"][0]
	assert c["securityContext"]["privileged"] is True, "privileged"
	vols = {v["name"]: v for v in spec["volumes"]}
	mounts = {m["name"]: m for m in c["volumeMounts"]}
	assert vols["fuse"]["hostPath"]["path"] == "/dev/fuse", "/dev/fuse"
	assert vols["mnt"]["hostPath"]["path"] == "/mnt/datavo", "hostPath /mnt/datavo"
	assert mounts["mnt"]["mountPropagation"] == "Bidirectional", "Bidirectional"
	assert "/mnt/datavo" in c["args"] and "-f" in c["args"], "args"
	cfg = yaml.safe_load(ds["ConfigMap"]["data"]["shards.yaml"])
	assert cfg["tiers"][0]["path"], "a folder tier in the ConfigMap"
	p = pod["Pod"]["spec"]
	pm = p["containers"][0]["volumeMounts"][0]
	assert pm["mountPropagation"] == "HostToContainer", "HostToContainer"
	assert p["volumes"][0]["hostPath"]["path"] == "/mnt/datavo", "pod hostPath"
	print("ok")
	PY
); then
	pass "the Kubernetes files parse as YAML: privileged DaemonSet, /dev/fuse, Bidirectional /mnt/datavo, HostToContainer pod"
else
	fail "the Kubernetes files parse as YAML with the promised shape" "$out"
fi
# The ConfigMap's shards.yaml is a config the daemon accepts.
$py -c 'import sys, yaml
d = [x for x in yaml.safe_load_all(open(sys.argv[1])) if x["kind"] == "ConfigMap"][0]
open(sys.argv[2], "w").write(d["data"]["shards.yaml"])' "$deploy/datavofs-daemonset.yaml" "$DV_WORK/k8s.yaml"
if out=$("$(dirname "$(_dv_bin)")/datavoctl" inspect -c "$DV_WORK/k8s.yaml" 2>&1); then
	pass "the ConfigMap's shards.yaml is a valid config"
else
	fail "the ConfigMap's shards.yaml is a valid config" "$out"
fi
summary
