#!/usr/bin/env bash
# The first command of datavofs (README): on a fresh machine, installs what
# is missing, builds, publishes a small demo dataset to a local origin,
# mounts it, reads a shard with Python's tarfile, shows `datavoctl status`,
# and says how to unmount. No server and no config file are needed: the
# origin is a directory and the cache is the built-in default tier.
#
# usage: scripts/demo.sh [--unmount] [--no-setup]
#   --unmount   unmount at the end (CI runs it so)
#   --no-setup  do not run scripts/setup.sh
# DATAVO_DEMO_DIR (default ${TMPDIR:-/tmp}/datavo-demo) holds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

unmount_at_end=0
setup=1
for a in "$@"; do
	case "$a" in
	--unmount) unmount_at_end=1 ;;
	--no-setup) setup=0 ;;
	-h | --help)
		sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "demo: unknown argument '$a' (see --help)" >&2
		exit 2
		;;
	esac
done

if [ -t 1 ]; then
	say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
else
	say() { printf '\n==> %s\n' "$*"; }
fi

demo=${DATAVO_DEMO_DIR:-${TMPDIR:-/tmp}/datavo-demo}
mnt="$demo/mnt"

if [ "$setup" = 1 ]; then
	say "installing what is missing (scripts/setup.sh)"
	scripts/setup.sh
fi

say "building (make)"
make -s -j"$(nproc 2>/dev/null || echo 2)"
datavofs="$repo/build/datavofs"
datavoctl="$repo/build/datavoctl"

# A demo that ran before may still be mounted.
if mountpoint -q "$mnt" 2>/dev/null; then
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
	sleep 0.5
fi
# Only what an earlier demo made is removed, never the directory itself.
rm -rf "$demo/src" "$demo/origin" "$demo/cache" "$demo/state"
mkdir -p "$demo/src" "$mnt"

say "making a demo dataset: 4 tar shards of audio-like samples in $demo/src"
python3 - "$demo/src" <<'PY'
import io, json, random, sys, tarfile
out = sys.argv[1]
rng = random.Random(7)
for i in range(4):
    with tarfile.open("%s/shard-%06d.tar" % (out, i), "w", format=tarfile.USTAR_FORMAT) as tf:
        for k in range(16):
            sid = "sample-%02d%03d" % (i, k)
            for name, data in ((sid + ".wav", rng.randbytes(16384)),
                               (sid + ".json", json.dumps({"id": sid, "label": k % 5}).encode())):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime = len(data), 1700000000
                tf.addfile(ti, io.BytesIO(data))
PY
ls -l "$demo/src"

say "publishing it to a local origin: datavoctl publish --dataset demo/train"
"$datavoctl" publish --dataset demo/train --keys wav,json "$demo/src" "$demo/origin"
find "$demo/origin" -maxdepth 3 -name '*.json' | sort

say "mounting: datavofs $demo/origin $mnt"
# The built-in default config (no /etc/datavo/shards.yaml needed): one
# folder tier, here inside the demo directory.
export DATAVO_SHARD_CACHE_DIR="$demo/cache"
"$datavofs" "$demo/origin" "$mnt" -o "state_dir=$demo/state,metrics=127.0.0.1:0"
for _ in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
mountpoint -q "$mnt" || { echo "demo: the mount did not appear" >&2; exit 1; }
ls -l "$mnt/demo/train"

say "reading a shard with Python's tarfile (the first read fetches it into the cache)"
python3 - "$mnt/demo/train/shard-000001.tar" "$demo/src/shard-000001.tar" <<'PY'
import hashlib, sys, tarfile
with tarfile.open(sys.argv[1]) as tf:
    names = tf.getnames()
    first = tf.extractfile(names[1]).read().decode()
print("%d members: %s, %s, ..." % (len(names), names[0], names[1]))
print("%s holds %s" % (names[1], first))
same = hashlib.sha256(open(sys.argv[1], "rb").read()).digest() == \
       hashlib.sha256(open(sys.argv[2], "rb").read()).digest()
print("bytes identical to the published shard:", same)
sys.exit(0 if same else 1)
PY
cat "$mnt"/demo/train/*.tar >/dev/null # one epoch: the rest of the shards
cat "$mnt"/demo/train/*.tar >/dev/null # a second epoch: all hits

say "datavoctl status $mnt"
"$datavoctl" status "$mnt"

if [ "$unmount_at_end" = 1 ]; then
	say "unmounting: fusermount3 -u $mnt"
	fusermount3 -u "$mnt"
	echo "demo: done"
else
	cat <<-EOF

		The demo is mounted on $mnt (cache in $demo/cache).
		  ls $mnt/demo/train
		  $datavoctl status $mnt
		  $datavoctl inspect
		To unmount:
		  fusermount3 -u $mnt
	EOF
fi
