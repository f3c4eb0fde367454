#!/usr/bin/env bash
# Debian 12 packages ptd builds, tests and runs with.  Root only; a no-op
# when everything is there already.
set -euo pipefail
pkgs=(gcc meson ninja-build pkg-config python3
      libipt-dev libelf-dev libcjson-dev libbpf-dev libzydis-dev)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	if [ "$(id -u)" != 0 ]; then
		echo "install-deps: missing ${missing[*]}; run as root" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
