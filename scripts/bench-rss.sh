#!/usr/bin/env bash
# Memory benchmark: the daemon's RSS with 100,000 shards.
#
#   scripts/bench-rss.sh [SHARDS] [DATASETS]     default 100000 across 100
#
# Writes an origin directly (Python: datasets.json and one manifest per
# dataset, every shard with its own content hash; a few real tiny tars so
# that reads work), mounts it (file:// origin, DATAVOFS default
# build/datavofs), and prints VmRSS and VmHWM of the daemon: after the
# mount, after every directory was listed, after every shard was stat'ed
# (each one a kernel inode the daemon answered for), after a few reads.
# Target: at most 64 MiB + 300 bytes per shard. Exits 1 above it.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tests/integration/lib.sh"
dv_need python3

shards=${1:-100000}
datasets=${2:-100}
origin=$(dv_tmp origin)
python3 - "$origin" "$shards" "$datasets" <<-'PY'
	import hashlib, io, json, os, sys, tarfile
	origin, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
	os.makedirs(os.path.join(origin, "shards"), exist_ok=True)
	names, per = [], (n + d - 1) // d
	k = 0
	for ds in range(d):
	    name = "bench/ds%03d" % ds
	    names.append(name)
	    shards = []
	    for i in range(min(per, n - k)):
	        if k < 8:  # a few real shards, for reads
	            buf = io.BytesIO()
	            with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
	                data = (b"sample %d\n" % k) * 100
	                ti = tarfile.TarInfo("s%06d.txt" % k)
	                ti.size = len(data)
	                tf.addfile(ti, io.BytesIO(data))
	            body = buf.getvalue()
	        else:
	            body = b"%d" % k
	        h = hashlib.blake2b(b"bench %d" % k, digest_size=16).hexdigest()
	        if k < 8:
	            open(os.path.join(origin, "shards", h + ".tar"), "wb").write(body)
	        shards.append({"name": "shard-%06d.tar" % i, "index": i, "content_hash": h,
	                       "size": len(body), "sha256": hashlib.sha256(body).hexdigest()})
	        k += 1
	    os.makedirs(os.path.join(origin, name, "revisions"), exist_ok=True)
	    doc = json.dumps({"format": "datavo-manifest/1", "dataset": name, "revision": 1,
	                      "manifest_ref": "bench", "keys": ["txt"], "shards": shards})
	    open(os.path.join(origin, name, "manifest.json"), "w").write(doc)
	    open(os.path.join(origin, name, "revisions", "1.json"), "w").write(doc)
	json.dump({"datasets": names}, open(os.path.join(origin, "datasets.json"), "w"))
	print("# origin: %d shards in %d manifests" % (k, d))
PY
cfg="$DV_WORK/shards.yaml"
printf 'tiers:\n  - name: local\n    path: %s\n' "$DV_WORK/tier" >"$cfg"
mnt=$(dv_tmp mnt)
DV_MOUNT_TIMEOUT=120 dv_mount "$origin" "$mnt" "config=$cfg" || bail "mount"
pid=$(dv_pid "$mnt")
rss() { awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } END { printf "%.1f MiB (peak %.1f MiB)", r / 1024, h / 1024 }' "/proc/$pid/status"; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"; }
echo "rss after mount:                $(rss)"
t0=$(date +%s.%N)
ls -R "$mnt" >/dev/null
echo "rss after listing every dir:    $(rss)"
n=$(find "$mnt/bench" -type f | wc -l)
find "$mnt/bench" -type f -print0 | xargs -0 stat -c %s >/dev/null
echo "rss after stat of $n shards: $(rss) ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
for i in 0 1 2 3 4 5 6 7; do cat "$mnt/bench/ds000/$(printf 'shard-%06d.tar' "$i")" >/dev/null; done
kb=$(rss_kb)
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
echo "rss after 8 reads:              $(rss)"
target_kb=$(((64 * 1024 * 1024 + 300 * shards) / 1024))
per=$(awk -v k="$kb" -v n="$shards" 'BEGIN { printf "%.0f", k * 1024 / n }')
echo "RSS with $shards shards: $((kb / 1024)) MiB ($per bytes per shard all included); target $((target_kb / 1024)) MiB (64 MiB + 300 B/shard)"
assert_eq "$n" "$shards" "every shard is listed"
if [ "$hwm" -le "$target_kb" ]; then
	pass "peak RSS $((hwm / 1024)) MiB <= target $((target_kb / 1024)) MiB"
else
	fail "peak RSS $((hwm / 1024)) MiB <= target $((target_kb / 1024)) MiB"
fi
dv_umount "$mnt"
summary
