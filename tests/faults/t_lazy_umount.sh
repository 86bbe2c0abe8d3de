#!/usr/bin/env bash
# a lazy unmount (fusermount3 -uz) while readers hold
# shards open. The readers finish with the right bytes, the daemon exits
# once the last of them closes, nothing is left in the tier's .staging/, and
# a new mount on the same directory serves.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
# shellcheck source=tests/integration/fixtures.sh
. "$DV_ROOT/tests/integration/fixtures.sh"
# shellcheck source=tests/faults/lib_faults.sh
. "$DV_ROOT/tests/faults/lib_faults.sh"
dv_need python3 sha256sum fusermount3

src=$(dv_tmp src)
origin=$(dv_tmp origin)
mktars "$src" 6 --kb 1024 --seed 95
publish lazy/set "$src" "$origin" || bail "publish"
fo_start "$origin" || bail "fault origin"
tier="$DV_WORK/tier"
cfg="$DV_WORK/shards.yaml"
fault_config "$cfg" "local:$tier"
mnt=$(dv_tmp mnt)
name() { printf 'shard-%06d.tar' "$1"; }
dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "mount"
pid=$(dv_pid "$mnt")
start=$(_dv_start_of "$pid")

# Four readers open their shard, then read it in 64 KiB pieces over ~3 s.
# Two of the shards are cold: one is trickled, so its open is still filling.
fo_set "$(hash_of "$origin" lazy/set "$(name 3)")" "trickle,rate=524288"
outs=()
for i in 0 1 2 3; do
	out="$DV_WORK/reader$i"
	outs+=("$out")
	python3 - "$mnt/lazy/set/$(name "$i")" "$(sha_of "$origin" lazy/set "$(name "$i")")" "$out" <<-'PY' &
		import errno, hashlib, sys, time
		path, want, out = sys.argv[1:4]
		h, e = hashlib.sha256(), "0"
		try:
		    with open(path, "rb") as f:
		        open(out + ".opened", "w").close()
		        while True:
		            b = f.read(65536)
		            if not b:
		                break
		            h.update(b)
		            time.sleep(0.2)
		except OSError as ex:
		    e = errno.errorcode.get(ex.errno, str(ex.errno))
		open(out, "w").write("%s %s\n" % (e, "right" if h.hexdigest() == want else "WRONG"))
	PY
	dv_track $! reader
done
# Unmount once three readers have their shard open and the fourth's fill
# has started (its open is still waiting for it).
h3=$(hash_of "$origin" lazy/set "$(name 3)")
for ((i = 0; i < 200; i++)); do
	n_open=$(ls "$DV_WORK"/reader*.opened 2>/dev/null | wc -l)
	[ "$n_open" -ge 3 ] && [ "$(fo_count "GET /shards/$h3")" -ge 1 ] && break
	sleep 0.1
done
echo "# $n_open readers hold their shard open, the fourth is filling"
fusermount3 -uz "$mnt" && pass "lazy unmount with four readers holding files"
t_umount=$(date +%s.%N)
mountpoint -q "$mnt" && fail "the mountpoint is detached at once" || pass "the mountpoint is detached at once"
for ((i = 0; i < 300; i++)); do
	done_=0
	for o in "${outs[@]}"; do [ -s "$o" ] && done_=$((done_ + 1)); done
	[ "$done_" = 4 ] && break
	sleep 0.1
done
res=$(cat "${outs[@]}" 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';')
assert_eq "$(cat "${outs[@]}" 2>/dev/null | grep -c '^0 right')" 4 "every reader finishes with the right bytes after the lazy unmount"
LAZY="$res"
if _dv_wait_exit "$pid" "$start" 10; then
	pass "the daemon exits once the last reader closed (status ${DV_LAST_EXIT:-?}, $(awk -v a="$t_umount" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s after the unmount)"
else
	fail "the daemon exits once the last reader closed"
fi
_dv_reg_del mount "$(_dv_abs "$mnt")"
scan_tiers "after the lazy unmount: tier scan" "$origin" "$tier" --no-staging
fo_clear
dv_mount "$FO_URL" "$mnt" "config=$cfg" || bail "remount"
expect_read "a new mount on the same directory serves" "$mnt/lazy/set/$(name 4)" 0 10 "$(sha_of "$origin" lazy/set "$(name 4)")"
dv_umount "$mnt"
if [ -n "${DV_FAULT_REPORT:-}" ]; then
	echo "lazy unmount with 4 readers holding files (one still filling)|-|readers: $LAZY daemon exits after the last close|-" >>"$DV_FAULT_REPORT"
fi
summary
