#!/usr/bin/env bash
# Installs what datavofs needs to build and test, when it is missing.
# Usage: scripts/setup.sh [--test]   (--test adds the servers the tests use)
set -euo pipefail

build_pkgs=(build-essential pkg-config libfuse3-dev fuse3 libcurl4-openssl-dev
	libssl-dev libyaml-dev libxxhash-dev liburing-dev check python3)
test_pkgs=(nginx-light curl procps util-linux psmisc attr iproute2 clang)

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
