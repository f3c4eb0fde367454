#!/usr/bin/env bash
# The main job, end to end, as the README's first command runs it: start
# ptd (a socket in a temporary directory, no systemd needed), start a
# multi-threaded program, attach to it with ptctl and stream its
# instructions as JSON lines on stdout until the program exits, then stop
# ptd.  Usage: tests/live-demo.sh BUILD_DIR [--check]
#   --check: print a one-line verdict instead of the stream (the tests run
#            it so this command stays true).
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR [--check]}" && pwd)
check=${2:-}
tmp=$(mktemp -d /tmp/ptd-demo-XXXXXX)
ptd_pid= target=
cleanup() {
	local rc=$?
	[ -n "$target" ] && kill "$target" 2>/dev/null || true
	if [ -n "$ptd_pid" ]; then
		kill -TERM "$ptd_pid" 2>/dev/null || true
		wait "$ptd_pid" 2>/dev/null || true
	fi
	# a failure says what ptd said
	[ "$rc" = 0 ] || { echo "ptd's log:" >&2; cat "$tmp/ptd.log" >&2; }
	rm -rf "$tmp"
}
trap cleanup EXIT

cat > "$tmp/ptd.conf" <<CONF
socket_path = $tmp/ptd.sock
socket_mode = 0600
CONF
"$build/daemon/ptd" -c "$tmp/ptd.conf" 2> "$tmp/ptd.log" &
ptd_pid=$!
for _ in $(seq 100); do [ -S "$tmp/ptd.sock" ] && break; sleep 0.05; done
[ -S "$tmp/ptd.sock" ] || { cat "$tmp/ptd.log" >&2; exit 1; }

# computes in two threads, sleeps in a third, starts short-lived ones;
# checks its own results and exits 0 after 2 seconds of wall time
"$build/tests/progs/prog-attach" 2 > /dev/null &
target=$!

export PTD_SOCKET=$tmp/ptd.sock
if [ "$check" = --check ]; then
	"$build/daemon/ptctl" attach "$target" --follow > "$tmp/live.jsonl"
	wait "$target"; target=
	head -n 1 "$tmp/live.jsonl" | grep -q '"type":"hello"'
	tail -n 1 "$tmp/live.jsonl" | grep -q '"reason":"exited"'
	insns=$(grep -c '"type":"insn"' "$tmp/live.jsonl")
	tids=$(grep -o '"type":"insn","pid":[0-9]*,"tid":[0-9]*' \
		"$tmp/live.jsonl" | sort -u | wc -l)
	[ "$insns" -gt 1000 ] && [ "$tids" -ge 3 ]
	echo "ok: $insns insn records from $tids threads, hello first, bye last"
else
	"$build/daemon/ptctl" attach "$target" --follow
	wait "$target"; target=
fi
