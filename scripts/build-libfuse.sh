#!/usr/bin/env bash
# Builds libfuse >= 3.18 (the FUSE passthrough API of 3.17: fuse_passthrough_open,
# fi->backing_id, FUSE_CAP_PASSTHROUGH; and FUSE over io_uring, 3.18) into a
# private prefix, from the `fuse3` source package of Debian's unstable suite
# (sid), so that datavofs can be built with both on a Debian 12 machine whose
# own libfuse3 is 3.14. LIBFUSE_SUITE=trixie LIBFUSE_MIN=3.17 builds trixie's
# 3.17 instead (passthrough, no io_uring), which make accepts too.
# scripts/setup.sh runs it when the system's libfuse is older than 3.18, and
# a plain `make` then builds against it:
#
#   scripts/build-libfuse.sh [PREFIX]        default: <repo>/build/libfuse
#   make                                     (or make FUSE_PREFIX=PREFIX)
#
# Only the static library, its headers and fuse3.pc are built and installed:
# datavofs links the archive in, so the installed daemon needs nothing from
# PREFIX and no other program on the machine loads this libfuse. No helper
# programs, no examples, no tests, nothing outside PREFIX (no udev rules, no
# init script, no setuid fusermount3; the library falls back to the system's
# fusermount3 on PATH when it needs one).
#
# FUSE over io_uring: libfuse's meson builds it only when it finds both
# liburing and libnuma (liburing-dev, libnuma-dev: installed here when
# missing); the archive then holds fuse_uring.o, its fuse3.pc requires
# liburing and numa, and datavofs links -luring -lnuma. A 3.18 archive
# without fuse_uring.o fails the build (LIBFUSE_URING=0 accepts it).
#
# Where the sources come from: the machine's own apt configuration names the
# Debian mirror (the first main-archive entry, never the security archive).
# From that mirror the script fetches dists/<suite>/InRelease, checks its
# signature with gpgv against Debian's archive keyring, takes the sha256 of the
# Sources index from it, checks the Sources index, and takes the sha256 of every
# fuse3 source file from the index. Nothing unverified is unpacked.
#
# Idempotent: exits at once when PREFIX already holds libfuse3.a >= LIBFUSE_MIN.
# When meson, ninja, gpgv or the io_uring libraries are missing it installs
# them with apt-get, waiting (up to LIBFUSE_APT_WAIT seconds, default 600) for
# another apt or dpkg run to let go of its lock instead of failing.
# Downloads are cached (and re-verified) under the cache directory.
#
# Environment (all optional):
#   LIBFUSE_PREFIX   install prefix (the first argument wins over it)
#   LIBFUSE_CACHE    downloads and build tree   (default <repo>/build/libfuse-cache)
#   LIBFUSE_SUITE    Debian suite to take fuse3 from   (default sid)
#   LIBFUSE_MIN      lowest acceptable version         (default 3.18)
#   LIBFUSE_URING=0  accept a libfuse >= 3.18 built without io_uring
#   LIBFUSE_MIRROR   mirror base URL, instead of reading the apt configuration
#   LIBFUSE_KEYRING  keyring for InRelease (default Debian's archive keyring)
#   LIBFUSE_FORCE=1  rebuild even if PREFIX already has a good libfuse
set -euo pipefail

