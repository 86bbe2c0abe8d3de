# shellcheck shell=bash
# tests/integration/fixtures.sh: datasets, origins and configs for the mount
# tests. Source it after lib.sh.
#
#   mktars DIR N [--kb KB] [--seed S]     N tar shards of samples in DIR
#   publish DATASET SRC ORIGIN [ARGS…]    datavoctl publish
#   write_config FILE TIERDIR [YAML…]     a shards.yaml with one folder tier
#   shard_field ORIGIN DATASET SHARD KEY  a field of a shard in the manifest
#   read_errno FILE                       reads FILE whole; prints 0 or the errno name

DATAVOCTL=${DATAVOCTL:-$DV_ROOT/build/datavoctl}
case "$DATAVOCTL" in /*) ;; *) DATAVOCTL="$DV_ROOT/$DATAVOCTL" ;; esac

mktars() {
	python3 "$DV_ROOT/tests/integration/mktars.py" "$@"
}

publish() {
	local dataset=$1 src=$2 origin=$3
	shift 3
	"$DATAVOCTL" publish --dataset "$dataset" "$@" "$src" "$origin" >/dev/null
}

# write_config FILE TIERDIR [YAML LINE…]: short timeouts so that a dead
# origin fails a read in seconds.
write_config() {
	local file=$1 tier=$2 line
	shift 2
	{
		echo "tiers:"
		echo "  - name: local"
		echo "    path: $tier"
		echo "http:"
		echo "  connect_timeout: 2"
		echo "  low_speed_time: 3"
		echo "  retries: 1"
		for line in "$@"; do echo "$line"; done
	} >"$file"
}

shard_field() {
	python3 - "$@" <<-'PY'
		import json, sys
		origin, dataset, shard, key = sys.argv[1:5]
		m = json.load(open("%s/%s/manifest.json" % (origin, dataset)))
		print(next(s[key] for s in m["shards"] if s["name"] == shard))
	PY
}

read_errno() {
	python3 - "$1" <<-'PY'
		import errno, sys
		try:
		    with open(sys.argv[1], "rb") as f:
		        while f.read(1 << 20):
		            pass
		    print(0)
		except OSError as e:
		    print(errno.errorcode.get(e.errno, e.errno))
	PY
}
