# shellcheck shell=bash
# tests/integration/stripe_lib.sh: loop devices for the stripe tier tests.
# Source it after lib.sh (and fixtures.sh).
#
#   dev=$(loop_attach FILE)      attaches FILE (made if missing, MiB via
#                                loop_attach FILE MIB) to a free loop device,
#                                records it, prints /dev/loopN
#   loop_mount DEV DIR           mounts DEV on DIR (unmounted by the cleanup)
#   stripe_tool ARGS…            runs build/dv-stripe (DV_STRIPE_TOOL)
#   stripe_remove_later PATH     rm -rf PATH in the cleanup, after detaching
#                                (for backing files outside the work dir)
#
# Only the loop devices attached here are ever detached, and only while they
# still have the backing file this test gave them. The cleanup runs from the
# EXIT trap before lib.sh's own: it unmounts what loop_mount mounted, then
# detaches each device (lazily when a daemon still holds it: the kernel frees
# it when lib.sh's cleanup has stopped that daemon).

DV_LOOPS="$DV_WORK/.loops"
: >"$DV_LOOPS"
DV_LOOP_MOUNTS="$DV_WORK/.loop-mounts"
: >"$DV_LOOP_MOUNTS"
DV_STRIPE_REMOVE="$DV_WORK/.stripe-remove"
: >"$DV_STRIPE_REMOVE"

DV_STRIPE_TOOL=${DV_STRIPE_TOOL:-$(dirname "$(_dv_bin)")/dv-stripe}

stripe_tool() {
	"$DV_STRIPE_TOOL" "$@"
}

loop_attach() {
	local file=$1 mib=${2:-64} dev
	[ -e "$file" ] || truncate -s "${mib}M" "$file" || return 1
	file=$(_dv_abs "$file")
	dev=$(losetup -f --show "$file") || return 1
	printf '%s\t%s\n' "$dev" "$file" >>"$DV_LOOPS"
	echo "$dev"
}

stripe_remove_later() {
	_dv_abs "$1" >>"$DV_STRIPE_REMOVE"
}

loop_mount() {
	mkdir -p "$2"
	mount "$1" "$2" || return 1
	_dv_abs "$2" >>"$DV_LOOP_MOUNTS"
}

_stripe_cleanup() {
	local dev file back m
	while IFS= read -r m; do
		[ -n "$m" ] && mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done <"$DV_LOOP_MOUNTS"
	while IFS=$'\t' read -r dev file; do
		[ -n "$dev" ] || continue
		back=$(losetup -n -O BACK-FILE "$dev" 2>/dev/null | sed 's/[[:space:]]*$//')
		# Ours only if it still has our file (it may have been freed and reused).
		[ "$back" = "$file" ] && losetup -d "$dev" 2>/dev/null
	done <"$DV_LOOPS"
	while IFS= read -r m; do
		[ -n "$m" ] && rm -rf --one-file-system "$m"
	done <"$DV_STRIPE_REMOVE"
	return 0
}

trap '_dv_stripe_rc=$?; _stripe_cleanup; (exit $_dv_stripe_rc); _dv_cleanup' EXIT

# stripe_config FILE STATE TIERDIR DEV… : a stripe tier on DEV… first (1 MiB
# chunks), a folder tier second, short HTTP timeouts; extra YAML lines can be
# appended by the caller.
stripe_config() {
	local file=$1 state=$2 tier=$3 d list=""
	shift 3
	for d in "$@"; do list="$list${list:+, }$d"; done
	cat >"$file" <<-EOF
		state_dir: $state
		tiers:
		  - name: nvme
		    type: stripe
		    devices: [$list]
		    chunk_bytes: 1MiB
		  - name: local
		    path: $tier
		http:
		  connect_timeout: 2
		  low_speed_time: 3
		  retries: 1
	EOF
}

# all_shards_ok SRC MNT: every shard of SRC reads through MNT with its sha256.
all_shards_ok() {
	local f want got ok=0
	for f in "$1"/*.tar; do
		want=$(sha256sum <"$f" | cut -d' ' -f1)
		got=$(sha256sum <"$2/$(basename "$f")" 2>/dev/null | cut -d' ' -f1)
		[ "$want" = "$got" ] || { echo "# $(basename "$f"): got '$got'" >&2; ok=1; }
	done
	return $ok
}

# tiers_of SRC MNT: the user.datavo.tier of every shard, sorted and counted.
tiers_of() {
	local f
	for f in "$1"/*.tar; do
		getfattr --only-values -n user.datavo.tier "$2/$(basename "$f")" 2>/dev/null
		echo
	done | sort | uniq -c | awk '{ print $1, $2 }' | tr '\n' ' ' | sed 's/ $//'
}