log() { printf 'build-libfuse: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${1:-${LIBFUSE_PREFIX:-$root/build/libfuse}}
prefix=$(realpath -m -- "$prefix")
cache=$(realpath -m -- "${LIBFUSE_CACHE:-$root/build/libfuse-cache}")
suite=${LIBFUSE_SUITE:-sid}
min_version=${LIBFUSE_MIN:-3.18}
keyring=${LIBFUSE_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

# --- already there? ---------------------------------------------------------
# PKG_CONFIG_LIBDIR (not _PATH) puts PREFIX's fuse3.pc first; the system's
# directories follow only for what a 3.18 fuse3.pc requires (liburing, numa).
prefix_pc_dirs() {
	local d out=""
	for d in "$prefix"/lib/*/pkgconfig "$prefix"/lib/pkgconfig "$prefix"/lib64/pkgconfig; do
		[ -f "$d/fuse3.pc" ] && out="${out:+$out:}$d"
	done
	printf '%s' "$out"
}

installed_version() {
	local dirs
	dirs=$(prefix_pc_dirs)
	[ -n "$dirs" ] || return 1
	command -v pkg-config >/dev/null || return 1
	dirs=$dirs:$(pkg-config --variable pc_path pkg-config)
	PKG_CONFIG_LIBDIR=$dirs PKG_CONFIG_PATH='' pkg-config --atleast-version="$min_version" fuse3 || return 1
	local libdir
	libdir=$(PKG_CONFIG_LIBDIR=$dirs PKG_CONFIG_PATH='' pkg-config --variable=libdir fuse3)
	[ -e "$libdir/libfuse3.a" ] || return 1
	PKG_CONFIG_LIBDIR=$dirs PKG_CONFIG_PATH='' pkg-config --modversion fuse3
}

if [ "${LIBFUSE_FORCE:-0}" != 1 ] && v=$(installed_version); then
	log "libfuse $v already installed in $prefix (>= $min_version); nothing to do"
	exit 0
fi

# --- tools ------------------------------------------------------------------
# command -> Debian package that provides it
declare -A tool_pkg=([meson]=meson [ninja]=ninja-build [dpkg-source]=dpkg-dev
	[pkg-config]=pkg-config [cc]=build-essential [gpgv]=gpgv [xz]=xz-utils
	[curl]=curl)
# apt_wait: returns once no process holds apt's or dpkg's lock (as /proc/locks
# shows: looking takes no lock), or after apt_wait_max seconds. apt-get's own
# DPkg::Lock::Timeout covers the dpkg lock, not the lists lock of an update.
apt_wait_max=${LIBFUSE_APT_WAIT:-600}
apt_locks_held() {
	local f ino
	for f in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock \
		/var/cache/apt/archives/lock; do
		ino=$(stat -c %i "$f" 2>/dev/null) || continue
		grep -qE ":$ino( |\$)" /proc/locks 2>/dev/null && return 0
	done
	return 1
}
apt_wait() {
	local waited=0
	while apt_locks_held; do
		[ "$waited" -ge "$apt_wait_max" ] && { log "apt is still busy after $waited s; trying anyway"; return 0; }
		[ "$waited" -eq 0 ] && log "waiting for another apt or dpkg run to finish (up to $apt_wait_max s)"
		sleep 5
		waited=$((waited + 5))
	done
}

missing=()
for t in "${!tool_pkg[@]}"; do
	command -v "$t" >/dev/null 2>&1 || missing+=("${tool_pkg[$t]}")
done
# What libfuse's meson needs for FUSE over io_uring (only 3.18 and later use them).
for p in liburing-dev libnuma-dev; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	apt_wait
	$sudo apt-get -o DPkg::Lock::Timeout="$apt_wait_max" update -qq
	apt_wait
	$sudo apt-get -o DPkg::Lock::Timeout="$apt_wait_max" install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
fi
[ -r "$keyring" ] || die "no keyring at $keyring (apt-get install debian-archive-keyring, or set LIBFUSE_KEYRING)"

# apt may reach its mirror through a proxy: use the same one.
if command -v apt-config >/dev/null; then
	apt_http_proxy="" apt_https_proxy=""
	eval "$(apt-config shell apt_http_proxy Acquire::http::Proxy apt_https_proxy Acquire::https::Proxy)"
	if [ -n "$apt_http_proxy" ] && [ "$apt_http_proxy" != DIRECT ] && [ -z "${http_proxy:-}" ]; then
		export http_proxy=$apt_http_proxy
	fi
	if [ -n "$apt_https_proxy" ] && [ "$apt_https_proxy" != DIRECT ] && [ -z "${https_proxy:-}" ]; then
		export https_proxy=$apt_https_proxy
	fi
fi

# --- the mirror, from the apt configuration ------------------------------------
# Prints candidate base URLs, in apt's order: sources.list, then sources.list.d/
# (*.list one-line entries and *.sources deb822 stanzas). Keeps Debian main-archive
# entries (a Debian suite name, the "main" component), drops security archives.
is_debian_suite() {
	case "$1" in
	*-security | */updates) return 1 ;;
	esac
	case "${1%%-*}" in
	buster | bullseye | bookworm | trixie | forky | duke | sid | \
		oldoldstable | oldstable | stable | testing | unstable | experimental) return 0 ;;
	esac
	return 1
}

