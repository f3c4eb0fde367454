#!/usr/bin/env bash
# Debian 12 packages ptd builds, tests and runs with.  Root only; a no-op
# when everything is there already.
set -euo pipefail
# clang, llvm and bpftool build the BPF programs of daemon/bpf (clang
# -target bpf, `bpftool gen skeleton`); without them ptd builds without
# watch rules.
# g++ builds prog-except, the C++ exception test-calls unwinds through.
pkgs=(gcc g++ meson ninja-build pkg-config python3
      libipt-dev libelf-dev libcjson-dev libbpf-dev libzydis-dev
      clang llvm bpftool)
# Independent decoders the tests hold ptd's output against: perf's own
# Intel PT decoder (perf script) and LLDB's (lldb-22 is in Debian 12's
# security archive; older LLDBs cannot load Intel PT bundles).  Installed
# when the archive has them; the tests that need them skip, with the
# reason, where they are missing.
# The boot test (tests/systemd/boot-test.sh) builds a Debian root with
# debootstrap and boots it with systemd-nspawn; it skips without them.
# clang's runtimes (libFuzzer is in libclang-rt-dev, only recommended by
# clang) build the fuzz harnesses of tests/fuzz; without them run-all.sh
# skips its fuzz step, saying so.
# libdw-dev (elfutils' DWARF reader) gives `ptctl coverage --format lcov`
# its source lines; lcov's genhtml is the independent reader test-coverage
# holds those tracefiles to.  Without them lcov is refused / not checked.
# valgrind's callgrind counts the test programs' instructions per function,
# which test-views holds ptd's flame graph to; headless Chromium renders
# and parses its SVG, and python3-jsonschema holds `ptctl export --format
# perfetto` to a JSON Schema of the Trace Event Format.
optional=(linux-perf lldb-22 debootstrap systemd-container libclang-rt-dev
	  valgrind libdw-dev lcov chromium python3-jsonschema)
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
want=()
for p in "${optional[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		want+=("$p")
done
if ((${#want[@]})) && [ "$(id -u)" = 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	((${#missing[@]})) || apt-get update -qq || true
	for p in "${want[@]}"; do
		apt-get install -y -qq --no-install-recommends "$p" ||
			echo "install-deps: $p not installable here; the tests" \
			     "that compare with it will skip" >&2
	done
fi
