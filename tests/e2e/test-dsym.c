/* SPDX-License-Identifier: MIT */
/*
 * Symbols in the daemon, end to end through build/daemon/ptd: a live
 * session attached with options.symbols and a replay with "symbols" give
 * "sym" to the subscribers that ask for it, and only to them.
 *
 *  - live: every insn record of prog-symbols' own functions names the
 *    function that nm (run here) says holds its address, at the right
 *    offset; a subscriber that does not ask gets exactly the bytes of the
 *    one that does with its "sym" members taken out; "fields" with and
 *    without sym; asking a session without symbols is refused.
 *  - perf maps: JIT code (prog-jit at a fixed address) is named from a
 *    perf map owned by root, and not from one owned by another user,
 *    which an error record (context "symbols") names.
 *  - replay: `ptctl replay --symbols` names the functions; without it no
 *    record has "sym".
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"
#include "e2e/subscribed.h"
#include "common/fileio.h"

/* Where prog-jit puts its code (test-dsym's perf maps name it). */
#define JIT_ADDR 0x200000000ull

/* `sh -c 'read x; exec PROG [ARG]'` as uid and gid @uid: held until
 * released. */
static pid_t spawn_held_as(uid_t uid, const char *name, const char *arg,
			   int *ret_go)
{
	char prog[1100], c;
	int p[2], ready[2];
	pid_t pid;

	/* a test program, or an absolute path */
	if (name[0] == '/')
		(void)snprintf(prog, sizeof(prog), "%s", name);
	else
		(void)snprintf(prog, sizeof(prog), "%s/%s", progs, name);
	if (pipe2(p, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(p[0], 0);
		dup2(null, 1);
		if (uid != getuid() && (setgroups(0, NULL) < 0 ||
					setgid(uid) < 0 || setuid(uid) < 0))
			_exit(126);
		if (arg)
			execl("/bin/sh", "sh", "-c", "read x; exec \"$0\" \"$1\"",
			      prog, arg, (char *)NULL);
		else
			execl("/bin/sh", "sh", "-c", "read x; exec \"$0\"",
			      prog, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	/* returned once it runs sh as @uid (the exec closes @ready): ptd
	 * takes the process's owner at the attach */
	close(ready[1]);
	while (pid > 0 && read(ready[0], &c, 1) > 0)
		;
	close(ready[0]);
	*ret_go = p[1];
	return pid;
}

static pid_t spawn_held(const char *name, const char *arg, int *ret_go)
{
	return spawn_held_as(getuid(), name, arg, ret_go);
}

/* A subscriber reading its stream on a thread of its own. */
struct sub {
	struct dconn *c;
	char **lines;
	size_t n, cap;
	pthread_t th;
	bool running;
};

static void *sub_main(void *arg)
{
	struct sub *s = arg;
	char *line;

	while ((line = dc_read_line(s->c, 60000))) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1024;
			s->lines = realloc(s->lines, s->cap * sizeof(char *));
		}
		s->lines[s->n++] = line;
		if (is_type(line, "bye"))
			break;
	}
	return NULL;
}

/* Subscribe to @sid with the request members @extra (",..." or "");
 * NULL if refused (then *ret_code, if given, gets the error code). */
static struct sub *subscribe(struct daemon *d, long sid, const char *extra,
			     char *ret_code, size_t codesz)
{
	char req[1024];
	struct sub *s = calloc(1, sizeof(*s));
	cJSON *r;

	if (!s || !(s->c = dc_connect(d))) {
		CHECK_FAIL_("cannot connect to %s", d->sock);
		free(s);
		return NULL;
	}
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"subscribe\",\"session\":%ld%s}\n",
		       sid, extra);
	r = dc_call(s->c, req);
	if (!dc_ok(r)) {
		if (ret_code)
			(void)snprintf(ret_code, codesz, "%s: %s",
				       r ? dc_err_code(r) : "no response",
				       r ? dc_err_msg(r) : "");
		cJSON_Delete(r);
		dc_close(s->c);
		free(s);
		return NULL;
	}
	cJSON_Delete(r);
	s->running = pthread_create(&s->th, NULL, sub_main, s) == 0;
	return s;
}

