#!/usr/bin/env bash
# bad manifests (a ../ name, a non-hex hash, a
# negative size, broken JSON) are refused with a clear log line while the
# other datasets keep working; writes get EROFS; an unknown dataset is ENOENT.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
dv_need python3 sha256sum

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 2 --kb 100 --seed 6
publish demo/train "$src" "$origin" || bail "publish"

# Four broken datasets next to the good one, written by hand.
python3 - "$origin" <<-'PY'
	import json, os, sys
	origin = sys.argv[1]
	good = json.load(open(os.path.join(origin, "demo/train/manifest.json")))
	def shard(**kw):
	    s = dict(good["shards"][0])
	    s.update(kw)
	    return s
	cases = {
	    "bad/dotdot": shard(name="../escape.tar"),
	    "bad/hex": shard(content_hash="XYZ" + good["shards"][0]["content_hash"][3:]),
	    "bad/neg": shard(size=-5),
	}
	for ds, s in cases.items():
	    m = dict(good, dataset=ds, shards=[s])
	    os.makedirs(os.path.join(origin, ds), exist_ok=True)
	    json.dump(m, open(os.path.join(origin, ds, "manifest.json"), "w"))
	os.makedirs(os.path.join(origin, "bad/json"), exist_ok=True)
	open(os.path.join(origin, "bad/json/manifest.json"), "w").write('{"format": "datavo-manifest/1", "shards": [')
	d = json.load(open(os.path.join(origin, "datasets.json")))
	d["datasets"] += list(cases) + ["bad/json"]
	json.dump(d, open(os.path.join(origin, "datasets.json"), "w"))
PY
nginx_start "$origin" || bail "nginx"
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier"
mnt=$(dv_tmp mnt)
dv_mount "$NGINX_URL" "$mnt" "config=$cfg" || bail "mount"
log=$(dv_log "$mnt")

ls "$mnt/bad" >/dev/null 2>&1 # look: lookups may load lazily
for ds in dotdot hex neg json; do
	if [ -n "$(ls "$mnt/bad/$ds" 2>/dev/null)" ]; then
		fail "bad/$ds is refused" "$(ls "$mnt/bad/$ds")"
	else
		pass "bad/$ds is refused"
	fi
	if grep -q "bad/$ds" "$log"; then pass "the log names bad/$ds"; else fail "the log names bad/$ds" "$(cat "$log")"; fi
done
grep -q "'../escape.tar'" "$log" && pass "the log says the name is bad" || fail "the log says the name is bad" "$(cat "$log")"
assert_eq "$(sha256sum <"$mnt/demo/train/shard-000001.tar")" "$(sha256sum <"$src/shard-000001.tar")" \
	"the good dataset keeps working"
[ ! -e "$mnt/escape.tar" ] && [ ! -e "$mnt/bad/escape.tar" ] && pass "nothing escaped" || fail "nothing escaped"

# --- read-only ---------------------------------------------------------------
errno_of() { python3 -c 'import errno, os, sys
try:
    exec(sys.argv[1]); print(0)
except OSError as e:
    print(errno.errorcode[e.errno])' "$1"; }
f="$mnt/demo/train/shard-000000.tar"
assert_eq "$(errno_of "open('$mnt/demo/train/new', 'w')")" EROFS "creating a file: EROFS"
assert_eq "$(errno_of "open('$f', 'r+b')")" EROFS "opening for write: EROFS"
assert_eq "$(errno_of "os.unlink('$f')")" EROFS "rm: EROFS"
assert_eq "$(errno_of "os.mkdir('$mnt/demo/x')")" EROFS "mkdir: EROFS"
assert_eq "$(errno_of "os.utime('$f')")" EROFS "touch: EROFS"
assert_eq "$(errno_of "os.rename('$f', '$f.x')")" EROFS "rename: EROFS"
touch "$f" 2>/dev/null && fail "touch fails" || pass "touch fails"
(echo x >"$f") 2>/dev/null && fail "> fails" || pass "> fails"
assert_eq "$(errno_of "os.listdir('$mnt/nope')")" ENOENT "an unknown dataset: ENOENT"
assert_eq "$(errno_of "os.stat('$mnt/demo/train/shard-999.tar')")" ENOENT "an unknown shard: ENOENT"
assert_eq "$(errno_of "os.stat('$mnt/demo/train@99')")" ENOENT "an unknown revision: ENOENT"
assert_eq "$(sha256sum <"$f")" "$(sha256sum <"$src/shard-000000.tar")" "still serving after all that"
dv_umount "$mnt"
summary
