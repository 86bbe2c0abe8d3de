#!/usr/bin/env bash
# Installs what datavofs needs to build and test, when it is missing.
# Usage: scripts/setup.sh [--test]   (--test adds the servers the tests use)
set -euo pipefail

build_pkgs=(build-essential pkg-config libfuse3-dev fuse3 libcurl4-openssl-dev
	libssl-dev libyaml-dev libxxhash-dev liburing-dev check python3)
test_pkgs=(nginx-light curl procps util-linux psmisc attr iproute2 clang)
# Reliability (issue 6): valgrind for the mount smoke test; libFuzzer's
# runtime for the fuzz targets (clang's own package may not pull it in).
test_pkgs+=(valgrind libclang-rt-14-dev)
# Operating datavofs (issue 4): promtool checks the metrics, the man pages
# render with groff and man, systemd-analyze checks the unit, python3-yaml
# parses the Kubernetes files, automount runs the autofs map, script(1)
# gives preload a terminal.
test_pkgs+=(prometheus groff-base man-db systemd python3-yaml autofs bsdutils)
# The stripe tier (issue 7): losetup (util-linux) attaches loop devices,
# mkfs.ext4 (e2fsprogs) gives one a foreign signature for discovery to refuse.
test_pkgs+=(e2fsprogs)

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

# Azurite, the Azure Blob emulator that the t_azure_* tests run (it checks
# Shared Key and SAS signatures): an npm package, installed once into
# build-deps/azurite, which git ignores. Installed whole or not at all.
azurite_version=3.35.0
if [ "${1:-}" = "--test" ]; then
	azurite_dir="$(cd "$(dirname "$0")/.." && pwd)/build-deps/azurite"
	azurite_have=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
		"$azurite_dir/node_modules/azurite/package.json" 2>/dev/null || true)
	if [ "$azurite_have" = "$azurite_version" ] &&
		[ -x "$azurite_dir/node_modules/.bin/azurite-blob" ]; then
		echo "setup: azurite $azurite_version present"
	else
		if ! command -v npm >/dev/null 2>&1; then
			echo "setup: installing nodejs npm"
			sudo=""
			[ "$(id -u)" -eq 0 ] || sudo="sudo"
			$sudo apt-get install -y -qq --no-install-recommends nodejs npm
		fi
		echo "setup: installing azurite $azurite_version into $azurite_dir (npm, about a minute)"
		rm -rf "$azurite_dir.tmp"
		mkdir -p "$azurite_dir.tmp"
		if ! (cd "$azurite_dir.tmp" && npm install --no-save --no-audit --no-fund \
			--loglevel=error --fetch-retries=1 --fetch-timeout=60000 \
			"azurite@$azurite_version"); then
			rm -rf "$azurite_dir.tmp"
			echo "setup: npm could not install azurite (is the npm registry reachable?); the t_azure_* tests need it" >&2
			exit 1
		fi
		rm -rf "$azurite_dir"
		mv "$azurite_dir.tmp" "$azurite_dir"
	fi
fi

# firebase-tools, whose Cloud Storage emulator the t_gcs_* tests run through
# tests/integration/gcs-emu.js (pinned: that script reaches into its
# internals): installed once into build-deps/gcs-emu, which git ignores,
# whole or not at all (about 3 minutes and 312 MB).
gcs_emu_version=15.34.2
if [ "${1:-}" = "--test" ]; then
	gcs_emu_dir="$(cd "$(dirname "$0")/.." && pwd)/build-deps/gcs-emu"
	gcs_emu_have=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
		"$gcs_emu_dir/node_modules/firebase-tools/package.json" 2>/dev/null || true)
	if [ "$gcs_emu_have" = "$gcs_emu_version" ]; then
		echo "setup: firebase-tools $gcs_emu_version present"
	else
		if ! command -v npm >/dev/null 2>&1; then
			echo "setup: installing nodejs npm"
			sudo=""
			[ "$(id -u)" -eq 0 ] || sudo="sudo"
			$sudo apt-get install -y -qq --no-install-recommends nodejs npm
		fi
		echo "setup: installing firebase-tools $gcs_emu_version into $gcs_emu_dir (npm, about 3 minutes)"
		rm -rf "$gcs_emu_dir.tmp"
		mkdir -p "$gcs_emu_dir.tmp"
		if ! (cd "$gcs_emu_dir.tmp" && npm install --no-save --no-audit --no-fund \
			--loglevel=error --fetch-retries=1 --fetch-timeout=60000 \
			"firebase-tools@$gcs_emu_version"); then
			rm -rf "$gcs_emu_dir.tmp"
			echo "setup: npm could not install firebase-tools@$gcs_emu_version (is the npm registry reachable?); the t_gcs_* tests need it" >&2
			exit 1
		fi
		rm -rf "$gcs_emu_dir"
		mv "$gcs_emu_dir.tmp" "$gcs_emu_dir"
	fi
fi

# s3rver, the S3 emulator that the t_s3_* tests run (it does not check
# signatures: tests/integration/sigv4check.py, a verifying proxy, does):
# installed once into build-deps/s3rver, which git ignores, whole or not
# at all (about 10 seconds).
s3rver_version=3.7.1
if [ "${1:-}" = "--test" ]; then
	s3rver_dir="$(cd "$(dirname "$0")/.." && pwd)/build-deps/s3rver"
	s3rver_have=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
		"$s3rver_dir/node_modules/s3rver/package.json" 2>/dev/null || true)
	if [ "$s3rver_have" = "$s3rver_version" ]; then
		echo "setup: s3rver $s3rver_version present"
	else
		if ! command -v npm >/dev/null 2>&1; then
			echo "setup: installing nodejs npm"
			sudo=""
			[ "$(id -u)" -eq 0 ] || sudo="sudo"
			$sudo apt-get install -y -qq --no-install-recommends nodejs npm
		fi
		echo "setup: installing s3rver $s3rver_version into $s3rver_dir (npm)"
		rm -rf "$s3rver_dir.tmp"
		mkdir -p "$s3rver_dir.tmp"
		if ! (cd "$s3rver_dir.tmp" && npm install --no-save --no-audit --no-fund \
			--loglevel=error --fetch-retries=1 --fetch-timeout=60000 \
			"s3rver@$s3rver_version"); then
			rm -rf "$s3rver_dir.tmp"
			echo "setup: npm could not install s3rver@$s3rver_version (is the npm registry reachable?); the t_s3_* tests need it" >&2
			exit 1
		fi
		rm -rf "$s3rver_dir"
		mv "$s3rver_dir.tmp" "$s3rver_dir"
	fi
fi