static void sub_free(struct sub *s)
{
	if (!s)
		return;
	if (s->running)
		pthread_join(s->th, NULL);
	for (size_t i = 0; i < s->n; i++)
		free(s->lines[i]);
	free(s->lines);
	dc_close(s->c);
	free(s);
}

static long attach_with(struct daemon *d, pid_t pid, const char *opts)
{
	char req[512];
	cJSON *r;
	long id;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"options\":%s}\n", (long)pid, opts);
	r = dc_call1(d, req);
	if (r && !dc_ok(r) && (!strcmp(dc_err_code(r), "permission_denied") ||
			       !strcmp(dc_err_code(r), "no_intel_pt"))) {
		kill(pid, SIGKILL);
		SKIP_ALL("ptd cannot trace processes here (%s)",
			 dc_err_code(r));
	}
	if (!dc_ok(r)) {
		CHECK_FAIL_("attach %ld: %s: %s", (long)pid,
			    r ? dc_err_code(r) : "no response",
			    r ? dc_err_msg(r) : "");
		cJSON_Delete(r);
		return -1;
	}
	id = (long)dc_num(r, "session");
	cJSON_Delete(r);
	return id;
}

/* ---- nm and readelf, run here: what the test holds ptd to ---- */

struct nmsym {
	char name[64];
	uint64_t addr, size;
};

struct load {
	uint64_t off, vaddr, filesz;
};

struct elfview {
	struct nmsym sym[256];
	size_t nsym;
	struct load seg[16];
	size_t nseg;
};

static void read_elfview(const char *path, struct elfview *v)
{
	char cmd[1200], line[512];
	FILE *p;

	memset(v, 0, sizeof(*v));
	(void)snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", path);
	p = popen(cmd, "r");
	REQUIRE(p);
	while (fgets(line, sizeof(line), p) && v->nsym < 256) {
		struct nmsym *s = &v->sym[v->nsym];
		char type;

		/* "ADDR SIZE t name": functions with a size */
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %63s", &s->addr,
			   &s->size, &type, s->name) == 4 &&
		    (type == 't' || type == 'T') && s->size)
			v->nsym++;
	}
	pclose(p);
	(void)snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", path);
	p = popen(cmd, "r");
	REQUIRE(p);
	while (fgets(line, sizeof(line), p) && v->nseg < 16) {
		struct load *l = &v->seg[v->nseg];
		uint64_t paddr;

		if (sscanf(line, " LOAD 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64
			   " 0x%" SCNx64, &l->off, &l->vaddr, &paddr,
			   &l->filesz) == 4)
			v->nseg++;
	}
	pclose(p);
	REQUIRE(v->nsym > 0 && v->nseg > 0);
}

/* The nm function holding file offset @off, and @off's offset in it. */
static const struct nmsym *nm_at(const struct elfview *v, uint64_t off,
				 uint64_t *ret_delta)
{
	for (size_t i = 0; i < v->nseg; i++) {
		const struct load *l = &v->seg[i];
		uint64_t va;

		if (off < l->off || off - l->off >= l->filesz)
			continue;
		va = l->vaddr + (off - l->off);
		for (size_t k = 0; k < v->nsym; k++)
			if (va - v->sym[k].addr < v->sym[k].size) {
				*ret_delta = va - v->sym[k].addr;
				return &v->sym[k];
			}
	}
	return NULL;
}

static const char *str_member(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* @line without its ,"sym":"..." member (names here need no escapes). */
static void strip_sym(const char *line, char *out, size_t cap)
{
	const char *p = strstr(line, ",\"sym\":\"");
	const char *e;

	if (!p) {
		(void)snprintf(out, cap, "%s", line);
		return;
	}
	e = strchr(p + 8, '"');
	REQUIRE(e);
	(void)snprintf(out, cap, "%.*s%s", (int)(p - line), line, e + 1);
}

static size_t count_with(const struct sub *s, const char *needle)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		n += strstr(s->lines[i], needle) != NULL;
	return n;
}

/* A live session with symbols: four subscribers (symbols, none, fields
 * with sym, fields without), held to nm and to each other. */