is_archive_uri() {
	case "$1" in
	http://* | https://*) ;;
	*) return 1 ;;
	esac
	case "$1" in
	*security*) return 1 ;;
	esac
	return 0
}

mirror_candidates() {
	local f files=()
	[ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
	for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && files+=("$f")
	done
	# apt reads sources.list.d in alphabetical order, both kinds mixed.
	local sorted=()
	[ -f /etc/apt/sources.list ] && sorted+=(/etc/apt/sources.list)
	while IFS= read -r f; do
		[ "$f" = /etc/apt/sources.list ] || sorted+=("$f")
	done < <(printf '%s\n' "${files[@]}" | LC_ALL=C sort)
	for f in "${sorted[@]}"; do
		case "$f" in
		*.sources) deb822_candidates "$f" ;;
		*) oneline_candidates "$f" ;;
		esac
	done
}

# "deb [opts] URI SUITE COMPONENT..." lines.
oneline_candidates() {
	local line type uri suite comps
	while IFS= read -r line; do
		line=${line%%#*}
		# drop "[ option=value ... ]"
		line=$(sed -E 's/\[[^]]*\]//' <<<"$line")
		read -r type uri suite comps <<<"$line" || true
		[ "$type" = deb ] || [ "$type" = deb-src ] || continue
		is_archive_uri "$uri" || continue
		is_debian_suite "$suite" || continue
		[[ " $comps " == *" main "* ]] || continue
		printf '%s\n' "${uri%/}"
	done <"$1"
}

# deb822 stanzas: Types:, URIs:, Suites:, Components:, Enabled:.
deb822_candidates() {
	awk '
		function flush(   n, u, i, s) {
			if (uris != "" && enabled != "no" && types ~ /(^| )deb(-src)?( |$)/ &&
			    (" " comps " ") ~ / main /) {
				n = split(suites, s, " ")
				for (i = 1; i <= n; i++) print "SUITE " s[i]
				n = split(uris, u, " ")
				for (i = 1; i <= n; i++) print "URI " u[i]
				print "END"
			}
			types = uris = suites = comps = enabled = key = ""
		}
		function add(val) {
			gsub(/^[ \t]+|[ \t]+$/, "", val)
			if (key == "types") types = types " " val
			else if (key == "uris") uris = uris " " val
			else if (key == "suites") suites = suites " " val
			else if (key == "components") comps = comps " " val
			else if (key == "enabled") enabled = tolower(val)
		}
		/^[ \t]*#/ { next }
		/^[ \t]*$/ { flush(); next }
		/^[A-Za-z-]+:/ {
			key = tolower(substr($0, 1, index($0, ":") - 1))
			add(substr($0, index($0, ":") + 1))
			next
		}
		/^[ \t]/ { add($0); next }  # continuation line of the current field
		{ key = "" }
		END { flush() }
	' "$1" | {
		local kind val debian=0 uris=()
		while read -r kind val; do
			case "$kind" in
			SUITE) is_debian_suite "$val" && debian=1 ;;
			URI) uris+=("$val") ;;
			END)
				if [ "$debian" = 1 ]; then
					for val in "${uris[@]}"; do
						is_archive_uri "$val" && printf '%s\n' "${val%/}"
					done
				fi
				debian=0 uris=()
				;;
			esac
		done
	}
}

