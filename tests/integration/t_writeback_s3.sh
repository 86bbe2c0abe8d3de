#!/usr/bin/env bash
# Write-back to s3rver: a multipart checkpoint reaches the bucket byte for
# byte; a rewrite while uploading ends with the newest bytes; with the
# destination down files stay pending (xattr, status), the daemon is
# SIGKILLed, both come back and `datavoctl sync` succeeds with every
# object matching; torch.save / torch.load through the mount.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/integration/s3_lib.sh
. "$DV_ROOT/tests/integration/s3_lib.sh"
dv_need python3 sha256sum getfattr curl

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 1 --kb 64 --seed 4
publish demo/train "$src" "$origin" || bail "publish"
s3rver_start ckpt || bail "s3rver"
s3_creds_env
land=$(dv_tmp land)
cfg="$DV_WORK/shards.yaml"
write_config "$cfg" "$DV_WORK/tier" \
	"writeback:" "  - name: ckpt" "    destination: s3://ckpt/run7" "    path: $land" \
	"    endpoint: $S3_URL" "    region: us-east-1"
mnt=$(dv_tmp mnt)
dv_mount "file://$origin" "$mnt" "config=$cfg" || bail "mount"
ctl=${DATAVOCTL:-$DV_ROOT/build/datavoctl}
obj_sum() { curl -sf "$S3_URL/ckpt/run7/$1" | sha256sum; }
xattr() { getfattr --absolute-names --only-values -n user.datavo.sync "$1" 2>&1; }

# A checkpoint above the multipart threshold (64 MiB).
head -c $((70 << 20)) /dev/urandom >"$DV_WORK/big"
cp "$DV_WORK/big" "$mnt/ckpt/big.pt.tmp" && mv "$mnt/ckpt/big.pt.tmp" "$mnt/ckpt/big.pt"
"$ctl" sync --timeout 120 "$mnt/ckpt"
assert_eq "$?" 0 "sync: 0"
assert_eq "$(obj_sum big.pt)" "$(sha256sum <"$DV_WORK/big")" "multipart object matches byte for byte"
assert_eq "$(s3_keys ckpt run7/)" "run7/big.pt" "only the final name was uploaded"

# Rewrite while uploading: the newest content wins.
cp "$DV_WORK/big" "$mnt/ckpt/re.pt"
sleep 0.8 # past the settle delay: the first upload is running
head -c $((3 << 20)) /dev/urandom >"$DV_WORK/re2"
cp "$DV_WORK/re2" "$mnt/ckpt/re.pt"
"$ctl" sync --timeout 120 "$mnt/ckpt"
assert_eq "$(obj_sum re.pt)" "$(sha256sum <"$DV_WORK/re2")" "rewrite while uploading: the newest bytes win"
rm "$mnt/ckpt/re.pt"
"$ctl" sync --timeout 60 "$mnt/ckpt"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' "$S3_URL/ckpt/run7/re.pt")" 404 "unlink after upload deletes the object"

# The destination goes down; files are written and closed; SIGKILL.
kill "$S3_PID"; wait "$S3_PID" 2>/dev/null
for i in 1 2 3; do
	head -c $((i << 20)) /dev/urandom >"$DV_WORK/d$i"
	cp "$DV_WORK/d$i" "$mnt/ckpt/d$i.pt"
done
sleep 1
assert_eq "$(xattr "$mnt/ckpt/d1.pt")" pending "destination down: xattr says pending"
"$ctl" sync --timeout 2 "$mnt/ckpt" 2>/dev/null
assert_eq "$?" 2 "sync times out with 2 while the destination is down"
grep -q '"pending_files": 3' "$mnt/.datavo/status" && pass "status: 3 pending" || fail "status: 3 pending" "$(cat "$mnt/.datavo/status")"
kill -KILL "$(dv_pid "$mnt")"
sleep 0.5
fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
_dv_reg_del mount "$(_dv_abs "$mnt")"
ls "$land/.datavo-journal" | grep -c . | grep -qx 3 && pass "the journal holds 3 entries" || fail "the journal holds 3 entries" "$(ls -la "$land/.datavo-journal")"

# Both come back: s3rver on its old port and data, the daemon remounted.
NODE_OPTIONS=--openssl-legacy-provider node "$S3RVER_DIR/node_modules/s3rver/bin/s3rver.js" -d "$S3_DATA" \
	-a 127.0.0.1 -p "$S3_PORT" --silent --configure-bucket ckpt >>"$S3_DATA.log" 2>&1 &
S3_PID=$!
dv_track "$S3_PID" s3rver
_s3_wait_http "$S3_URL/" "$S3_PID" || bail "s3rver restart"
dv_mount "file://$origin" "$mnt" "config=$cfg" || bail "remount"
"$ctl" sync --timeout 120 "$mnt/ckpt"
assert_eq "$?" 0 "after SIGKILL and the destination back: sync 0"
ok=1
for i in 1 2 3; do [ "$(obj_sum "d$i.pt")" = "$(sha256sum <"$DV_WORK/d$i")" ] || ok=0; done
assert_eq "$ok" 1 "every object matches after the restart"
assert_eq "$(obj_sum big.pt)" "$(sha256sum <"$DV_WORK/big")" "the earlier object is still there"

# torch.save / torch.load through the mount.
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	/usr/bin/python3 - "$mnt/ckpt" <<-'PY'
		import sys, torch
		d = sys.argv[1]
		torch.manual_seed(0)
		sd = {"w": torch.randn(256, 256), "b": torch.arange(1000)}
		torch.save(sd, d + "/model.pt.tmp")
		import os; os.rename(d + "/model.pt.tmp", d + "/model.pt")
		back = torch.load(d + "/model.pt")
		assert torch.equal(back["w"], sd["w"]) and torch.equal(back["b"], sd["b"])
	PY
	assert_eq "$?" 0 "torch.save then torch.load through the mount"
	"$ctl" sync --timeout 60 "$mnt/ckpt"
	assert_eq "$(obj_sum model.pt)" "$(sha256sum <"$land/model.pt")" "the torch checkpoint is in the bucket"
else
	skip "torch" "python3-torch is not installed"
fi
dv_umount "$mnt"
summary