static void test_live(void)
{
	struct daemon d;
	struct elfview ev;
	struct sub *all, *plain, *ipsym, *iptid;
	char prog[1100], conf[1200];
	size_t checked = 0, named = 0, leaf = 0, plt = 0, insns = 0, libc = 0;
	size_t ia = 0, ic = 0;
	pid_t t;
	long sid;
	int go;

	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs);
	read_elfview(prog, &ev);
	(void)snprintf(conf, sizeof(conf),
		       "subscriber_queue_size = 256M\n"
		       "debug_dir = %s/nodebug\nperf_map_dir = %s/nomaps\n",
		       tmpdir, tmpdir);
	REQUIRE(daemon_start(&d, "live", conf));
	t = spawn_held("prog-symbols", NULL, &go);
	REQUIRE(t > 0);
	sid = attach_with(&d, t, "{\"symbols\":true}");
	REQUIRE(sid > 0);
	all = subscribe(&d, sid, ",\"symbols\":true", NULL, 0);
	plain = subscribe(&d, sid, "", NULL, 0);
	ipsym = subscribe(&d, sid, ",\"fields\":[\"ip\",\"sym\"]", NULL, 0);
	iptid = subscribe(&d, sid, ",\"fields\":[\"ip\",\"tid\"]", NULL, 0);
	REQUIRE(all && plain && ipsym && iptid);
	release(&go);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	if (all->running)
		pthread_join(all->th, NULL);
	all->running = false;
	if (plain->running)
		pthread_join(plain->th, NULL);
	plain->running = false;
	if (ipsym->running)
		pthread_join(ipsym->th, NULL);
	ipsym->running = false;
	if (iptid->running)
		pthread_join(iptid->th, NULL);
	iptid->running = false;

	/* every insn of prog-symbols' own functions: nm's function, at
	 * nm's offset */
	for (size_t i = 0; i < all->n; i++) {
		cJSON *o;
		const char *mod, *sym, *offs;
		const struct nmsym *want;
		uint64_t off, delta;
		char exp[128];

		if (!is_type(all->lines[i], "insn"))
			continue;
		insns++;
		o = cJSON_Parse(all->lines[i]);
		REQUIRE(o);
		mod = str_member(o, "module");
		sym = str_member(o, "sym");
		offs = str_member(o, "offset");
		named += sym != NULL;
		libc += sym && mod && strstr(mod, "/libc.so");
		if (mod && offs && !strcmp(mod, prog) &&
		    sscanf(offs, "0x%" SCNx64, &off) == 1) {
			plt += sym && !strcmp(sym, "puts@plt+0x0");
			want = nm_at(&ev, off, &delta);
			if (want && (!strcmp(want->name, "sym_leaf") ||
				     !strcmp(want->name, "sym_middle") ||
				     !strcmp(want->name, "main"))) {
				(void)snprintf(exp, sizeof(exp),
					       "%s+0x%" PRIx64, want->name,
					       delta);
				if (!sym || strcmp(sym, exp))
					CHECK_FAIL_("offset %s: sym %s, nm "
						    "says %s", offs,
						    sym ? sym : "(none)", exp);
				checked++;
				leaf += !strcmp(want->name, "sym_leaf");
			}
		}
		cJSON_Delete(o);
	}
	fprintf(stderr, "  %zu insns, %zu named; %zu of prog-symbols' own "
		"functions checked against nm (%zu in sym_leaf)\n", insns,
		named, checked, leaf);
	CHECK(checked >= 60);
	CHECK(leaf >= 10);	/* 5 calls of 2+ instructions */
	CHECK_EQ_INT(plt, 1);
	CHECK(libc >= 100);	/* libc's .dynsym */

	/* the subscriber that did not ask: the same bytes, no sym */
	CHECK_EQ_U64(plain->n, all->n);
	CHECK_EQ_U64(count_with(plain, "\"sym\""), 0);
	for (size_t i = 1; i < all->n && i < plain->n; i++) {
		static char want[16384];

		strip_sym(all->lines[i], want, sizeof(want));
		if (strcmp(want, plain->lines[i])) {
			CHECK_FAIL_("line %zu: %s\n  vs %s", i, want,
				    plain->lines[i]);
			break;
		}
	}
	/* hello says which fields a subscriber gets when it chose */
	CHECK(all->n && strstr(all->lines[0], "\"sym\""));
	CHECK(plain->n && !strstr(plain->lines[0], "fields"));

	/* fields ip,sym: ip and sym of the same records, nothing else */
	for (ia = 0, ic = 0; ia < all->n && ic < ipsym->n;) {
		cJSON *a, *c;

		if (!is_type(all->lines[ia], "insn")) {
			ia++;
			continue;
		}
		if (!is_type(ipsym->lines[ic], "insn")) {
			ic++;
			continue;
		}
		a = cJSON_Parse(all->lines[ia]);
		c = cJSON_Parse(ipsym->lines[ic]);
		REQUIRE(a && c);
		CHECK_EQ_INT(cJSON_GetArraySize(c),
			     str_member(a, "sym") ? 3 : 2);
		CHECK_EQ_STR(str_member(c, "ip"), str_member(a, "ip"));
		if (str_member(a, "sym"))
			CHECK_EQ_STR(str_member(c, "sym"), str_member(a, "sym"));
		cJSON_Delete(a);
		cJSON_Delete(c);
		ia++;
		ic++;
	}
	CHECK(count_with(ipsym, "\"sym\":\"sym_leaf+0x0\"}") >= 5);
	/* fields ip,tid: no sym */
	CHECK(count_with(iptid, "\"type\":\"insn\"") == insns);
	CHECK_EQ_U64(count_with(iptid, "\"sym\""), 0);

	/* status counts the files read and the bytes they hold */
	{
		char req[128];
		cJSON *r, *y;

		(void)snprintf(req, sizeof(req), "{\"id\":2,\"cmd\":\"status\","
			       "\"session\":%ld}\n", sid);
		r = dc_call1(&d, req);
		y = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"),
					"symbols");
		CHECK(y != NULL);
		CHECK(cJSON_GetObjectItem(y, "files") &&
		      cJSON_GetObjectItem(y, "files")->valuedouble >= 3);
		CHECK(cJSON_GetObjectItem(y, "bytes") &&
		      cJSON_GetObjectItem(y, "bytes")->valuedouble > 0);
		cJSON_Delete(r);
	}
	sub_free(all);
	sub_free(plain);
	sub_free(ipsym);
	sub_free(iptid);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

