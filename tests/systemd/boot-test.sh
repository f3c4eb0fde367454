#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ptd under a real systemd: a Debian 12 root (debootstrap from this
# machine's configured apt mirror, cached outside the tree), booted with
# systemd-nspawn -b; ptd installed inside from the tree with the README's
# commands; then what a user does (README "Running ptd").
#
# Usage: boot-test.sh SRCDIR     (meson passes the source root)
#        boot-test.sh --prepare  (only build or refresh the cached root)
# Exit 77 (skip, with the reason) where it cannot run: not root, tools or
# mirror missing.
set -euo pipefail

ROOT_CACHE=${PTD_BOOT_ROOT:-/var/cache/ptd-test/bookworm-root}
# What the root holds besides minbase.  Changing this list rebuilds it.
# clang, llvm and bpftool build ptd's BPF programs, so that what watch
# rules and triggers do in the container is checked too.
PKGS="systemd systemd-sysv dbus procps passwd util-linux jq
gcc libc6-dev meson ninja-build pkg-config
libipt-dev libelf-dev libcjson-dev libbpf-dev libzydis-dev
clang llvm bpftool"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "boot-test: $*"; }

# The first http(s) URI of the apt source that carries bookworm.
mirror_url() {
	local f u
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		u=$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm( |\n|$)/ && !/security/ {
			if (match($0, /URIs: *[^ \n]+/)) {
				s = substr($0, RSTART, RLENGTH); sub(/URIs: */, "", s);
				print s; exit } }' "$f")
		[ -n "$u" ] && { echo "$u"; return; }
	done
	[ -r /etc/apt/sources.list ] &&
		awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' \
			/etc/apt/sources.list
}

ensure_root() {
	local want url tmp host port
	want=$(echo $PKGS | tr ' ' '\n' | sort | tr '\n' ' ')
	mkdir -p "$(dirname "$ROOT_CACHE")"
	# one build at a time (two worktrees' test runs on one machine)
	exec 9>"$ROOT_CACHE.lock"
	flock 9
	if [ -f "$ROOT_CACHE/.ptd-pkglist" ] &&
	   [ "$(cat "$ROOT_CACHE/.ptd-pkglist")" = "$want" ]; then
		return 0
	fi
	command -v debootstrap >/dev/null ||
		skip "debootstrap missing (tests/install-deps.sh installs it)"
	url=$(mirror_url)
	[ -n "$url" ] || skip "no bookworm apt source configured"
	host=${url#*://}; host=${host%%/*}
	port=80
	case "$url" in https:*) port=443 ;; esac
	timeout 20 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null ||
		skip "mirror $url not reachable (no cached root at $ROOT_CACHE)"
	log "building $ROOT_CACHE from $url (cached afterwards)"
	tmp="$ROOT_CACHE.tmp"
	rm -rf "$tmp"
	if ! debootstrap --variant=minbase \
		--include="$(echo $PKGS | tr ' ' ',')" \
		bookworm "$tmp" "$url" >"$tmp.log" 2>&1; then
		tail -20 "$tmp.log"
		rm -rf "$tmp"
		fail "debootstrap from $url failed (log above)"
	fi
	echo "$want" >"$tmp/.ptd-pkglist"
	rm -rf "$ROOT_CACHE"
	mv "$tmp" "$ROOT_CACHE"
	rm -f "$tmp.log"
}

if [ "${1:-}" = --prepare ]; then
	[ "$(id -u)" = 0 ] || skip "needs root (debootstrap)"
	ensure_root
	exit 0
fi
src=$(cd "${1:?usage: $0 SRCDIR [sanitize=...] | --prepare}" && pwd)
case "${2:-sanitize=none}" in
sanitize=none) ;;
*) skip "sanitizer build (${2#sanitize=}): the container builds and tests" \
	"its own plain ptd from the tree, the plain build's run covers it" ;;
esac
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, systemd-nspawn)"
command -v systemd-nspawn >/dev/null ||
	skip "systemd-nspawn missing (package systemd-container; tests/install-deps.sh installs it)"
command -v nsenter >/dev/null || skip "nsenter missing (util-linux)"
ensure_root

work=$(mktemp -d /tmp/ptd-boot-XXXXXX)
nspawn=
cleanup() {
	local rc=$?
	if [ -n "$nspawn" ] && kill -0 "$nspawn" 2>/dev/null; then
		[ -n "${sysd:-}" ] && inside 10 systemctl poweroff \
			>/dev/null 2>&1
		for _ in $(seq 100); do
			kill -0 "$nspawn" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$nspawn" 2>/dev/null || true
	fi
	wait 2>/dev/null || true
	case $rc in 0|77) ;; *) echo "--- container console (last lines):"; tail -15 "$work/console" ;; esac
	rm -rf "$work"
}
trap cleanup EXIT

# A copy of the tree as it is (tracked and untracked files, no build
# directories): what `meson setup build` inside sees is this tree.
mkdir "$work/src"
if git -C "$src" rev-parse --show-toplevel >/dev/null 2>&1; then
	git -C "$src" ls-files -z -co --exclude-standard |
		tar -C "$src" --null --ignore-failed-read -T - -cf - 2>/dev/null |
		tar -C "$work/src" -xf -
else
	tar -C "$src" --exclude='./build*' -cf - . | tar -C "$work/src" -xf -
fi
[ -f "$work/src/meson.build" ] || fail "could not copy the tree from $src"

# The cached root stays as it is: the container writes to a tmpfs overlay.
# CAP_BPF and CAP_PERFMON are outside nspawn's default set, and bpf and
# perf_event_open outside its system call filter: granted, so that the
# unit's watch rules and triggers load and attach (uprobes need
# CAP_PERFMON) as on a machine booted with systemd.
systemd-nspawn -q -D "$ROOT_CACHE" --volatile=overlay -b --register=no \
	--keep-unit --console=read-only --machine="ptd-boot-$$" \
	--capability=CAP_BPF,CAP_PERFMON \
	--system-call-filter="bpf perf_event_open" \
	--bind="$work/src:/src" \
	>"$work/console" 2>&1 &
nspawn=$!
sysd=
for _ in $(seq 200); do
	sysd=$(ps -o pid= --ppid "$nspawn" | tr -d " " | head -1 || true)
	[ -n "$sysd" ] && [ "$(cat /proc/$sysd/comm 2>/dev/null)" = systemd ] && break
	sysd=
	kill -0 "$nspawn" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$sysd" ]; then
	# nspawn gave up before the container's init ran: this machine
	# cannot run containers (no privileges for namespaces or mounts)
	kill -0 "$nspawn" 2>/dev/null ||
		skip "systemd-nspawn cannot start a container here:" \
			"$(grep -v '^$' "$work/console" | tail -3 | tr '\n' ' ')"
	fail "the container's systemd did not start in 20 s"
fi
# Run a command inside (under `timeout SECONDS`), as root, with a clean
# environment.
inside() {
	local t=$1; shift
	timeout "$t" nsenter -t "$sysd" -a env -i \
		PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		TERM=dumb "$@"
}
# Its manager answers once /run/systemd/private exists; then wait for boot.
for _ in $(seq 300); do
	[ -S "/proc/$sysd/root/run/systemd/private" ] && break
	sleep 0.1
done
state=$(inside 120 systemctl is-system-running --wait || true)
case "$state" in
running|degraded) log "container booted ($state), systemd is pid $sysd" ;;
*) fail "container did not boot: '$state'" ;;
esac
inside 600 bash /src/tests/systemd/inside.sh
