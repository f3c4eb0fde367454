#!/usr/bin/env bash
# Install what ptd needs (Debian 12, as root), build with -Werror, run every
# test; then build again with ASan+UBSan and run every test there too.
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
	python3 - "$dir/meson-logs/testlog.json" <<'PY' >>"$summary"
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print(t["result"])
PY
	return $rc
}

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
rc=0
run_suite build-ci || rc=1
run_suite build-ci-asan -Db_sanitize=address,undefined -Db_lundef=false || rc=1

passed=$(grep -c -x 'OK' "$summary" || true)
failed=$(grep -c -v -x -e 'OK' -e 'SKIP' "$summary" || true)
skipped=$(grep -c -x 'SKIP' "$summary" || true)
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $rc