static const char *progs_jit(void)
{
	static char p[1100];

	(void)snprintf(p, sizeof(p), "%s/prog-jit", progs);
	return p;
}

/* prog-jit run as uid @as, its code named from a perf map owned by
 * @owner: *ret_anon insn records in "[anon]", *ret_named of them named
 * jitted_answer; the stream in *ret_sub. */
static void jit_run(struct daemon *d, uid_t as, uid_t owner,
		    size_t *ret_anon, size_t *ret_named, struct sub **ret_sub)
{
	char map[1200], text[128], arg[32];
	struct sub *s;
	pid_t t;
	long sid;
	int go;

	(void)snprintf(arg, sizeof(arg), "%llx", (unsigned long long)JIT_ADDR);
	/* a copy @as can run wherever the build tree is */
	(void)snprintf(map, sizeof(map), "%s/prog-jit", tmpdir);
	REQUIRE(chmod(tmpdir, 0755) == 0);
	REQUIRE(copy_prog(progs_jit(), map, 0755));
	t = spawn_held_as(as, map, arg, &go);
	REQUIRE(t > 0);
	(void)snprintf(map, sizeof(map), "%s/maps/perf-%d.map", tmpdir,
		       (int)t);
	(void)snprintf(text, sizeof(text), "%llx 6 jitted_answer\n",
		       (unsigned long long)JIT_ADDR);
	REQUIRE(ptd_file_write_atomic(map, text, strlen(text)) == 0);
	REQUIRE(chown(map, owner, owner) == 0);
	sid = attach_with(d, t, "{\"symbols\":true}");
	REQUIRE(sid > 0);
	s = subscribe(d, sid, ",\"symbols\":true", NULL, 0);
	REQUIRE(s);
	release(&go);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	if (s->running)
		pthread_join(s->th, NULL);
	s->running = false;
	*ret_anon = count_with(s, "\"module\":\"[anon]\"");
	*ret_named = count_with(s, "\"sym\":\"jitted_answer+0x");
	*ret_sub = s;
}

