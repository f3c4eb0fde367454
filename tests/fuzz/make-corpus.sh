#!/usr/bin/env bash
# Regenerate the generated part of the seed corpus (tests/fuzz/corpus/)
# from a fuzz build:   tests/fuzz/make-corpus.sh build-fuzz
# gen-seeds writes the binary and multi-file seeds (see gen-seeds.c); the
# capture of a real program is taken with ptctl's software source.  The
# hand-written seeds (config, proto, maps, lldb/*.json, timeline/*.jsonl
# not made here) and the regression inputs (*/crash-*, named after what
# they found) are kept as they are.
set -euo pipefail
build=$1
cd "$(dirname "$0")"
"../../$build/tests/fuzz/gen-seeds" corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A real program's first instructions (the dynamic loader), with TSC.
"../../$build/daemon/ptctl" trace --out "$tmp/cap" --tsc --max-insns 3000 \
	-- /bin/true >/dev/null
"../../$build/tests/fuzz/gen-seeds" --pack "$tmp/cap" corpus/capture/true.cap