fetch() { # URL FILE
	local url=$1 out=$2
	curl -fsSL --retry 3 --connect-timeout 20 --max-time 600 -o "$out.part" "$url" &&
		mv -f "$out.part" "$out"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Reuses FILE when it already has the right digest, else downloads it again.
fetch_verified() { # URL FILE SHA256 SIZE
	local url=$1 out=$2 want=$3 size=$4
	if [ -f "$out" ] && [ "$(sha256_of "$out")" = "$want" ]; then
		log "cached $(basename "$out")"
		return 0
	fi
	log "fetching $(basename "$out") ($size bytes)"
	fetch "$url" "$out" || die "download failed: $(basename "$out")"
	local got got_size
	got=$(sha256_of "$out")
	got_size=$(stat -c %s "$out")
	if [ "$got" != "$want" ] || [ "$got_size" != "$size" ]; then
		rm -f "$out"
		die "$(basename "$out"): got sha256 $got, $got_size bytes; the signed index says $want, $size bytes"
	fi
}

mkdir -p "$cache/dl"
exec 9>"$cache/.lock"
flock 9 # one build at a time per cache

# Picks the first candidate mirror that serves a correctly signed InRelease for $suite.
mirror="" release="$cache/dl/$suite.Release"
if [ -n "${LIBFUSE_MIRROR:-}" ]; then
	candidates=("${LIBFUSE_MIRROR%/}")
else
	mapfile -t candidates < <(mirror_candidates | awk '!seen[$0]++')
fi
[ ${#candidates[@]} -gt 0 ] ||
	die "no Debian main-archive entry in /etc/apt/sources.list{,.d/}; set LIBFUSE_MIRROR"
for m in "${candidates[@]}"; do
	log "trying mirror $m (from the apt configuration) for $suite"
	if fetch "$m/dists/$suite/InRelease" "$cache/dl/$suite.InRelease" 2>/dev/null &&
		gpgv --quiet --keyring "$keyring" --output "$release.tmp" \
			"$cache/dl/$suite.InRelease" 2>"$cache/dl/gpgv.log"; then
		mv -f "$release.tmp" "$release"
		mirror=$m
		break
	fi
	rm -f "$release.tmp"
	log "  no correctly signed $suite InRelease there"
done
[ -n "$mirror" ] || die "no mirror served a signed dists/$suite/InRelease (see $cache/dl/gpgv.log)"

# --- the Sources index ---------------------------------------------------------
# From the SHA256: section of the (verified) Release text: "<sha256> <size> <path>".
release_entry() { # PATH
	awk -v want="$1" '
		/^[^ ]/ { insha = ($0 ~ /^SHA256:/); next }
		insha && $3 == want { print $1, $2; exit }
	' "$release"
}

sources="" sources_dec=""
for comp in xz gz; do
	entry=$(release_entry "main/source/Sources.$comp")
	[ -n "$entry" ] || continue
	case "$comp" in
	xz) command -v xz >/dev/null || continue; sources_dec="xz -dc" ;;
	gz) sources_dec="gzip -dc" ;;
	esac
	read -r sha size <<<"$entry"
	sources="$cache/dl/$suite.Sources.$comp"
	fetch_verified "$mirror/dists/$suite/main/source/Sources.$comp" "$sources" "$sha" "$size"
	break
done
[ -n "$sources" ] || die "the $suite Release file lists no main/source/Sources.{xz,gz}"

# The fuse3 stanza with the highest version: "Version", "Directory", then one
# "FILE <sha256> <size> <name>" line per Checksums-Sha256 entry.
stanzas=$($sources_dec "$sources" | awk '
	BEGIN { RS = ""; FS = "\n" }
	$1 == "Package: fuse3" {
		ver = dir = ""; files = ""; insha = 0
		for (i = 1; i <= NF; i++) {
			line = $i
			if (line ~ /^[^ ]/) insha = 0
			if (line ~ /^Version: /) ver = substr(line, 10)
			else if (line ~ /^Directory: /) dir = substr(line, 12)
			else if (line ~ /^Checksums-Sha256:/) insha = 1
			else if (insha && line ~ /^ /) { split(line, f, " "); files = files "FILE " f[1] " " f[2] " " f[3] "\n" }
		}
		printf "STANZA %s %s\n%s", ver, dir, files
	}')
[ -n "$stanzas" ] || die "no fuse3 source package in $suite"
best=$(grep '^STANZA ' <<<"$stanzas" | cut -d' ' -f2 | sort -V | tail -1)
read -r _ version directory < <(grep "^STANZA $best " <<<"$stanzas" | head -1)
upstream=${version#*:}
upstream=${upstream%-*}
if [ "$(printf '%s\n%s\n' "$min_version" "$upstream" | sort -V | head -1)" != "$min_version" ]; then
	die "$suite has fuse3 $version, older than $min_version"
fi
case "$directory" in
pool/* | "") ;;
*) die "unexpected Directory: $directory" ;;
esac
log "fuse3 $version in $suite"

# Files of that stanza only.
mapfile -t files < <(awk -v best="$best" '
	/^STANZA / { cur = ($2 == best) ; next }
	cur && /^FILE / { print $2, $3, $4 }' <<<"$stanzas")
dsc=""
for f in "${files[@]}"; do
	read -r sha size name <<<"$f"
	case "$name" in
	*/* | .* | "") die "unexpected file name in the index: $name" ;;
	esac
	fetch_verified "$mirror/$directory/$name" "$cache/dl/$name" "$sha" "$size"
	case "$name" in *.dsc) dsc=$name ;; esac
done
[ -n "$dsc" ] || die "no .dsc in the fuse3 stanza"

# --- unpack, build, install -------------------------------------------------------
src="$cache/src"
obj="$cache/obj"
rm -rf "$src" "$obj"
# Every file was checked against the signed index above; --no-check skips
# dpkg-source's own signature check (it would only warn about the maintainer's key).
(cd "$cache/dl" && dpkg-source --no-check -x "$dsc" "$src") >"$cache/unpack.log" 2>&1 ||
	{ cat "$cache/unpack.log" >&2; die "dpkg-source -x failed"; }
log "unpacked into $src (with Debian's patches)"

meson_opts=(
	--prefix "$prefix"
	--buildtype release
	-Ddefault_library=static
	-Dexamples=false
	-Dutils=false
	-Dtests=false
	-Duseroot=false
	-Dinitscriptdir=
	-Dudevrulesdir="$prefix/lib/udev/rules.d"
)
log "meson setup ${meson_opts[*]}"
meson setup "${meson_opts[@]}" "$obj" "$src" >"$cache/build.log" 2>&1 ||
	{ tail -40 "$cache/build.log" >&2; die "meson setup failed (log: $cache/build.log)"; }
ninja -C "$obj" >>"$cache/build.log" 2>&1 ||
	{ tail -40 "$cache/build.log" >&2; die "build failed (log: $cache/build.log)"; }
meson install -C "$obj" --no-rebuild >>"$cache/build.log" 2>&1 ||
	{ tail -40 "$cache/build.log" >&2; die "install failed (log: $cache/build.log)"; }

v=$(installed_version) || die "installed, but no libfuse3.a with a fuse3.pc >= $min_version under $prefix"
# 3.18 and later: FUSE over io_uring is in the archive, or the build says why not.
if [ "$(printf '3.18\n%s\n' "$v" | sort -V | head -1)" = 3.18 ]; then
	archive=$(find "$prefix" -name libfuse3.a | head -1)
	if ar t "$archive" | grep -q '^fuse_uring\.c\.o$'; then
		log "libfuse $v has FUSE over io_uring (links -luring -lnuma)"
	elif [ "${LIBFUSE_URING:-1}" = 0 ]; then
		log "libfuse $v built without FUSE over io_uring (LIBFUSE_URING=0)"
	else
		grep -iE 'liburing|numa' "$cache/build.log" >&2 || true
		die "libfuse $v was built without FUSE over io_uring (meson found no liburing or numa; see $cache/build.log)"
	fi
fi
# Keep only the verified downloads (and the logs); dpkg-source -x also leaves
# a copy of the orig tarball next to the tree it unpacked.
rm -rf "$src" "$obj"
for f in "${files[@]}"; do
	read -r _ _ name <<<"$f"
	rm -f "${cache:?}/$name"
done
log "installed libfuse $v into $prefix"
if [ "$prefix" = "$root/build/libfuse" ]; then
	log "make builds datavofs against it (passthrough read path; io_uring from 3.18 on)"
else
	log "build datavofs with: make FUSE_PREFIX=$prefix"
fi
