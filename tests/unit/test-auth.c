/* SPDX-License-Identifier: MIT */
/*
 * daemon/auth: peer credentials through real sockets, and the ptrace
 * rules against real processes of a real unprivileged user (ptdtest,
 * created if missing; "nobody" if useradd is not there), plus Yama and
 * odd proc files through a fake proc tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pidns.h"
#include "common/fileio.h"
#include "common/pidfd.h"
#include "common/strutil.h"
#include "daemon/auth.h"

static uid_t user_uid;
static gid_t user_gid;
static char tmpdir[] = "/tmp/ptd-test-auth-XXXXXX";

static pid_t children[32];
static size_t nchildren;

enum child_kind {
	CHILD_EXEC,		/* exec /bin/sleep: dumpable again */
	CHILD_NODUMP,		/* no exec, PR_SET_DUMPABLE 0 */
	CHILD_DUMP,		/* no exec, PR_SET_DUMPABLE 1 */
	CHILD_SAVED_ROOT,	/* no exec, saved uid 0 (setresuid) */
	CHILD_GID_ROOT,		/* no exec, gid 0, uid the user */
};

static void find_user(void)
{
	struct passwd *pw = getpwnam("ptdtest");

	if (!pw) {
		int r = system("useradd --system --no-create-home "
			       "--shell /usr/sbin/nologin ptdtest "
			       ">/dev/null 2>&1");
		pw = r == 0 ? getpwnam("ptdtest") : NULL;
	}
	if (!pw)
		pw = getpwnam("nobody");
	if (!pw || pw->pw_uid == 0)
		SKIP_ALL("no unprivileged user (ptdtest or nobody) to test "
			 "with");
	user_uid = pw->pw_uid;
	user_gid = pw->pw_gid;
	fprintf(stderr, "testing with user %s (uid %u gid %u)\n", pw->pw_name,
		(unsigned)user_uid, (unsigned)user_gid);
}

/* In a child: become @uid/@gid for good (as a login would). */
static void drop_to(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		_exit(126);
}

/* Start a process of @uid (0: root) and wait until it is set up (for
 * CHILD_EXEC: until it has exec'd).  It is killed at the end. */
static pid_t spawn(uid_t uid, gid_t gid, enum child_kind kind)
{
	int p[2];
	char c;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		(void)close(p[0]);
		switch (kind) {
		case CHILD_EXEC:
			drop_to(uid, gid);
			execl("/bin/sleep", "sleep", "120", (char *)NULL);
			_exit(127);
		case CHILD_NODUMP:
		case CHILD_DUMP:
			drop_to(uid, gid);
			/* Changing uid already cleared "dumpable" (the
			 * kernel's suid_dumpable); set it explicitly. */
			if (prctl(PR_SET_DUMPABLE, kind == CHILD_DUMP, 0, 0,
				  0) < 0)
				_exit(125);
			break;
		case CHILD_SAVED_ROOT:
			if (setgroups(0, NULL) < 0 ||
			    setresgid(gid, gid, gid) < 0 ||
			    setresuid(uid, uid, 0) < 0 ||
			    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
				_exit(126);
			break;
		case CHILD_GID_ROOT:
			drop_to(uid, 0);
			if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
				_exit(125);
			break;
		}
		(void)close(p[1]);
		for (;;)
			pause();
	}
	(void)close(p[1]);
	while (read(p[0], &c, 1) > 0)
		;
	(void)close(p[0]);
	if (nchildren < PTD_ARRAY_SIZE(children))
		children[nchildren++] = pid;
	return pid;
}

static void kill_children(void)
{
	for (size_t i = 0; i < nchildren; i++) {
		(void)kill(children[i], SIGKILL);
		(void)waitpid(children[i], NULL, 0);
	}
	nchildren = 0;
}

static struct ptd_peer peer_user(void)
{
	struct ptd_peer p = { .pid = 999999, .uid = user_uid,
			      .gid = user_gid };
	return p;
}

static const struct ptd_peer peer_root = { .pid = 1, .uid = 0, .gid = 0 };

/* ---- peer credentials ---- */

static void test_peer_socketpair(void)
{
	int sv[2];
	struct ptd_peer p;

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	memset(&p, 0xcd, sizeof(p));
	CHECK_EQ_INT(ptd_peer_get(sv[0], &p), 0);
	CHECK_EQ_INT(p.pid, getpid());
	CHECK_EQ_INT(p.uid, getuid());
	CHECK_EQ_INT(p.gid, getgid());
	(void)close(sv[0]);
	(void)close(sv[1]);
}

