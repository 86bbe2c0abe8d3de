#!/usr/bin/env bash
# the mount smoke test under valgrind memcheck. The
# daemon runs under valgrind (--leak-check=full) while it mounts, lists,
# fills cold shards from the fault origin (one after a 503, one refused as
# corrupt), serves cached ones and the status file, and unmounts; then the
# leak summary must show no "definitely lost" bytes.
#
# Environment: DATAVOFS (default build/datavofs; not a sanitizer build).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum valgrind

bin=$(_dv_bin)
if nm -D "$bin" 2>/dev/null | grep -q __asan_init || nm "$bin" 2>/dev/null | grep -q __asan_init; then
	bail "$bin is a sanitizer build: valgrind needs a plain one"
fi
src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 4 --kb 512 --seed 7
publish vg/set "$src" "$origin" || bail "publish"
fo_start "$origin" || bail "fault origin"
cfg="$DV_WORK/shards.yaml"
fault_config "$cfg" "local:$DV_WORK/tier"
vglog="$DV_WORK/valgrind.log"
wrap="$DV_WORK/vg-datavofs"
cat >"$wrap" <<-EOS
	#!/bin/sh
	exec valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
		--errors-for-leak-kinds=definite --num-callers=30 --log-file="$vglog" "$bin" "\$@"
EOS
chmod +x "$wrap"
mnt=$(dv_tmp mnt)
DATAVOFS=$wrap DV_MOUNT_TIMEOUT=120 dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "mount under valgrind"
name() { printf 'shard-%06d.tar' "$1"; }
ls -R "$mnt" >/dev/null
fo_set "$(hash_of "$origin" vg/set "$(name 1)")" "status,code=503,times=1" \
	"$(hash_of "$origin" vg/set "$(name 2)")" "corrupt"
expect_read "cold fill" "$mnt/vg/set/$(name 0)" 0 60 "$(sha_of "$origin" vg/set "$(name 0)")"
expect_read "cold fill after a 503" "$mnt/vg/set/$(name 1)" 0 60 "$(sha_of "$origin" vg/set "$(name 1)")"
expect_read "corrupt origin bytes: EIO" "$mnt/vg/set/$(name 2)" EIO 60
expect_read "cached" "$mnt/vg/set/$(name 0)" 0 60 "$(sha_of "$origin" vg/set "$(name 0)")"
cat "$mnt/.datavo/status" >/dev/null && pass "status file read"
DV_UMOUNT_TIMEOUT=120 dv_umount "$mnt" && pass "unmounted; daemon exited under valgrind"
for ((i = 0; i < 100; i++)); do grep -q "ERROR SUMMARY" "$vglog" 2>/dev/null && break; sleep 0.2; done
grep -E "definitely lost|indirectly lost|ERROR SUMMARY|All heap blocks were freed" "$vglog" | sed 's/^/# /'
if grep -q "All heap blocks were freed" "$vglog"; then
	pass "valgrind: no leak at all"
elif def=$(grep -E "definitely lost:" "$vglog" | tail -1) && [ -n "$def" ]; then
	if grep -qE "definitely lost: 0 bytes" <<<"$def"; then
		pass "valgrind: no definitely lost bytes"
	else
		fail "valgrind: definitely lost bytes" "$(sed -n '/definitely lost in loss record/,/^==[0-9]*== $/p' "$vglog" | head -60)"
	fi
else
	fail "valgrind: no leak summary in its log" "$(tail -30 "$vglog")"
fi
VG_SUMMARY=$(grep "ERROR SUMMARY" "$vglog" | tail -1 | sed 's/^==[0-9]*== //')
echo "# $VG_SUMMARY"
if [ -n "${DV_VALGRIND_LOG:-}" ]; then cp "$vglog" "$DV_VALGRIND_LOG"; fi
summary