static void test_perfmap_owner(void)
{
	struct daemon d;
	struct sub *s;
	char conf[1200], dir[700];
	size_t anon, named;

	(void)snprintf(dir, sizeof(dir), "%s/maps", tmpdir);
	REQUIRE(mkdir(dir, 0755) == 0);
	(void)snprintf(conf, sizeof(conf),
		       "subscriber_queue_size = 256M\nperf_map_dir = %s\n",
		       dir);
	REQUIRE(daemon_start(&d, "perfmap", conf));
	if (geteuid() != 0) {
		daemon_stop(&d);
		SKIP_ALL("giving a perf map to another user needs root");
	}
	/* The process runs as nobody (65534), traced by root.  Its own
	 * user's map is believed (not ptd's euid's: it is root), root's
	 * too; another user's is ignored, and the stream says so. */
	jit_run(&d, 65534, 65534, &anon, &named, &s);
	CHECK(anon >= 4);
	CHECK_EQ_U64(named, anon);
	CHECK_EQ_U64(count_with(s, "\"context\":\"symbols\""), 0);
	sub_free(s);
	jit_run(&d, 65534, 0, &anon, &named, &s);
	CHECK(anon >= 4);
	CHECK_EQ_U64(named, anon);
	sub_free(s);
	jit_run(&d, 65534, 65533, &anon, &named, &s);
	CHECK(anon >= 4);
	CHECK_EQ_U64(named, 0);
	CHECK_EQ_U64(count_with(s, "\"context\":\"symbols\""), 1);
	CHECK_EQ_U64(count_with(s, "is owned by uid 65533, not by uid 65534 "
				"or root: ignored"), 1);
	sub_free(s);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* The symbol tables count against user_memory_limit: with room for the
 * buffers and the subscriber and little more, some files' tables are
 * refused, each named in an error record, their code without sym; the
 * session runs on. */
static void test_memory_limit(void)
{
	struct daemon d;
	struct sub *s;
	char conf[1024];
	size_t refused, named;
	pid_t t;
	long sid;
	int go;

	/* a thread: 4k + 64k + 64k + 1M (the stream bound's minimum);
	 * the subscriber: 2 x 256k; tables: 256k of names at least each */
	(void)snprintf(conf, sizeof(conf),
		       "user_memory_limit = 2M\naux_buffer_size = 64k\n"
		       "data_buffer_size = 64k\nsubscriber_queue_size = 256k\n"
		       "debug_dir = %s/nodebug\nperf_map_dir = %s/nomaps\n",
		       tmpdir, tmpdir);
	REQUIRE(daemon_start(&d, "memlimit", conf));
	t = spawn_held("prog-symbols", NULL, &go);
	REQUIRE(t > 0);
	sid = attach_with(&d, t, "{\"symbols\":true}");
	REQUIRE(sid > 0);
	s = subscribe(&d, sid, ",\"symbols\":true,\"kinds\":[\"error\"]",
		      NULL, 0);
	REQUIRE(s);
	release(&go);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	if (s->running)
		pthread_join(s->th, NULL);
	s->running = false;
	refused = count_with(s, "bytes) were refused: over the memory limit");
	fprintf(stderr, "  %zu files' symbols refused\n", refused);
	CHECK(refused >= 1);
	CHECK_EQ_U64(count_with(s, "\"context\":\"symbols\""), refused);
	CHECK_EQ_U64(count_with(s, "\"error\":\"PTD_ELIMIT\""), refused);
	CHECK(count_with(s, "\"reason\":\"exited\"") == 1);
	/* what was kept stayed within the limit */
	{
		char req[128];
		cJSON *r, *y;

		(void)snprintf(req, sizeof(req), "{\"id\":2,\"cmd\":\"status\","
			       "\"session\":%ld}\n", sid);
		r = dc_call1(&d, req);
		y = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"),
					"symbols");
		named = y && cJSON_GetObjectItem(y, "bytes")
			? (size_t)cJSON_GetObjectItem(y, "bytes")->valuedouble
			: SIZE_MAX;
		CHECK(named < (2u << 20));
		CHECK(y && cJSON_GetObjectItem(y, "failures") &&
		      cJSON_GetObjectItem(y, "failures")->valuedouble ==
			      (double)refused);
		cJSON_Delete(r);
	}
	sub_free(s);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* Run ptctl @args; its stdout (malloc'd) or NULL; *ret_status. */
static char *ptctl_out(struct daemon *d, const char *const args[],
		       int *ret_status)
{
	char out[700], *text = NULL;
	size_t len = 0;

	(void)snprintf(out, sizeof(out), "%s/ptctl.out", d->dir);
	*ret_status = wait_exit(ptctl_spawn(d, out, NULL, args));
	if (ptd_file_read_all(out, 1u << 30, &text, &len) < 0)
		return NULL;
	return text;
}

/* Occurrences of @needle in @text (memmem over the known length: a
 * sanitizer's strstr measures the whole rest of the text each call). */
static size_t lines_with(const char *text, const char *needle)
{
	size_t n = 0, nl = strlen(needle);
	const char *p = text, *end = text + strlen(text), *q;

	while ((q = memmem(p, (size_t)(end - p), needle, nl))) {
		n++;
		p = q + 1;
	}
	return n;
}

/* Replays: --symbols names the functions; without it nothing has sym,
 * and a subscriber asking a session without symbols is refused. */
static void test_replay(void)
{
	struct daemon d;
	char prog[1100], cap[700], req[1200], code[512], *text;
	const char *trace[] = { "trace", "--out", cap, "--no-decode", "--",
				prog, NULL };
	const char *sym_args[] = { "replay", "--symbols", cap, NULL };
	const char *proj_args[] = { "replay", "--symbols", "--fields",
				    "ip,sym", cap, NULL };
	const char *plain_args[] = { "replay", cap, NULL };
	cJSON *r;
	long sid;
	int st;

	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs);
	(void)snprintf(req, sizeof(req),
		       "debug_dir = %s/nodebug\nperf_map_dir = %s/nomaps\n",
		       tmpdir, tmpdir);
	REQUIRE(daemon_start(&d, "replay", req));
	(void)snprintf(cap, sizeof(cap), "%s/cap", d.dir);
	text = ptctl_out(&d, trace, &st);
	REQUIRE(st == 0);
	free(text);

	text = ptctl_out(&d, sym_args, &st);
	CHECK_EQ_INT(st, 0);
	REQUIRE(text);
	CHECK(lines_with(text, "\"sym\":\"sym_leaf+0x") >= 10);
	CHECK(lines_with(text, "\"sym\":\"sym_middle+0x") >= 10);
	CHECK_EQ_U64(lines_with(text, "\"sym\":\"puts@plt+0x0\""), 1);
	free(text);

	text = ptctl_out(&d, proj_args, &st);
	CHECK_EQ_INT(st, 0);
	REQUIRE(text);
	CHECK(lines_with(text, "{\"type\":\"insn\",\"ip\":\"") > 1000);
	CHECK(lines_with(text, "\",\"sym\":\"sym_leaf+0x0\"}\n") >= 5);
	CHECK_EQ_U64(lines_with(text, "\"module\""), 0);
	free(text);

	text = ptctl_out(&d, plain_args, &st);
	CHECK_EQ_INT(st, 0);
	REQUIRE(text);
	CHECK(lines_with(text, "{\"type\":\"insn\"") > 1000);
	CHECK_EQ_U64(lines_with(text, "\"sym\""), 0);
	free(text);

	/* a session without symbols: asking for them is refused, whichever
	 * way; a plain subscriber then takes the replay to its end */
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"replay\","
		       "\"path\":\"%s\"}\n", cap);
	r = dc_call1(&d, req);
	REQUIRE(dc_ok(r));
	sid = (long)dc_num(r, "session");
	cJSON_Delete(r);
	CHECK(subscribe(&d, sid, ",\"symbols\":true", code, sizeof(code)) ==
	      NULL);
	CHECK_CONTAINS(code, "bad_request: symbols: session");
	CHECK_CONTAINS(code, "decodes without symbols");
	CHECK(subscribe(&d, sid, ",\"fields\":[\"ip\",\"sym\"]", code,
			sizeof(code)) == NULL);
	CHECK_CONTAINS(code, "bad_request: fields: sym: session");
	CHECK(dc_detach(&d, sid));

	/* (watch rules' sessions with symbols: test-watch) */
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* `ptctl attach PID --symbols --follow` as uid @uid into @out. */
static pid_t ptctl_as(struct daemon *d, uid_t uid, pid_t pid,
		      const char *out)
{
	char ptctl[1100], pidarg[32];
	pid_t c;

	/* a copy @uid can run wherever the build tree is */
	(void)snprintf(ptctl, sizeof(ptctl), "%s/ptctl", tmpdir);
	(void)snprintf(pidarg, sizeof(pidarg), "%d", (int)pid);
	c = fork();
	if (c == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		if (uid && (setgroups(0, NULL) < 0 || setgid(uid) < 0 ||
			    setuid(uid) < 0))
			_exit(126);
		execl(ptctl, ptctl, "--socket", d->sock, "attach", pidarg,
		      "--symbols", "--follow", (char *)NULL);
		_exit(127);
	}
	return c;
}

/* Symbol files are read with the client's rights: a stripped copy of
 * prog-symbols whose .gnu_debuglink names a debug file only root may
 * read.  Root's session names its static functions from the debug file;
 * nobody's does not (it gets .dynsym's and the PLT's), so a user can
 * neither read a root-only debug file's symbols nor test its CRC. */
static void test_client_rights(void)
{
	struct daemon d;
	char dir[] = "/tmp/ptdsym-rights-XXXXXX";
	char cmd[4096], prog[1100], out[700], sid[32], *text = NULL;
	size_t len = 0;
	uid_t who[2] = { 0, 65534 };

	if (geteuid() != 0)
		SKIP_ALL("acting as another user needs root");
	REQUIRE(mkdtemp(dir));
	REQUIRE(chmod(dir, 0755) == 0);
	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs);
	(void)snprintf(cmd, sizeof(cmd),
		       "cd %s && cp '%s' prog && "
		       "objcopy --only-keep-debug prog prog.debug && "
		       "strip --strip-all prog && "
		       "objcopy --add-gnu-debuglink=prog.debug prog && "
		       "chmod 0755 prog && chmod 0600 prog.debug",
		       dir, prog);
	if (system(cmd) != 0)
		SKIP_ALL("objcopy/strip could not make a stripped copy");
	REQUIRE(daemon_start(&d, "rights", "subscriber_queue_size = 256M\n"));
	/* the user reaches the socket (the harness makes it 0600 in 0700
	 * directories) */
	REQUIRE(chmod(tmpdir, 0755) == 0 && chmod(d.dir, 0755) == 0);
	(void)snprintf(cmd, sizeof(cmd), "%s/daemon/ptctl", build_root);
	(void)snprintf(out, sizeof(out), "%s/ptctl", tmpdir);
	REQUIRE(copy_prog(cmd, out, 0755));
	(void)snprintf(cmd, sizeof(cmd), "%s/run", d.dir);
	REQUIRE(chmod(cmd, 0755) == 0 && chmod(d.sock, 0666) == 0);
	(void)snprintf(prog, sizeof(prog), "%s/prog", dir);
	for (int i = 0; i < 2; i++) {
		pid_t t, c;
		int go;

		/* the target: the client's own process, held */
		t = spawn_held_as(who[i], prog, NULL, &go);
		REQUIRE(t > 0);
		(void)snprintf(out, sizeof(out), "%s/as-%u.out", d.dir,
			       (unsigned)who[i]);
		c = ptctl_as(&d, who[i], t, out);
		(void)snprintf(sid, sizeof(sid), "%d", i + 1);
		CHECK(wait_subscribed(d.sock, sid));
		release(&go);
		CHECK_EQ_INT(wait_target(t, 120000), 0);
		CHECK_EQ_INT(wait_exit(c), 0);
		REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
		fprintf(stderr, "  uid %u: %zu sym_leaf, %zu puts@plt\n",
			(unsigned)who[i],
			lines_with(text, "\"sym\":\"sym_leaf+0x"),
			lines_with(text, "\"sym\":\"puts@plt+0x0\""));
		/* symbols on for both: the PLT is named from the file */
		CHECK_EQ_U64(lines_with(text, "\"sym\":\"puts@plt+0x0\""), 1);
		if (who[i] == 0)
			CHECK(lines_with(text, "\"sym\":\"sym_leaf+0x") >= 10);
		else
			CHECK_EQ_U64(lines_with(text, "\"sym\":\"sym_leaf+"),
				     0);
		free(text);
		text = NULL;
	}
	CHECK_EQ_INT(daemon_stop(&d), 0);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)system(cmd);
}

int main(void)
{
	harness_setup("/tmp/ptdsym-XXXXXX");
	RUN(test_live);
	RUN(test_perfmap_owner);
	RUN(test_replay);
	RUN(test_client_rights);
	RUN(test_memory_limit);
	return harness_done();
}