/* A process of the user connects to our listening socket: accept() and
 * SO_PEERCRED must name it, not us. */
static void test_peer_other_user(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int l, c, sync[2];
	struct ptd_peer p;
	pid_t pid;
	char b;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s", tmpdir);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(l >= 0);
	REQUIRE(bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(chmod(sa.sun_path, 0777) == 0);
	REQUIRE(listen(l, 1) == 0);
	REQUIRE(pipe2(sync, O_CLOEXEC) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int s;

		drop_to(user_uid, user_gid);
		s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&sa,
				     sizeof(sa)) < 0)
			_exit(1);
		(void)close(sync[1]);
		/* Wait for the parent to be done with us. */
		(void)read(sync[0], &b, 1);
		_exit(0);
	}
	(void)close(sync[0]);
	c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	CHECK(c >= 0);
	memset(&p, 0xcd, sizeof(p));
	CHECK_EQ_INT(ptd_peer_get(c, &p), 0);
	CHECK_EQ_INT(p.pid, pid);
	CHECK_EQ_INT(p.uid, user_uid);
	CHECK_EQ_INT(p.gid, user_gid);
	(void)close(sync[1]);
	(void)close(c);
	(void)close(l);
	(void)waitpid(pid, NULL, 0);
	(void)unlink(sa.sun_path);
}

static void test_peer_errors(void)
{
	int p[2];
	struct ptd_peer peer;

	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	CHECK_EQ_INT(ptd_peer_get(p[0], &peer), -ENOTSOCK);
	(void)close(p[0]);
	(void)close(p[1]);
	CHECK_EQ_INT(ptd_peer_get(-1, &peer), -EBADF);
}

static void test_may_see(void)
{
	struct ptd_peer u = peer_user();

	CHECK(ptd_auth_may_see(&peer_root, 0));
	CHECK(ptd_auth_may_see(&peer_root, user_uid));
	CHECK(ptd_auth_may_see(&u, user_uid));
	CHECK(!ptd_auth_may_see(&u, 0));
	CHECK(!ptd_auth_may_see(&u, user_uid + 1));
}

/* ---- real processes ---- */

static void test_real_processes(void)
{
	struct ptd_peer u = peer_user();
	struct ptd_diag d = { "" };
	pid_t root_p = spawn(0, 0, CHILD_EXEC);
	pid_t user_p = spawn(user_uid, user_gid, CHILD_EXEC);
	char want[256];

	REQUIRE(root_p > 0 && user_p > 0);
	/* The user may not trace root's process... */
	CHECK_EQ_INT(ptd_auth_may_trace(&u, root_p, NULL, &d), -EPERM);
	snprintf(want, sizeof(want), "pid %d belongs to uid 0, you are uid %u",
		 (int)root_p, (unsigned)user_uid);
	CHECK_EQ_STR(d.msg, want);
	/* ...but its own, and root may trace both. */
	CHECK_EQ_INT(ptd_auth_may_trace(&u, user_p, NULL, &d), 0);
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, user_p, NULL, &d), 0);
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, root_p, "/proc", &d), 0);
	/* Another unprivileged uid may not trace the user's process. */
	u.uid = user_uid + 1;
	CHECK_EQ_INT(ptd_auth_may_trace(&u, user_p, NULL, &d), -EPERM);
	CHECK_CONTAINS(d.msg, "belongs to uid");
	kill_children();
}

static void test_dumpable(void)
{
	struct ptd_peer u = peer_user();
	struct ptd_diag d = { "" };
	pid_t nodump = spawn(user_uid, user_gid, CHILD_NODUMP);
	pid_t dump = spawn(user_uid, user_gid, CHILD_DUMP);
	char want[128];

	REQUIRE(nodump > 0 && dump > 0);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, nodump, NULL, &d), -EPERM);
	snprintf(want, sizeof(want), "pid %d is not dumpable", (int)nodump);
	CHECK_EQ_STR(d.msg, want);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, dump, NULL, &d), 0);
	/* Root may trace a non-dumpable process (CAP_SYS_PTRACE). */
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, nodump, NULL, &d), 0);
	kill_children();
}

