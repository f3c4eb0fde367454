#!/usr/bin/env bash
# One bounded libFuzzer run, as the "fuzz" test suite runs each harness:
#   run-fuzz.sh HARNESS WORKDIR SEEDDIR...
# WORKDIR is emptied, then gets the corpus the run grows (corpus/) and any
# crash, leak or timeout input (artifacts/).  libFuzzer first runs every
# seed (regression inputs included), then mutates for PTD_FUZZ_SECONDS
# seconds (default 20).  Exit status: 0, or 1 when an input crashed,
# leaked, hung (over PTD_FUZZ_TIMEOUT seconds, default 25) or broke an
# invariant of the harness; the input is then named in the output.
set -euo pipefail
harness=$1 work=$2
shift 2
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
# The harnesses that unpack inputs into directories create and remove
# thousands of files a second: on tmpfs where there is one.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	tmp=$(mktemp -d /dev/shm/ptd-fuzz.XXXXXX)
else
	tmp=$(mktemp -d "$work/tmp.XXXXXX")
fi
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
rc=0
# libFuzzer's own failure status is 77, which meson counts as a skip.
"$harness" -max_total_time="${PTD_FUZZ_SECONDS:-20}" \
	-timeout="${PTD_FUZZ_TIMEOUT:-25}" -error_exitcode=1 \
	-timeout_exitcode=1 -print_final_stats=1 \
	-artifact_prefix="$work/artifacts/" "$work/corpus" "$@" || rc=$?
if [ "$rc" = 77 ]; then
	rc=1
fi
exit "$rc"
