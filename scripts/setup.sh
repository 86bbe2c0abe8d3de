#!/usr/bin/env bash
# Installs what datavofs needs to build and test, when it is missing.
# Usage: scripts/setup.sh [--test]   (--test adds the servers the tests use)
set -euo pipefail

build_pkgs=(build-essential pkg-config libfuse3-dev fuse3 libcurl4-openssl-dev
	libssl-dev libyaml-dev libxxhash-dev liburing-dev libmicrohttpd-dev check python3)
# The private libfuse's FUSE over io_uring (scripts/build-libfuse.sh): its
# meson builds it only when it finds libnuma as well as liburing.
build_pkgs+=(libnuma-dev)
test_pkgs=(nginx-light curl procps util-linux psmisc attr iproute2 clang)
# Reliability: valgrind for the mount smoke test; libFuzzer's
# runtime for the fuzz targets (clang's own package may not pull it in).
test_pkgs+=(valgrind libclang-rt-14-dev)
# Operating datavofs: promtool checks the metrics, the man pages
# render with groff and man, systemd-analyze checks the unit, python3-yaml
# parses the Kubernetes files, automount runs the autofs map, script(1)
# gives preload a terminal.
test_pkgs+=(prometheus groff-base man-db systemd python3-yaml autofs bsdutils)
# The stripe tier: losetup (util-linux) attaches loop devices,
# mkfs.ext4 (e2fsprogs) gives one a foreign signature for discovery to refuse.
test_pkgs+=(e2fsprogs)
# Shared Key is checked against Microsoft's Python SDK (azure-storage-blob;
# it imports only under /usr/bin/python3).
test_pkgs+=(python3-azure)
# SigV4 against the reference (tests/unit/test_sigv4.c): botocore signs the
# same requests; Debian's package imports under /usr/bin/python3.
test_pkgs+=(python3-botocore)
# The cold-path benchmark (scripts/bench-cold.sh): rclone mount is the FUSE
# peer for the first bytes; python3-torch runs its DataLoader epochs
# (under /usr/bin/python3); t_writeback_s3 runs torch.save and torch.load
# through the mount.
test_pkgs+=(rclone python3-torch)

want=("${build_pkgs[@]}")
if [ "${1:-}" = "--test" ]; then
	want+=("${test_pkgs[@]}")
fi

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
	echo "setup: all packages present"
fi

# The passthrough read path needs libfuse >= 3.17, FUSE over io_uring 3.18.
# Where the system's is older (Debian 12: 3.14), build it from Debian's own
# verified sources into build/libfuse, which a plain `make` then links
# (statically): sid's 3.18 first, trixie's 3.17 (passthrough only) when that
# fails. SYSTEM_FUSE=1 skips it. A failure is not fatal: make falls back to
# the system's libfuse.
if [ "${SYSTEM_FUSE:-0}" != 1 ] && ! pkg-config --atleast-version=3.18 fuse3 2>/dev/null; then
	echo "setup: the system's libfuse is $(pkg-config --modversion fuse3 2>/dev/null || echo missing); building libfuse 3.18 for the passthrough read path and FUSE over io_uring"
	if ! "$(dirname "$0")/build-libfuse.sh"; then
		echo "setup: warning: no libfuse 3.18 (see above); trying trixie's 3.17 (passthrough, no io_uring)" >&2
		if ! LIBFUSE_SUITE=trixie LIBFUSE_MIN=3.17 "$(dirname "$0")/build-libfuse.sh"; then
			echo "setup: warning: no libfuse 3.17 either; make will use the system's libfuse and the keep_cache read path" >&2
			echo "setup: (on Ubuntu: apt-get install debian-archive-keyring, then LIBFUSE_MIRROR=http://deb.debian.org/debian scripts/setup.sh)" >&2
		fi
	fi
fi

# npm_pinned PACKAGE VERSION DIR NEEDED_BY: installs PACKAGE@VERSION into
# build-deps/DIR (which git ignores) unless that version is there: into a
# temporary directory first, renamed at the end, so it is whole or absent.
npm_pinned() {
	local pkg=$1 version=$2 dir have sudo=""
	dir="$(cd "$(dirname "$0")/.." && pwd)/build-deps/$3"
	have=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
		"$dir/node_modules/$pkg/package.json" 2>/dev/null || true)
	if [ "$have" = "$version" ]; then
		echo "setup: $pkg $version present"
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1; then
		echo "setup: installing nodejs npm"
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get install -y -qq --no-install-recommends nodejs npm
	fi
	echo "setup: installing $pkg $version into $dir (npm)"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	if ! (cd "$dir.tmp" && npm install --no-save --no-audit --no-fund \
		--loglevel=error --fetch-retries=1 --fetch-timeout=60000 "$pkg@$version"); then
		rm -rf "$dir.tmp"
		echo "setup: npm could not install $pkg@$version (is the npm registry reachable?); $4 need it" >&2
		exit 1
	fi
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
}

if [ "${1:-}" = "--test" ]; then
	# Azurite, the Azure Blob emulator of the t_azure_* tests (it checks
	# Shared Key and SAS signatures).
	npm_pinned azurite 3.35.0 azurite "the t_azure_* tests"
	# firebase-tools, whose Cloud Storage emulator the t_gcs_* tests run
	# through tests/integration/gcs-emu.js (pinned: that script reaches into
	# its internals; about 3 minutes and 312 MB).
	npm_pinned firebase-tools 15.34.2 gcs-emu "the t_gcs_* tests"
	# s3rver, the S3 emulator of the t_s3_* tests (it does not check
	# signatures: tests/integration/sigv4check.py, a verifying proxy, does).
	npm_pinned s3rver 3.7.1 s3rver "the t_s3_* tests"
fi