static void test_mixed_ids(void)
{
	struct ptd_peer u = peer_user();
	struct ptd_diag d = { "" };
	pid_t saved = spawn(user_uid, user_gid, CHILD_SAVED_ROOT);
	pid_t gid0 = spawn(user_uid, user_gid, CHILD_GID_ROOT);
	char want[256];

	REQUIRE(saved > 0 && gid0 > 0);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, saved, NULL, &d), -EPERM);
	snprintf(want, sizeof(want),
		 "pid %d runs with uids %u/%u/0 (real/effective/saved), you "
		 "are uid %u", (int)saved, (unsigned)user_uid,
		 (unsigned)user_uid, (unsigned)user_uid);
	CHECK_EQ_STR(d.msg, want);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, gid0, NULL, &d), -EPERM);
	snprintf(want, sizeof(want),
		 "pid %d runs with gids 0/0/0 (real/effective/saved), your "
		 "gid is %u", (int)gid0, (unsigned)user_gid);
	CHECK_EQ_STR(d.msg, want);
	kill_children();
}

static void test_no_such_process(void)
{
	struct ptd_peer u = peer_user();
	struct ptd_diag d = { "" };
	_cleanup_free_ char *max = NULL;
	uint64_t pid_max = 4194304;
	size_t len;
	pid_t z;
	char want[64];

	if (ptd_file_read_all("/proc/sys/kernel/pid_max", 64, &max, &len) ==
	    0) {
		max[strcspn(max, "\n")] = '\0';
		CHECK_EQ_INT(ptd_parse_u64(max, 10, &pid_max), 0);
	}
	/* No pid can be pid_max or above. */
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, (pid_t)pid_max, NULL, &d),
		     -ESRCH);
	snprintf(want, sizeof(want), "no such process: pid %d", (int)pid_max);
	CHECK_EQ_STR(d.msg, want);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 0, NULL, &d), -ESRCH);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, -1, NULL, &d), -ESRCH);

	/* A zombie: exited, not reaped. */
	z = fork();
	REQUIRE(z >= 0);
	if (z == 0)
		_exit(0);
	for (int i = 0; i < 1000; i++) {
		_cleanup_free_ char *st = NULL;
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/status", (int)z);
		if (ptd_file_read_all(path, 1 << 16, &st, &len) == 0 &&
		    strstr(st, "State:\tZ"))
			break;
		usleep(1000);
	}
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, z, NULL, &d), -ESRCH);
	snprintf(want, sizeof(want), "pid %d is a zombie", (int)z);
	CHECK_EQ_STR(d.msg, want);
	(void)waitpid(z, NULL, 0);
}

/* kthreadd is pid 2 when we see the initial pid namespace. */
static void test_kernel_thread(void)
{
	_cleanup_free_ char *comm = NULL;
	struct ptd_diag d = { "" };
	size_t len;

	if (ptd_file_read_all("/proc/2/comm", 64, &comm, &len) < 0 ||
	    strcmp(comm, "kthreadd\n") != 0) {
		fprintf(stderr, "note: pid 2 is not kthreadd here; the fake "
				"tree covers kernel threads\n");
		return;
	}
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, 2, NULL, &d), -ESRCH);
	CHECK_EQ_STR(d.msg, "pid 2 is a kernel thread");
}

/* ---- a fake proc tree ---- */

static char fake[256];

/* procroot/PID/{status,stat} of a fake process owned (as /proc shows
 * dumpable processes) by @owner. */
static void fake_proc(pid_t pid, pid_t ppid, const char *state, uid_t uid,
		      gid_t gid, uid_t owner, const char *comm,
		      unsigned long flags)
{
	char dir[512], path[600], text[1024];
	int n;

	snprintf(dir, sizeof(dir), "%s/%d", fake, (int)pid);
	(void)mkdir(dir, 0755);
	n = snprintf(text, sizeof(text),
		     "Name:\tfake\nUmask:\t0022\nState:\t%s\nTgid:\t%d\n"
		     "Pid:\t%d\nPPid:\t%d\nTracerPid:\t0\n"
		     "Uid:\t%u\t%u\t%u\t%u\nGid:\t%u\t%u\t%u\t%u\n"
		     "Groups:\t\nVmSize:\t  1000 kB\n",
		     state, (int)pid, (int)pid, (int)ppid, (unsigned)uid,
		     (unsigned)uid, (unsigned)uid, (unsigned)uid,
		     (unsigned)gid, (unsigned)gid, (unsigned)gid,
		     (unsigned)gid);
	snprintf(path, sizeof(path), "%s/status", dir);
	(void)ptd_file_write_atomic(path, text, (size_t)n);
	n = snprintf(text, sizeof(text),
		     "%d (%s) %c %d %d %d 0 -1 %lu 100 0 0 0 1 2 0 0 20 0 "
		     "1 0 100 1000 100\n",
		     (int)pid, comm, state[0], (int)ppid, (int)pid, (int)pid,
		     flags);
	snprintf(path, sizeof(path), "%s/stat", dir);
	(void)ptd_file_write_atomic(path, text, (size_t)n);
	snprintf(path, sizeof(path), "%s/mem", dir);
	(void)ptd_file_write_atomic(path, "", 0);
	(void)chown(path, owner, owner);
}

