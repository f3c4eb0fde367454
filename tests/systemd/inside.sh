#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run by boot-test.sh inside the booted container (nsenter into its
# systemd's namespaces), as root, with the source tree at /src: install
# ptd with the README's own commands, then what users do.  Prints one
# "ok: ..." line per check and "FAIL: ..." with what it saw per failure.
# A failure in the README's commands ends the test at once; the checks
# after them go on past a failure (each is independent enough to say
# something), and the test fails at the end.  ptd's journal follows any
# failure.
set -euo pipefail
cd /src
out=/root/boot-test
mkdir -p $out
progs=/src/build/tests/progs
export SYSTEMD_PAGER= SYSTEMD_COLORS=0

failed=0
journal() {
	echo "--- ptd's journal:"
	journalctl -u ptd.service -u ptd.socket --no-pager -o short-monotonic \
		-n 40 || true
}
fail() { echo "FAIL: $*"; journal; exit 1; }
# A failed check that the later ones do not depend on.
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
seen=0
okif() { [ "$failed" != "$seen" ] || ok "$@"; seen=$failed; }
ok() { echo "ok: $*"; }

# The README's "Running ptd" block, line by line, as written.
mapfile -t readme < <(awk '/^## Running ptd/ { f = 1 } f && /^```sh/ { b = 1; next }
	b && /^```/ { exit } b' README.md)
[ "${#readme[@]}" = 5 ] || fail "README's Running ptd block has ${#readme[@]} lines, this test knows 5"
run_readme() {	# N: run line N (1-based) of the block
	echo "+ ${readme[$1 - 1]}" >&2
	bash -o pipefail -c "${readme[$1 - 1]}"
}

# A target with pid $1 in this pid namespace (the README attaches to 4242).
# nspawn mounts /proc/sys read-only: ns_last_pid is written through a proc
# mounted in a mount namespace of its own; nothing forks after the write.
start_with_pid() {
	local want=$1 d; shift
	d=$(mktemp -d)
	unshare -m --propagation private sh -c "mount -t proc proc $d &&
		echo $((want - 1)) > $d/sys/kernel/ns_last_pid"
	"$@" > /dev/null &
	target=$!
	rmdir "$d"
	[ "$target" = "$want" ] || fail "target got pid $target instead of $want"
}

# Every thread of $1 released: no TracerPid left.
no_tracer() {
	local t bad=
	for t in /proc/$1/task/*/status; do
		[ "$(awk '/^TracerPid:/ { print $2 }' "$t" 2>/dev/null || echo 0)" = 0 ] ||
			bad="$bad ${t%/status}"
	done
	[ -z "$bad" ] || { echo "traced still:$bad"; return 1; }
}

# --- the README, literally ---------------------------------------------
t0=$SECONDS
run_readme 1 > $out/build.log 2>&1 || { tail -30 $out/build.log; fail "README line 1 (build and install)"; }
ok "README line 1: built and installed in $((SECONDS - t0)) s"
run_readme 2 || fail "README line 2 (sysusers, enable the socket)"
systemctl is-active -q ptd.socket || fail "ptd.socket not active"
! systemctl is-active -q ptd.service || fail "ptd.service runs before anyone connected"
[ "$(stat -c %a:%G /run/ptd/ptd.sock)" = 660:ptd ] || fail "socket is $(stat -c %a:%G /run/ptd/ptd.sock), want 660:ptd"
ok "README line 2: ptd.socket listening (0660, group ptd), ptd.service not started"

start_with_pid 4242 $progs/prog-attach 4
run_readme 3 > $out/attach.out || fail "README line 3 (attach 4242)"
[ "$(cat $out/attach.out)" = 1 ] || fail "attach printed '$(cat $out/attach.out)', the README says 1"
systemctl is-active -q ptd.service || fail "ptd.service not started by the connection"
ok "README line 3: session 1; ptd.service started by socket activation"
run_readme 4 > $out/stream.json || fail "README line 4 (stream | jq)"
jq -s -e '.[0].type == "hello" and .[-1].type == "bye" and
	.[-1].reason == "exited" and ([.[] | select(.type == "insn")] | length) > 1000' \
	$out/stream.json > /dev/null || fail "stream: want hello, >1000 insn, bye exited: $(head -c 300 $out/stream.json)"
ok "README line 4: hello, $(jq -s '[.[] | select(.type == "insn")] | length' $out/stream.json) insn records, bye exited"
wait "$target" || fail "target 4242 failed after the session"
run_readme 5 > $out/line5.out || fail "README line 5 (list, status, detach): $(cat $out/line5.out)"
ok "README line 5: list, status, detach answered"

# --- users ---------------------------------------------------------------
useradd -m -G ptd alice
useradd -m bob
# setpriv executes (runuser would fork, and $! would not be the target)
as() { local u=$1; shift; setpriv --reuid "$u" --regid "$u" --init-groups -- "$@"; }
# as, in the background: `as_bg USER CMD... &` leaves the command's pid in $!
as_bg() { local u=$1; shift; exec setpriv --reuid "$u" --regid "$u" --init-groups -- "$@"; }
# Until the background subshell has become the target (setpriv changed
# its user and executed the program), the pid in $! is root's shell: an
# attach then is refused as root's process.  Wait for it (5 s at most).
started_as() {
	local pid=$1 u=$2 i
	for i in $(seq 500); do
		if [ "$(stat -c %U /proc/$pid 2>/dev/null)" = "$u" ] &&
		   [ "$(readlink /proc/$pid/exe)" = "$progs/prog-attach" ]; then
			return 0
		fi
		sleep 0.01
	done
	bad "pid $pid did not become $u's prog-attach"
}

as_bg bob $progs/prog-attach 60 &
bob_target=$!
as_bg alice $progs/prog-attach 60 &
alice_target=$!
started_as $bob_target bob
started_as $alice_target alice

# bob is not in group ptd: the socket refuses him.
if as bob ptctl list > $out/bob.out 2>&1; then bad "bob (not in group ptd) was served"; fi
okif "bob (not in group ptd) refused: $(head -c 120 $out/bob.out)"

# alice may not trace bob's process.
if as alice ptctl attach $bob_target > $out/refuse.out 2>&1; then bad "alice attached to bob's process"; fi
grep -q permission_denied $out/refuse.out || bad "refusal says: $(cat $out/refuse.out)"
okif "alice refused bob's process: $(head -c 160 $out/refuse.out)"

# alice attaches and detaches her own; every thread is released when
# detach answers.
for i in $(seq 10); do
	s=$(as alice ptctl attach $alice_target) || bad "alice's attach $i"
	sleep 0.3
	as alice ptctl detach "$s" > /dev/null || bad "alice's detach $i"
	no_tracer $alice_target || bad "detach of session $s answered with threads still traced"
done
okif "alice: 10 attach/detach cycles, no TracerPid left when detach answered"

# A record into a directory alice may not write is refused to her at
# once, not when the session ends (and then only in the journal).
as alice mkdir -m 0555 /home/alice/ro
mkdir -m 0777 /var/tmp/roots
for d in /home/alice/ro /var/tmp/roots; do
	if as alice ptctl attach --record $d $alice_target > $out/rec-bad.id 2> $out/rec-bad.out; then
		bad "record into $d accepted"
	fi
	grep -q "bad_directory" $out/rec-bad.out || bad "record into $d: $(cat $out/rec-bad.out)"
	okif "record into $d refused: $(grep bad_directory $out/rec-bad.out | head -c 200)"
	# the session was attached before the record request: detach it
	s=$(cat $out/rec-bad.id)
	[ -z "$s" ] || as alice ptctl detach "$s" > /dev/null || bad "detach $s"
done

# alice records her process into a directory of hers.
as alice mkdir /home/alice/rec
as_bg alice $progs/prog-attach 2 > /dev/null &
rec_target=$!
started_as $rec_target alice
rec=$(as alice ptctl attach --record /home/alice/rec $rec_target 2> $out/rec.out) ||
	bad "alice's attach --record: $(cat $out/rec.out)"
wait $rec_target || bad "recorded target failed"
for _ in $(seq 100); do
	[ -e /home/alice/rec/ptd-bundle.json ] && break
	sleep 0.1
done
[ -e /home/alice/rec/ptd-bundle.json ] ||
	bad "no bundle in /home/alice/rec 10 s after the session ended ($(ls -A /home/alice/rec)); status: $(as alice ptctl status "$rec" | grep record:)"
owners=$(find /home/alice/rec -mindepth 1 -printf '%u\n' | sort -u | tr '\n' ' ')
[ "$owners" = "alice " ] || bad "bundle files belong to: $owners"
as alice ptctl status "$rec" | grep -q "record: written" ||
	bad "status of recorded session $rec: $(as alice ptctl status "$rec" 2>&1)"
okif "alice's --record: bundle written, $(find /home/alice/rec -type f | wc -l) files, all alice's"

# root and alice replay it.
ptctl replay /home/alice/rec > $out/replay-root.json 2> $out/replay-root.err ||
	bad "root's replay: $(cat $out/replay-root.err)"
jq -s -e '.[-1].type == "bye" and ([.[] | select(.type == "insn")] | length) > 1000' \
	$out/replay-root.json > /dev/null || bad "root's replay: $(tail -c 300 $out/replay-root.json)"
okif "root's replay: $(grep -c '"type":"insn"' $out/replay-root.json) insn records"
as alice ptctl replay /home/alice/rec > $out/replay-alice.json 2> $out/replay-alice.err ||
	bad "alice's replay: $(cat $out/replay-alice.err)"
okif "alice's replay: $(grep -c '"type":"insn"' $out/replay-alice.json) insn records"

# captures: where the unit lets ptd write, and a clear refusal elsewhere.
if ptctl attach --capture /var/tmp/cap $alice_target > $out/cap.out 2>&1; then
	bad "capture into read-only /var/tmp accepted"
fi
grep -q bad_directory $out/cap.out && grep -q /var/lib/ptd $out/cap.out ||
	bad "capture refusal says: $(cat $out/cap.out)"
okif "capture under /var/tmp refused: $(head -c 200 $out/cap.out)"
s=$(ptctl attach --capture /var/lib/ptd/cap $alice_target 2> $out/cap.out) ||
	bad "capture into /var/lib/ptd/cap: $(cat $out/cap.out)"
sleep 0.5
ptctl detach "$s" > /dev/null || true
[ -d /var/lib/ptd/cap ] || bad "no capture in /var/lib/ptd/cap"
okif "capture into /var/lib/ptd/cap written ($(ls /var/lib/ptd/cap | wc -l) files)"

# BPF under the unit, in the container's PID namespace (the programs name
# processes by its ids).  A trigger on a function is a uprobe, which
# kernels with "perf: Require CAP_SYS_ADMIN for uprobes" place only for
# CAP_SYS_ADMIN, outside the unit's set: refused saying so (where the
# kernel places it anyway, it works at once); with ptd(8)'s drop-in,
# alice's snapshot-mode session takes a snapshot each time a thread of
# her process runs collatz().
trigger_snapshots() {	# 0 if alice's trigger took snapshots
	local s
	s=$(as alice ptctl attach --snapshot --trigger snapshot:prog-attach:collatz \
		$alice_target 2> $out/trig.out) || return 1
	for _ in $(seq 100); do
		as alice ptctl status "$s" > $out/trig.status 2>&1 || true
		grep -q "trigger .*: [1-9][0-9]* hits, [1-9][0-9]* snapshots" $out/trig.status && break
		sleep 0.1
	done
	as alice ptctl detach "$s" > /dev/null || bad "detach of the trigger's session $s"
	no_tracer $alice_target || bad "threads still traced after the trigger's session"
	grep -q "trigger .*: [1-9][0-9]* hits, [1-9][0-9]* snapshots" $out/trig.status ||
		{ echo "no snapshot in 10 s: $(cat $out/trig.status)" > $out/trig.out; return 1; }
}
if trigger_snapshots; then
	ok "this kernel places uprobes for CAP_PERFMON: alice's trigger under the plain unit: $(grep -o 'trigger .*' $out/trig.status | head -c 120)"
else
	grep -q "needs CAP_SYS_ADMIN" $out/trig.out && grep -q "drop-in" $out/trig.out ||
		bad "alice's trigger under the plain unit: $(cat $out/trig.out)"
	okif "alice's uprobe trigger under the plain unit refused: $(head -c 160 $out/trig.out)"
	mkdir -p /etc/systemd/system/ptd.service.d
	printf '[Service]\nCapabilityBoundingSet=CAP_SYS_ADMIN\nAmbientCapabilities=CAP_SYS_ADMIN\n' \
		> /etc/systemd/system/ptd.service.d/uprobes.conf
	systemctl daemon-reload && systemctl restart ptd || bad "restart with the drop-in"
	trigger_snapshots || bad "alice's trigger with ptd(8)'s drop-in: $(cat $out/trig.out)"
	okif "alice's uprobe trigger with ptd(8)'s CAP_SYS_ADMIN drop-in: $(grep -o 'trigger .*' $out/trig.status | head -c 120)"
	rm /etc/systemd/system/ptd.service.d/uprobes.conf
	systemctl daemon-reload && systemctl restart ptd || bad "restart without the drop-in"
fi
# A watch rule: alice's run of prog-hello is traced from its first
# instruction, its output and exit status unchanged.
as_bg alice timeout 60 ptctl watch --exe $progs/prog-hello --follow \
	> $out/watch.jsonl 2> $out/watch.err &
watcher=$!
for _ in $(seq 100); do
	as alice ptctl list 2> /dev/null | grep -q "prog-hello" && break
	sleep 0.1
done
as alice ptctl list 2> /dev/null | grep -q "prog-hello" ||
	bad "alice's watch rule not listed: $(cat $out/watch.err)"
rc=0
hello=$(as alice $progs/prog-hello x) || rc=$?
[ "$hello" = "hello 2" ] && [ "$rc" = 22 ] ||
	bad "prog-hello under alice's rule said '$hello', exit $rc (want 'hello 2', 22)"
for _ in $(seq 100); do
	grep -q '"type":"session_end"' $out/watch.jsonl && break
	sleep 0.1
done
grep -q '"type":"session_end"' $out/watch.jsonl ||
	bad "alice's rule stream has no session_end: $(tail -c 300 $out/watch.jsonl) $(cat $out/watch.err)"
n=$(grep -c '"type":"insn"' $out/watch.jsonl || true)
[ "${n:-0}" -gt 1000 ] || bad "alice's rule stream: ${n:-0} insn records"
kill $watcher 2> /dev/null || true
wait $watcher 2> /dev/null || true
okif "alice's watch rule under the unit: prog-hello traced from its exec (${n:-0} insn records), its output and exit status unchanged"

# systemctl stop ptd: the subscriber gets bye "shutdown", the target lives.
s=$(as alice ptctl attach $alice_target) || bad "alice's attach before stop"
as_bg alice ptctl stream "$s" > $out/shutdown.json 2> $out/shutdown.err &
stream=$!
sleep 1
systemctl stop ptd
wait $stream || true
tail -n 1 $out/shutdown.json | jq -e '.type == "bye" and .reason == "shutdown"' > /dev/null ||
	bad "subscriber's last record: $(tail -n 1 $out/shutdown.json)"
kill -0 $alice_target || bad "target died with ptd's stop"
no_tracer $alice_target || bad "threads still traced after ptd stopped"
okif "systemctl stop ptd: subscriber got bye shutdown, target alive and released"
kill $bob_target $alice_target || true
wait $alice_target 2>/dev/null || true

score=$(systemd-analyze security ptd.service 2>/dev/null |
	sed -n 's/.*Overall exposure level for ptd.service: *\([0-9.]* [A-Z]*\).*/\1/p')
ok "systemd-analyze security ptd.service: $score"
[ "$failed" = 0 ] || { journal; echo "$failed checks failed"; exit 1; }
echo "all checks passed"
