#!/usr/bin/env bash
# Pins of revisions that do not exist cost the origin one request per
# manifest TTL: `ls DS@99` five times → one GET of revisions/99.json; a
# revision that exists is fetched once and served (two listings in
# parallel, one GET).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 64 --seed 3
publish demo/train "$src" "$origin" || bail "publish"
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" manifest_ttl=60 || bail "mount"

fails=0
for _ in 1 2 3 4 5; do
	ls "$mnt/demo/train@99" >/dev/null 2>&1 || fails=$((fails + 1))
done
assert_eq "$fails" 5 "ls DS@99 fails five times"
assert_eq "$(nginx_count 'GET /demo/train/revisions/99\.json')" 1 "one GET of revisions/99.json within the TTL"

ls "$mnt/demo/train@1" >"$DV_WORK/a" 2>&1 &
a=$!
ls "$mnt/demo/train@1" >"$DV_WORK/b" 2>&1
wait "$a"
assert_eq "$(cat "$DV_WORK/a" "$DV_WORK/b" | grep -c '^shard-')" 4 "both listings of DS@1 show its 2 shards"
assert_eq "$(nginx_count 'GET /demo/train/revisions/1\.json')" 1 "one GET of revisions/1.json"
dv_umount "$mnt"
assert_eq "${DV_LAST_EXIT:-?}" 0 "the daemon exits 0"
summary