static void fake_file(const char *rel, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", fake, rel);
	(void)ptd_file_write_atomic(path, text, strlen(text));
}

static void fake_scope(const char *v)
{
	char dir[512];

	snprintf(dir, sizeof(dir), "%s/sys/kernel/yama", fake);
	if (!v) {
		snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir),
			 "/ptrace_scope");
		(void)unlink(dir);
		return;
	}
	fake_file("sys/kernel/yama/ptrace_scope", v);
}

/* The tree: 100 (the peer's process) -> 200 -> 300; 400 under 1;
 * 500 <-> 501 a loop; all the user's and dumpable. */
static void fake_tree(void)
{
	char dir[512];

	snprintf(fake, sizeof(fake), "%s/proc", tmpdir);
	(void)mkdir(fake, 0755);
	snprintf(dir, sizeof(dir), "%s/sys", fake);
	(void)mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/sys/kernel", fake);
	(void)mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/sys/kernel/yama", fake);
	(void)mkdir(dir, 0755);
	fake_proc(1, 0, "S (sleeping)", 0, 0, 0, "init", 0x400100);
	fake_proc(100, 1, "S (sleeping)", user_uid, user_gid, user_uid,
		  "ptctl", 0x400000);
	fake_proc(200, 100, "S (sleeping)", user_uid, user_gid, user_uid,
		  "sh", 0x400000);
	/* A comm holding ") S 1 1 1 0 -1 2097152": a parser that stops at
	 * the first ')' would see PF_KTHREAD. */
	fake_proc(300, 200, "R (running)", user_uid, user_gid, user_uid,
		  "x) S 1 1 1 0 -1 2097152", 0x400000);
	fake_proc(400, 1, "S (sleeping)", user_uid, user_gid, user_uid,
		  "other", 0x400000);
	fake_proc(500, 501, "S (sleeping)", user_uid, user_gid, user_uid,
		  "loop", 0x400000);
	fake_proc(501, 500, "S (sleeping)", user_uid, user_gid, user_uid,
		  "loop", 0x400000);
	fake_proc(600, 2, "I (idle)", 0, 0, 0, "kworker/0:1", 0x04208060);
	fake_proc(700, 100, "Z (zombie)", user_uid, user_gid, user_uid,
		  "dead", 0x400000);
	fake_proc(800, 100, "S (sleeping)", user_uid, user_gid, 0,
		  "secret", 0x400000);
}

static void test_yama(void)
{
	struct ptd_peer u = peer_user();
	struct ptd_diag d = { "" };

	u.pid = 100;
	fake_tree();

	/* No Yama, and scope 0: classic rules. */
	fake_scope(NULL);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 400, fake, &d), 0);
	fake_scope("0\n");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 400, fake, &d), 0);

	/* Scope 1: descendants only, at any depth, and the peer itself. */
	fake_scope("1\n");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 300, fake, &d), 0);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 200, fake, &d), 0);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 100, fake, &d), 0);
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 400, fake, &d), -EPERM);
	CHECK_EQ_STR(d.msg, "Yama ptrace_scope=1: pid 400 is not a "
			    "descendant of your process 100");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 500, fake, &d), -EPERM);
	CHECK_CONTAINS(d.msg, "pid 500 is not a descendant");
	/* An ancestor missing from the tree (exited) ends the walk. */
	u.pid = 4242;
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 300, fake, &d), -EPERM);
	u.pid = 100;
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, 400, fake, &d), 0);

	/* Scope 2: admin only. */
	fake_scope("2");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 300, fake, &d), -EPERM);
	{
		char want[128];

		snprintf(want, sizeof(want), "Yama ptrace_scope=2: only root "
			 "may trace, you are uid %u", (unsigned)user_uid);
		CHECK_EQ_STR(d.msg, want);
	}
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, 300, fake, &d), 0);

	/* Scope 3: nobody, root included, as the kernel does. */
	fake_scope("3\n");
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, 300, fake, &d), -EPERM);
	CHECK_EQ_STR(d.msg, "Yama ptrace_scope=3: ptrace is disabled for "
			    "everyone, root included");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 300, fake, &d), -EPERM);

	/* A scope that is not 0..3 is refused, not guessed. */
	fake_scope("4\n");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 300, fake, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "ptrace_scope: expected 0, 1, 2 or 3");
	fake_scope("1 \n");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 300, fake, &d), -PTD_EFORMAT);
	fake_scope("");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 300, fake, &d), -PTD_EFORMAT);
	fake_scope(NULL);
}

