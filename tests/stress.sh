#!/usr/bin/env bash
# Run one test of a build N times, optionally beside CPU hogs, and print
# every failure with its log.  For hunting flaky tests: a test that fails
# once in fifty runs is a bug in ptd or in the test.
#
#   tests/stress.sh [-n RUNS] [-j HOGS] [-k] BUILD_DIR TEST_NAME
#
#   -n RUNS  runs (default 50)
#   -j HOGS  busy loops beside the test, one per CPU by default (0: none)
#   -k       keep going after the first failure (default: stop there)
#
# Exits 0 when every run passed, 1 otherwise; the last line is
# "stress TEST: N passed, N failed".
set -uo pipefail

runs=50
hogs=$(nproc)
keep=0
while getopts "n:j:k" o; do
	case $o in
	n) runs=$OPTARG ;;
	j) hogs=$OPTARG ;;
	k) keep=1 ;;
	*) sed -n '2,13p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 2 ] || ! [[ $runs =~ ^[0-9]+$ && $hogs =~ ^[0-9]+$ ]]; then
	sed -n '2,13p' "$0" >&2
	exit 2
fi
build=$1
name=$2
[ -d "$build" ] || { echo "stress: no build directory $build" >&2; exit 2; }

hog_pids=()
stop_hogs() {
	for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null; done
	wait "${hog_pids[@]}" 2>/dev/null
	hog_pids=()
}
trap stop_hogs EXIT
for ((i = 0; i < hogs; i++)); do
	(while :; do :; done) &
	hog_pids+=($!)
done

logs=$(mktemp -d)
passed=0
failed=0
for ((i = 1; i <= runs; i++)); do
	if meson test -C "$build" --no-rebuild --print-errorlogs "$name" \
		>"$logs/run$i.out" 2>&1; then
		passed=$((passed + 1))
		rm -f "$logs/run$i.out"
		continue
	fi
	failed=$((failed + 1))
	echo "=== stress $name: run $i of $runs FAILED; its log:"
	tail -n 80 "$build/meson-logs/testlog.txt"
	cp "$build/meson-logs/testlog.txt" "$logs/run$i.testlog"
	echo "=== (kept in $logs/run$i.testlog)"
	[ "$keep" = 1 ] || break
done
stop_hogs
[ "$failed" = 0 ] && rm -rf "$logs"
echo "stress $name: $passed passed, $failed failed"
[ "$failed" = 0 ]
