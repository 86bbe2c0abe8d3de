#!/usr/bin/env bash
# `datavoctl preload --node 0 --nodes 2` and
# `--node 1 --nodes 2` on two mounts with separate tiers: each fetched
# exactly its half (nginx's log: the shards whose manifest index is even,
# then odd, each once), together all shards. Also: the index xattr, a shard
# file as PATH, a progress bar on a terminal, exit 1 when a shard fails,
# and bad arguments.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 getfattr script

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 10 --kb 200 --seed 21
publish demo/train "$src" "$origin" || bail "publish"
extra=$(dv_tmp extra)
mktars "$extra" 3 --kb 100 --seed 22
publish demo/extra "$extra" "$origin" || bail "publish extra"
broken=$(dv_tmp broken)
mktars "$broken" 2 --kb 100 --seed 23
publish other/broken "$broken" "$origin" || bail "publish broken"
nginx_start "$origin" || bail "nginx"

# Two "nodes": two mounts, each with its own tier and manifest cache.
for n in 0 1; do
	write_config "$DV_WORK/node$n.yaml" "$DV_WORK/tier$n" "state_dir: $DV_WORK/state$n"
done
mnt0=$(dv_tmp mnt0)
mnt1=$(dv_tmp mnt1)
dv_mount "$NGINX_URL" "$mnt0" "config=$DV_WORK/node0.yaml" || bail "mount node 0"
dv_mount "$NGINX_URL" "$mnt1" "config=$DV_WORK/node1.yaml" || bail "mount node 1"

hashes() { # PARITY: the content hashes of demo/train with even (0) or odd (1) index
	python3 - "$origin/demo/train/manifest.json" "$1" <<-'PY'
		import json, sys
		m = json.load(open(sys.argv[1]))
		for s in m["shards"]:
		    if s["index"] % 2 == int(sys.argv[2]):
		        print(s["content_hash"])
	PY
}
fetched() { # the shard hashes nginx served, sorted, with their counts
	cut -d'"' -f2 "$NGINX_LOG" | sed -n 's#^GET /shards/\([0-9a-f]*\)\.tar.*#\1#p' | sort | uniq -c |
		awk '{ print $2 " " $1 }'
}
even=$(hashes 0 | sort)
odd=$(hashes 1 | sort)

assert_eq "$(getfattr --only-values -n user.datavo.index "$mnt0/demo/train/shard-000007.tar" 2>/dev/null)" 7 \
	"xattr user.datavo.index gives the manifest's index"

# --- node 0 of 2 --------------------------------------------------------------
out=$("$DATAVOCTL" preload --node 0 --nodes 2 -j 3 "$mnt0/demo/train" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
assert_eq "$rc" 0 "preload --node 0 --nodes 2 exits 0"
assert_eq "$(fetched)" "$(echo "$even" | sed 's/$/ 1/')" "node 0 fetched exactly the even-index shards, each once"
assert_eq "$(ls "$DV_WORK/tier0" | sed 's/\.tar$//' | sort)" "$even" "node 0's tier holds exactly its half"
echo "$out" | grep -q "node 0 of 2: 5 of 10 shards" && pass "node 0 says it takes 5 of 10 shards" ||
	fail "node 0 says it takes 5 of 10 shards"

# --- node 1 of 2 --------------------------------------------------------------
"$DATAVOCTL" preload --node 1 --nodes 2 "$mnt1/demo/train" >/dev/null 2>&1
assert_eq "$?" 0 "preload --node 1 --nodes 2 exits 0"
assert_eq "$(ls "$DV_WORK/tier1" | sed 's/\.tar$//' | sort)" "$odd" "node 1's tier holds exactly the odd half"
assert_eq "$(fetched)" "$(printf '%s\n%s\n' "$even" "$odd" | sort | sed 's/$/ 1/')" \
	"together: every shard fetched exactly once"
assert_eq "$(nginx_count 'GET /shards/')" 10 "ten shard GETs in all"

# --- again: nothing left to fetch; reads are served from the tier -------------
"$DATAVOCTL" preload --node 0 --nodes 2 "$mnt0/demo/train" >/dev/null 2>&1
assert_eq "$(nginx_count 'GET /shards/')" 10 "a second preload fetches nothing"

# --- a shard file as PATH, a whole dataset tree, duplicates -------------------
"$DATAVOCTL" preload "$mnt0/demo/train/shard-000003.tar" "$mnt0/demo/train/shard-000003.tar" >/dev/null 2>&1
assert_eq "$(nginx_count 'GET /shards/')" 11 "a shard file named twice is fetched once"
out=$("$DATAVOCTL" preload -j 2 "$mnt1/demo" 2>&1)
echo "$out" | grep -q "node 0 of 1: 13 of 13 shards" && pass "a parent directory is walked (13 shards)" ||
	fail "a parent directory is walked (13 shards)" "$out"

# --- progress bar on a terminal -----------------------------------------------
script -qec "$DATAVOCTL preload $mnt0/demo/extra" /dev/null >"$DV_WORK/tty.out" 2>&1
if grep -q 'ETA' "$DV_WORK/tty.out" && grep -q '3/3 shards' "$DV_WORK/tty.out" && grep -q '/s' "$DV_WORK/tty.out"; then
	pass "on a terminal: a progress bar with shards, bytes, rate and ETA"
else
	fail "on a terminal: a progress bar with shards, bytes, rate and ETA" "$(cat -v "$DV_WORK/tty.out")"
fi
if grep -q 'ETA' <<<"$out"; then fail "no progress bar when not a terminal"; else pass "no progress bar when not a terminal"; fi

# --- failures -----------------------------------------------------------------
gone=$(shard_field "$origin" other/broken shard-000001.tar content_hash)
mv "$origin/shards/$gone.tar" "$DV_WORK/gone.tar"
out=$("$DATAVOCTL" preload "$mnt1/other/broken" 2>&1)
rc=$?
assert_eq "$rc" 1 "a shard that cannot be fetched: exit 1"
echo "$out" | grep -q "FAILED .*shard-000001.tar" && pass "the failed shard is named" || fail "the failed shard is named" "$out"
mv "$DV_WORK/gone.tar" "$origin/shards/$gone.tar"
"$DATAVOCTL" preload "$DV_WORK/src" >/dev/null 2>&1
assert_eq "$?" 1 "a path outside a datavofs mount: exit 1"
"$DATAVOCTL" preload --node 2 --nodes 2 "$mnt0" >/dev/null 2>&1
assert_eq "$?" 2 "--node 2 --nodes 2: usage error"
"$DATAVOCTL" preload --node 1 "$mnt0" >/dev/null 2>&1
assert_eq "$?" 2 "--node without --nodes: usage error"
dv_umount "$mnt0"
dv_umount "$mnt1"
summary