static void test_fake_states(void)
{
	struct ptd_peer u = peer_user();
	struct ptd_diag d = { "" };

	u.pid = 100;
	fake_tree();
	fake_scope(NULL);
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, 600, fake, &d), -ESRCH);
	CHECK_EQ_STR(d.msg, "pid 600 is a kernel thread");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 700, fake, &d), -ESRCH);
	CHECK_EQ_STR(d.msg, "pid 700 is a zombie");
	/* /proc/800/mem owned by root though its uids are the user's: the
	 * kernel's sign of a non-dumpable process. */
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 800, fake, &d), -EPERM);
	CHECK_EQ_STR(d.msg, "pid 800 is not dumpable");
	CHECK_EQ_INT(ptd_auth_may_trace(&u, 900, fake, &d), -ESRCH);
	CHECK_EQ_STR(d.msg, "no such process: pid 900");
}

/* Broken proc files are refused with the file named, never guessed. */
static void test_fake_malformed(void)
{
	static const struct {
		const char *status, *stat, *msg;
	} cases[] = {
		{ "State:\tS\nPPid:\t1\nGid:\t0\t0\t0\t0\n", NULL,
		  "/900/status: missing or malformed Uid: line" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t1\t1\nGid:\t0\t0\t0\t0\n",
		  NULL, "malformed Uid: line" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t1\t1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", NULL, "malformed Uid: line" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t-1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", NULL, "malformed Uid: line" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t4294967296\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", NULL, "malformed Uid: line" },
		{ "State:\tS\nPPid:\tx\nUid:\t1\t1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", NULL, "malformed PPid: line" },
		{ "State:\t?\nPPid:\t1\nUid:\t1\t1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", NULL, "malformed State: line" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t1\t1\t1\n", NULL,
		  "malformed Gid: line" },
		{ "State:\tS\nPPid:\t1\nXUid:\t1\t1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", NULL, "malformed Uid: line" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", "900 (x S 1 1 1 0 -1 0 0\n",
		  "/900/stat: cannot find the flags field" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", "900 (x) S 1 1\n",
		  "/900/stat: cannot find the flags field" },
		{ "State:\tS\nPPid:\t1\nUid:\t1\t1\t1\t1\n"
		  "Gid:\t0\t0\t0\t0\n", "900 (x) S 1 1 1 0 -1 0x40 0\n",
		  "/900/stat: cannot find the flags field" },
	};
	struct ptd_diag d = { "" };
	char dir[512];

	fake_tree();
	fake_scope(NULL);
	snprintf(dir, sizeof(dir), "%s/900", fake);
	(void)mkdir(dir, 0755);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		fake_file("900/status", cases[i].status);
		fake_file("900/stat", cases[i].stat ? cases[i].stat :
			  "900 (x) S 1 1 1 0 -1 0 0\n");
		fake_file("900/mem", "");
		CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, 900, fake, &d),
			     -PTD_EFORMAT);
		CHECK_CONTAINS(d.msg, cases[i].msg);
	}
	/* The same files made right are accepted (the cases above fail for
	 * the reason they name). */
	fake_file("900/status", "State:\tS\nPPid:\t1\nUid:\t1\t1\t1\t1\n"
				"Gid:\t0\t0\t0\t0\n");
	fake_file("900/stat", "900 (x) S 1 1 1 0 -1 0 0\n");
	CHECK_EQ_INT(ptd_auth_may_trace(&peer_root, 900, fake, &d), 0);
}

/* ---- pinning: a pidfd taken with the check ---- */

/* A thread that tells its id and waits for a byte on a pipe. */
struct tid_thread {
	pid_t tid;
	int fd;
};

static void *thread_tid(void *arg)
{
	struct tid_thread *t = arg;
	char c;

	__atomic_store_n(&t->tid, gettid(), __ATOMIC_RELEASE);
	if (read(t->fd, &c, 1) < 0) {
		/* released either way */
	}
	return NULL;
}

/* ptd_auth_pin checks as ptd_auth_may_trace does, on a process it holds
 * a pidfd of; the pidfd tells once the process is gone (reaped: its pid
 * free for another); a thread id is not a process. */
