# shellcheck shell=bash
# tests/integration/fixtures.sh: datasets, origins and configs for the mount
# tests. Source it after lib.sh.
#
#   mktars DIR N [--kb KB] [--seed S]     N tar shards of samples in DIR
#   publish DATASET SRC ORIGIN [ARGS…]    datavoctl publish (no chunk lists)
#   publish_chunked DATASET SRC ORIGIN [ARGS…]  the same, with chunk lists
#   write_config FILE TIERDIR [YAML…]     a shards.yaml with one folder tier
#   shard_field ORIGIN DATASET SHARD KEY  a field of a shard in the manifest
#   read_errno FILE                       reads FILE whole; prints 0 or the errno name

DATAVOCTL=${DATAVOCTL:-$DV_ROOT/build/datavoctl}
case "$DATAVOCTL" in /*) ;; *) DATAVOCTL="$DV_ROOT/$DATAVOCTL" ;; esac

mktars() {
	python3 "$DV_ROOT/tests/integration/mktars.py" "$@"
}

# The tests that count whole-shard GETs publish without chunk lists, so
# their shards take the whole-fill path of an old manifest; the streaming
# tests (t_cold_*.sh) use publish_chunked. DV_PUBLISH_OPTS overrides.
publish() {
	local dataset=$1 src=$2 origin=$3
	shift 3
	# shellcheck disable=SC2086 # options, split on purpose
	"$DATAVOCTL" publish --dataset "$dataset" ${DV_PUBLISH_OPTS---no-chunks} "$@" "$src" "$origin" >/dev/null
}

# publish_chunked DATASET SRC ORIGIN [ARGS…]: with chunk lists (default
# 4 MiB chunks; pass --chunk-size SIZE for others).
publish_chunked() {
	DV_PUBLISH_OPTS="" publish "$@"
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
