/* SPDX-License-Identifier: MIT */
/*
 * A live session whose files a user harms (issue: no file a client
 * controls can fault ptd).  ptd decodes a traced process's file code from
 * sealed copies it made of the files (aspace/iscache.h), never from a
 * mapping of the user's file, so a library the user truncates under it:
 *  - before the attach: ptd maps what is left (nothing) and traces on;
 *  - while traced: the target itself dies of SIGBUS at its next call (its
 *    own harm, reported as its end), what ptd decoded before stays right,
 *    and ptd goes on serving.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/strutil.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"

/* A copy of the test library in the scratch directory, at @path. */
static bool copy_lib(char *path, size_t cap, const char *name)
{
	char src[1200];
	_cleanup_free_ char *data = NULL;
	size_t len;

	(void)snprintf(src, sizeof(src), "%s/libptdtarget.so", progs);
	(void)snprintf(path, cap, "%s/%s", tmpdir, name);
	return ptd_file_read_all(src, 64 << 20, &data, &len) == 0 &&
	       ptd_file_write_atomic(path, data, len) == 0;
}

/* prog-libloop LIB MODE, started as our child; returns its pid once it
 * has called into the library (it wrote "ready"), or -1. */
static pid_t start_libloop(const char *lib, const char *mode)
{
	char prog[1200], ready[6];
	int p[2];
	pid_t pid;

	(void)snprintf(prog, sizeof(prog), "%s/prog-libloop", progs);
	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (dup2(p[1], 3) < 0 || dup2(null, 1) < 0)
			_exit(127);
		execl(prog, "prog-libloop", lib, mode, (char *)NULL);
		_exit(127);
	}
	(void)close(p[1]);
	if (pid > 0 && read(p[0], ready, sizeof(ready)) != sizeof(ready)) {
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		pid = -1;
	}
	(void)close(p[0]);
	return pid;
}

static struct dconn *subscribe(const struct daemon *d, long s)
{
	struct dconn *c = dc_connect(d);
	char req[200];
	cJSON *r;

	if (!c)
		return NULL;
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"subscribe\","
		       "\"session\":%ld,\"kinds\":[\"insn\",\"error\"]}\n", s);
	r = dc_call(c, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	return c;
}

/* Does insn record @line come from module @lib? */
static bool in_module(const char *line, const char *lib)
{
	char want[1300];

	(void)snprintf(want, sizeof(want), "\"module\":\"%s\"", lib);
	return is_type(line, "insn") && strstr(line, want);
}

/* The daemon still serves: status answers, and a new session starts and
 * ends. */
static void check_serving(const struct daemon *d)
{
	cJSON *r = dc_call1(d, "{\"id\":1,\"cmd\":\"status\"}\n");
	int go = -1;
	pid_t t;
	long s;

	CHECK(dc_ok(r));
	cJSON_Delete(r);
	t = spawn_target(3600, &go);
	REQUIRE(t > 0);
	s = dc_attach(d, t, NULL);
	CHECK(s > 0);
	CHECK(s > 0 && dc_detach(d, s));
	(void)kill(t, SIGKILL);
	(void)wait_target(t, 10000);
	close(go);
}

