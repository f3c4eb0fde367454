#!/usr/bin/env bash
# Install what ptd needs (Debian 12, as root), build with -Werror, run every
# test; then build again with ASan+UBSan and run every test there too; then
# build the libFuzzer harnesses with clang (tests/fuzz) and run each for a
# bounded time over its seed corpus (PTD_FUZZ_SECONDS each, default 20).
# Prints one closing line "N passed, N failed, N skipped".
set -euo pipefail
cd "$(dirname "$0")/.."

./tests/install-deps.sh

run_suite() {
	local dir=$1; shift
	rm -rf "$dir"
	meson setup "$dir" -Dwerror=true "$@" >/dev/null
	if ! ninja -C "$dir"; then
		echo "BUILD FAILED ($dir)" >>"$summary"
		return 1
	fi
	local rc=0
	meson test -C "$dir" --print-errorlogs --num-processes 2 || rc=$?
	collect "$dir"
	return $rc
}

# The fuzz harnesses: a clang build (ASan+UBSan, libFuzzer) of only the
# harnesses, each run as a test of the 'fuzz' suite.  Without a clang that
# can link libFuzzer the step is one skipped result, with the reason.
run_fuzz() {
	local dir=$1
	local probe
	probe=$(mktemp --suffix=.c)
	echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)
	      { (void)d; (void)n; return 0; }' >"$probe"
	if ! command -v clang >/dev/null ||
	   ! clang -fsanitize=fuzzer,address,undefined "$probe" \
		-o "$probe.out" 2>/dev/null; then
		rm -f "$probe" "$probe.out"
		echo "fuzz: skipped: no clang that links libFuzzer (Debian:" \
		     "clang libclang-rt-dev)" | tee -a "$failures"
		echo SKIP >>"$summary"
		return 0
	fi
	rm -f "$probe" "$probe.out"
	rm -rf "$dir"
	# No -Dwerror here: clang warns where gcc does not (daemon/log.c).
	CC=clang meson setup "$dir" -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false >/dev/null
	if ! ninja -C "$dir" fuzzers; then
		echo "BUILD FAILED ($dir)" >>"$summary"
		return 1
	fi
	local rc=0 start=$SECONDS
	meson test -C "$dir" --no-rebuild --suite fuzz --print-errorlogs \
		--num-processes 2 || rc=$?
	echo "fuzz: $((SECONDS - start)) s for the bounded runs"
	collect "$dir"
	return $rc
}

# One result per line into $summary; each failure's name and the tail of
# its output into $failures, printed again at the very end so that a
# reader of only the last lines of a CI log still sees what broke.
collect() {
	local dir=$1
	python3 - "$dir/meson-logs/testlog.json" "$dir" "$failures" <<'PY' >>"$summary"
import json, sys
log, build, failures = sys.argv[1:4]
with open(failures, "a") as out:
    for line in open(log):
        t = json.loads(line)
        print(t["result"])
        if t["result"] in ("OK", "SKIP"):
            continue
        text = (t.get("stdout") or "") + (t.get("stderr") or "")
        tail = text.splitlines()[-40:]
        out.write("=== %s: %s %s after %.1fs; last %d lines:\n"
                  % (build, t["name"], t["result"], t.get("duration", 0),
                     len(tail)))
        out.write("".join(l + "\n" for l in tail))
PY
}

summary=$(mktemp)
failures=$(mktemp)
trap 'rm -f "$summary" "$failures"' EXIT
rc=0
run_suite build-ci || rc=1
run_suite build-ci-asan -Db_sanitize=address,undefined -Db_lundef=false || rc=1
run_fuzz build-ci-fuzz || rc=1

passed=$(grep -c -x 'OK' "$summary" || true)
failed=$(grep -c -v -x -e 'OK' -e 'SKIP' "$summary" || true)
skipped=$(grep -c -x 'SKIP' "$summary" || true)
cat "$failures"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $rc