static void test_pin(void)
{
	struct ptd_peer u = peer_user();
	struct ptd_diag d = { "" };
	pid_t root_p = spawn(0, 0, CHILD_EXEC);
	pid_t user_p = spawn(user_uid, user_gid, CHILD_EXEC);
	struct tid_thread tt = { 0, -1 };
	pthread_t th;
	char want[128];
	int fd = -1, p[2];

	REQUIRE(root_p > 0 && user_p > 0);
	/* the rules are the same */
	CHECK_EQ_INT(ptd_auth_pin(&u, root_p, NULL, &fd, &d), -EPERM);
	CHECK_CONTAINS(d.msg, "belongs to uid 0");
	CHECK_EQ_INT(fd, -1);
	CHECK_EQ_INT(ptd_auth_pin(&u, user_p, NULL, &fd, &d), 0);
	CHECK(fd > 2);
	CHECK_EQ_INT(ptd_pidfd_alive(fd), 0);
	/* gone (reaped): the pidfd says so, though the number is unchanged */
	kill_children();
	CHECK_EQ_INT(ptd_pidfd_alive(fd), -ESRCH);
	(void)close(fd);
	CHECK_EQ_INT(ptd_auth_pin(&peer_root, user_p, NULL, &fd, &d), -ESRCH);
	CHECK_CONTAINS(d.msg, "no such process");
	/* a thread's id: refused, naming its process */
	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	tt.fd = p[0];
	REQUIRE(pthread_create(&th, NULL, thread_tid, &tt) == 0);
	while (!__atomic_load_n(&tt.tid, __ATOMIC_ACQUIRE))
		sched_yield();
	CHECK_EQ_INT(ptd_auth_pin(&peer_root, tt.tid, NULL, &fd, &d), -EINVAL);
	(void)snprintf(want, sizeof(want), "is a thread of process %d",
		       (int)getpid());
	CHECK_CONTAINS(d.msg, want);
	(void)close(p[1]);
	(void)pthread_join(th, NULL);
	(void)close(p[0]);
}

/* In a pid namespace of its own, a pinned process is reaped and its pid
 * given to another: /proc and kill() see the new process under the old
 * number, the pidfd does not; pinning that pid anew pins the new one. */
static int pin_reuse_in_ns(void *arg)
{
	unsigned before = check_failures;
	struct ptd_diag d = { "" };
	int fd = -1, fd2 = -1;
	pid_t a, b;

	(void)arg;
	a = pidns_sleeper();
	CHECK_EQ_INT(ptd_auth_pin(&peer_root, a, NULL, &fd, &d), 0);
	(void)kill(a, SIGKILL);
	(void)waitpid(a, NULL, 0);
	CHECK_EQ_INT(pidns_next_pid(a), 0);
	b = pidns_sleeper();
	CHECK_EQ_INT(b, a);
	CHECK_EQ_INT(kill(a, 0), 0);
	CHECK_EQ_INT(ptd_pidfd_alive(fd), -ESRCH);
	CHECK_EQ_INT(ptd_auth_pin(&peer_root, b, NULL, &fd2, &d), 0);
	CHECK_EQ_INT(ptd_pidfd_alive(fd2), 0);
	(void)kill(b, SIGKILL);
	(void)waitpid(b, NULL, 0);
	(void)close(fd);
	(void)close(fd2);
	return (int)(check_failures - before);
}

static void test_pin_reuse(void)
{
	char why[256];
	int r = pidns_run(pin_reuse_in_ns, NULL, why, sizeof(why));

	if (r < 0) {
		fprintf(stderr, "  skipped: %s\n", why);
		return;
	}
	CHECK_EQ_INT(r, 0);
}

int main(void)
{
	if (geteuid() != 0)
		SKIP_ALL("needs root: starts processes as another user");
	find_user();
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory");
	(void)chmod(tmpdir, 0755);
	RUN(test_peer_socketpair);
	RUN(test_peer_other_user);
	RUN(test_peer_errors);
	RUN(test_may_see);
	RUN(test_real_processes);
	RUN(test_dumpable);
	RUN(test_mixed_ids);
	RUN(test_no_such_process);
	RUN(test_kernel_thread);
	RUN(test_yama);
	RUN(test_fake_states);
	RUN(test_fake_malformed);
	RUN(test_pin);
	RUN(test_pin_reuse);
	kill_children();
	(void)ptd_rm_rf(tmpdir);
	return check_done();
}