static void test_truncated_before_attach(void)
{
	struct daemon d;
	struct dconn *sub;
	char lib[1100], *line;
	unsigned insns = 0, lib_insns = 0;
	pid_t t;
	long s;

	REQUIRE(copy_lib(lib, sizeof(lib), "libgone.so"));
	REQUIRE(daemon_start(&d, "before", ""));
	t = start_libloop(lib, "once");
	REQUIRE(t > 0);
	/* mapped, run once, then cut to nothing: the process never runs it
	 * again (it would die of SIGBUS) */
	REQUIRE(truncate(lib, 0) == 0);
	s = dc_attach(&d, t, NULL);
	REQUIRE(s > 0);
	sub = subscribe(&d, s);
	REQUIRE(sub);
	while (insns < 3000 && (line = dc_read_line(sub, 60000))) {
		insns += is_type(line, "insn");
		lib_insns += in_module(line, lib);
		if (is_type(line, "error"))
			fprintf(stderr, "  error record: %s\n", line);
		free(line);
	}
	CHECK(insns >= 3000);
	CHECK_EQ_INT(lib_insns, 0);
	CHECK(dc_detach(&d, s));
	dc_close(sub);
	check_serving(&d);
	CHECK_EQ_INT(kill(t, SIGUSR1), 0);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static void test_truncated_while_traced(void)
{
	struct daemon d;
	struct dconn *sub;
	char lib[1100], *line;
	unsigned lib_before = 0, lib_after = 0, errors = 0;
	bool cut = false, bye = false, bus = false;
	pid_t t;
	long s;

	REQUIRE(copy_lib(lib, sizeof(lib), "libcut.so"));
	REQUIRE(daemon_start(&d, "while", ""));
	t = start_libloop(lib, "always");
	REQUIRE(t > 0);
	s = dc_attach(&d, t, NULL);
	REQUIRE(s > 0);
	sub = subscribe(&d, s);
	REQUIRE(sub);
	while ((line = dc_read_line(sub, 120000))) {
		if (in_module(line, lib))
			cut ? lib_after++ : lib_before++;
		/* the library's code has run under ptd: cut it now */
		if (!cut && lib_before >= 200) {
			CHECK_EQ_INT(truncate(lib, 0), 0);
			cut = true;
		}
		if (is_type(line, "error")) {
			errors++;
			fprintf(stderr, "  error record: %s\n", line);
		}
		if (is_type(line, "bye")) {
			fprintf(stderr, "  %s\n", line);
			bye = true;
			bus = strstr(line, "\"reason\":\"exited\"") &&
			      strstr(line, "\"signal\":7");
		}
		free(line);
		if (bye)
			break;
	}
	fprintf(stderr, "  %u library instructions before the cut, %u after, "
		"%u error records\n", lib_before, lib_after, errors);
	CHECK(cut);
	CHECK(bye);
	/* the target's own harm: its next call into the library faulted */
	CHECK(bus);
	CHECK_EQ_INT(wait_target(t, 60000), 128 + SIGBUS);
	dc_close(sub);
	check_serving(&d);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* What becomes of the library after the session, before the record. */
enum harm {
	HARM_FIFO,	/* another file, a FIFO, at its path */
	HARM_CUT,	/* the same file, cut to nothing */
	HARM_REPLACED,	/* another (empty) file at its path */
};

/* A recorded session's bundle is written after the session ends, from
 * the files the process mapped: the user may have swapped a library for a
 * FIFO (which would block a reader for ever), cut it or replaced it by
 * then.  ptd refuses the record each way (bad_trace), never hangs on the
 * FIFO, names the file and what became of it, and serves on. */
static void record_after(const char *name, const char *dname,
			 enum harm harm)
{
	const bool fifo = harm == HARM_FIFO;
	struct daemon d;
	struct dconn *sub;
	char lib[1100], out[1200], err[1200], bundle[1200], req[200], *line;
	_cleanup_free_ char *msg = NULL;
	size_t len = 0;
	const char *args[] = { "record", NULL, bundle, NULL };
	char sid[32];
	bool bye = false;
	cJSON *r;
	pid_t t, p;
	long s;
	int rc;

	REQUIRE(copy_lib(lib, sizeof(lib), name));
	REQUIRE(daemon_start(&d, dname, ""));
	t = start_libloop(lib, "always");
	REQUIRE(t > 0);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"options\":{\"record\":true,\"max_insns\":20000}}\n",
		       (long)t);
	r = dc_call1(&d, req);
	REQUIRE(dc_ok(r));
	s = (long)dc_num(r, "session");
	cJSON_Delete(r);
	sub = subscribe(&d, s);
	REQUIRE(sub);
	while (!bye && (line = dc_read_line(sub, 120000))) {
		bye = is_type(line, "bye");
		free(line);
	}
	CHECK(bye);
	dc_close(sub);
	/* the session has ended; its library is harmed before the record
	 * (cut in place, the target may die of SIGBUS: it is killed below
	 * anyway) */
	if (harm == HARM_CUT) {
		REQUIRE(truncate(lib, 0) == 0);
	} else {
		REQUIRE(unlink(lib) == 0);
		if (fifo)
			REQUIRE(mkfifo(lib, 0600) == 0);
		else
			REQUIRE(ptd_file_write_atomic(lib, "", 0) == 0);
	}
	(void)snprintf(sid, sizeof(sid), "%ld", s);
	args[1] = sid;
	(void)snprintf(bundle, sizeof(bundle), "%s/%s-bundle", tmpdir, name);
	(void)snprintf(out, sizeof(out), "%s/%s.out", tmpdir, name);
	(void)snprintf(err, sizeof(err), "%s/%s.err", tmpdir, name);
	REQUIRE(mkdir(bundle, 0700) == 0);
	p = ptctl_spawn(&d, out, err, args);
	REQUIRE(p > 0);
	rc = wait_target(p, 60000);
	CHECK(rc >= 0);		/* answered: not stuck on the FIFO */
	(void)ptd_file_read_all(err, 1 << 16, &msg, &len);
	fprintf(stderr, "  record after the library %s: exit %d: %s", name,
		rc, msg ? msg : "");
	/* refused, naming the file and what became of it */
	CHECK(rc != 0);
	CHECK_CONTAINS(msg, "bad_trace");
	CHECK_CONTAINS(msg, lib);
	CHECK_CONTAINS(msg, harm == HARM_FIFO
				    ? "is a FIFO, not a regular file"
			    : harm == HARM_CUT
				    ? "shorter (0 bytes) than the traced "
				      "process mapped it"
				    : "is not the file the process mapped");
	check_serving(&d);
	(void)kill(t, SIGKILL);
	(void)wait_target(t, 10000);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static void test_record_fifo(void)
{
	record_after("librecfifo.so", "recfifo", HARM_FIFO);
}

static void test_record_cut(void)
{
	record_after("libreccut.so", "reccut", HARM_CUT);
}

static void test_record_replaced(void)
{
	record_after("librecrepl.so", "recrepl", HARM_REPLACED);
}

int main(void)
{
	harness_setup("/tmp/ptdhostile-XXXXXX");
	RUN(test_truncated_before_attach);
	RUN(test_truncated_while_traced);
	RUN(test_record_fifo);
	RUN(test_record_cut);
	RUN(test_record_replaced);
	return harness_done();
}
