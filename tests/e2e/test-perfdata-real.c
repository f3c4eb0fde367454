/* SPDX-License-Identifier: MIT */
/*
 * Real Intel PT recordings from a real machine (tests/data/perfdata-real,
 * with their source and licence): `perf record` on a Skylake laptop, in
 * file and pipe mode, several events with different sample types,
 * synthesized records with sample id 0, per-CPU AUX data whose file order
 * is not time order.  The traced binaries are not here, so what is checked
 * is what can be without them: the decode succeeds (exit 3: error records
 * only for missing images), every AUX byte is read and every PSB found
 * (counted by this test's own walk of the file), each missing image is
 * named once with the build-id the file lists, time never goes back within
 * a thread and nothing is reported lost that was not, and the pipe-mode
 * file gives the same records read by path and from stdin.
 *
 * Then random damage to the parts of these files that the per-CPU and
 * multi-event paths read (event tables, sample ids, record times and
 * order): no crash, and every refusal says where.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/bytes.h"
#include "common/fileio.h"
#include "e2e/run-cmd.h"
#include "input/input.h"
#include "perfdata/decode.h"
#include "perfdata/read.h"
#include "unit/pdbuild.h"

static char ptctl[1024], data_dir[1024], workdir[256];

/* ---- this test's own walk of a perf.data file ---- */

struct walk {
	uint64_t aux_bytes;	/* AUXTRACE payload bytes */
	unsigned psbs;		/* PSB packets inside them */
	size_t nrecs;
	uint64_t rec_off[4096];	/* record offsets (not payloads) */
	uint16_t rec_size[4096];
};

static unsigned count_psb(const uint8_t *p, uint64_t n)
{
	static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
					 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
	unsigned k = 0;
	uint64_t i;

	for (i = 0; i + 16 <= n; i++)
		if (!memcmp(p + i, psb, 16)) {
			k++;
			i += 15;
		}
	return k;
}

/* File mode: the data section named at header offset 40; pipe mode: right
 * after the 16-byte header.  AUXTRACE (71) records are followed by their
 * payload. */
static bool walk_file(const uint8_t *d, size_t len, struct walk *w)
{
	uint64_t off, end;

	memset(w, 0, sizeof(*w));
	if (len < 16 || memcmp(d, "PERFILE2", 8))
		return false;
	if (ptd_get_u64(d + 8) == 16) {
		off = 16;
		end = len;
	} else {
		off = ptd_get_u64(d + 40);
		end = off + ptd_get_u64(d + 48);
	}
	while (off + 8 <= end && end <= len) {
		uint32_t type = ptd_get_u32(d + off);
		uint16_t size = (uint16_t)(d[off + 6] | d[off + 7] << 8);

		if (size < 8 || w->nrecs == 4096)
			return false;
		w->rec_off[w->nrecs] = off;
		w->rec_size[w->nrecs++] = size;
		if (type == 71) {
			uint64_t n = ptd_get_u64(d + off + 8);

			w->aux_bytes += n;
			w->psbs += count_psb(d + off + size, n);
			off += n;
		}
		off += size;
	}
	return off == end;
}

/* ---- what ptctl decode printed ---- */

struct seen {
	cJSON *hello, *bye;
	unsigned records, errors, groups;
	unsigned lost;		/* error records saying something was lost */
	unsigned tsc_back;	/* a thread's tsc lower than its last */
	char noimage[16][160];	/* each ENOIMAGE error's context */
	unsigned nnoimage;
};

static void read_records(const char *out, struct seen *s)
{
	const char *p = out;
	bool in_group = false;
	long last_tid = -1;
	uint64_t last_tsc = 0;

	memset(s, 0, sizeof(*s));
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		cJSON *j = cJSON_ParseWithLength(p, n);
		const char *type = cJSON_GetStringValue(
			cJSON_GetObjectItem(j, "type"));
		cJSON *tsc = cJSON_GetObjectItem(j, "tsc");
		cJSON *tid = cJSON_GetObjectItem(j, "tid");
		bool su = cJSON_IsTrue(cJSON_GetObjectItem(j, "status_update"));

		p = nl ? nl + 1 : NULL;
		if (!j || !type) {
			CHECK_FAIL_("not a record: %.*s", (int)n, p);
			cJSON_Delete(j);
			continue;
		}
		s->records++;
		/* A PSB+ shows as a run of status updates. */
		if (su && !in_group)
			s->groups++;
		in_group = su;
		if (cJSON_IsString(tsc) && cJSON_IsNumber(tid)) {
			uint64_t v = strtoull(tsc->valuestring, NULL, 16);

			if ((long)tid->valuedouble != last_tid)
				last_tsc = 0;
			if (v < last_tsc)
				s->tsc_back++;
			last_tsc = v;
			last_tid = (long)tid->valuedouble;
		}
		if (!strcmp(type, "hello")) {
			s->hello = j;
			continue;
		}
		if (!strcmp(type, "bye")) {
			s->bye = j;
			continue;
		}
		if (!strcmp(type, "error")) {
			const char *err = cJSON_GetStringValue(
				cJSON_GetObjectItem(j, "error"));
			const char *ctx = cJSON_GetStringValue(
				cJSON_GetObjectItem(j, "context"));
			const char *msg = cJSON_GetStringValue(
				cJSON_GetObjectItem(j, "message"));

			s->errors++;
			if (msg && (strstr(msg, "lost") ||
				    strstr(msg, "reorder")))
				s->lost++;
			if (ctx && (strstr(ctx, "lost") ||
				    strstr(ctx, "reorder")))
				s->lost++;
			if (err && !strcmp(err, "PTD_ENOIMAGE") && ctx &&
			    s->nnoimage < 16)
				(void)snprintf(s->noimage[s->nnoimage++], 160,
					       "%s", ctx);
		}
		cJSON_Delete(j);
	}
}

static void seen_free(struct seen *s)
{
	cJSON_Delete(s->hello);
	cJSON_Delete(s->bye);
}

static uint64_t hexfield(cJSON *o, const char *name)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, name));

	return v ? strtoull(v, NULL, 16) : UINT64_MAX;
}

/* The build-id quipper lists for @path ("" if none). */
static void listed_buildid(const char *path, char out[41])
{
	char f[4200], *txt = NULL, *line;
	size_t len;

	out[0] = 0;
	(void)snprintf(f, sizeof(f), "%s/perf.data.intel_pt-4.14.buildids",
		       data_dir);
	if (ptd_file_read_all(f, 1 << 20, &txt, &len) < 0)
		return;
	for (line = txt; line && *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = 0;
		if (strlen(line) > 41 && !strcmp(line + 41, path)) {
			memcpy(out, line, 40);
			out[40] = 0;
		}
		line = nl ? nl + 1 : NULL;
	}
	free(txt);
}

struct recording {
	const char *file;
	int pid;
	bool buildids;		/* the file carries build-ids */
};

/* The images perf report -D lists as the process's executable MMAP2s
 * (perf 6.1, on the file-mode recording; the pipe-mode one maps the
 * same), and the kernel. */
static const char *const images[] = {
	"/usr/bin/coreutils", "/lib64/ld-2.23.so", "[vdso]",
	"/lib64/libselinux.so.1", "/lib64/libattr.so.1.1.0",
	"/lib64/librt-2.23.so", "/lib64/libpthread-2.23.so",
	"/lib64/libc-2.23.so", "/lib64/libpcre.so.1.2.8",
	"/lib64/libdl-2.23.so",
};

static void check_recording(const struct recording *rc, const char *in,
			    struct seen *s)
{
	char path[4200], *d = NULL;
	const char *args[] = { "decode", in ? "-" : path, NULL };
	struct walk *w = calloc(1, sizeof(*w));
	size_t len = 0, i, k;
	struct run r;

	REQUIRE(w);
	(void)snprintf(path, sizeof(path), "%s/%s", data_dir, rc->file);
	REQUIRE(ptd_file_read_all(path, 1 << 24, &d, &len) == 0);
	REQUIRE(walk_file((const uint8_t *)d, len, w));
	free(d);
	r = run_cmd_in(ptctl, args, workdir, in ? path : NULL);
	/* Error records only for the missing images (exit 3), not 2. */
	CHECK_EQ_INT(r.status, 3);
	CHECK_CONTAINS(r.err, "decode errors");
	read_records(r.out, s);
	REQUIRE(s->hello && s->bye);
	CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(s->hello,
							       "pid")),
		     rc->pid);
	/* Every AUX byte read, every PSB found. */
	CHECK_EQ_U64(hexfield(s->bye, "trace_bytes"), w->aux_bytes);
	CHECK_EQ_INT(s->groups, w->psbs);
	CHECK(w->psbs >= 10);
	CHECK_EQ_U64(hexfield(s->bye, "errors"), s->errors);
	/* Time never goes back within a thread; nothing lost. */
	CHECK_EQ_INT(s->tsc_back, 0);
	CHECK_EQ_INT(s->lost, 0);
	/* Each missing image named once, with its build-id. */
	CHECK_EQ_INT(s->nnoimage, 1 + sizeof(images) / sizeof(images[0]));
	for (i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
		char want[200], bid[41];
		unsigned n = 0;

		(void)snprintf(want, sizeof(want), "image '%s' (build-id ",
			       images[i]);
		listed_buildid(images[i], bid);
		for (k = 0; k < s->nnoimage; k++) {
			if (!strstr(s->noimage[k], want))
				continue;
			n++;
			if (rc->buildids)
				CHECK_CONTAINS(s->noimage[k], bid);
		}
		if (n != 1)
			CHECK_FAIL_("%s named %u times", images[i], n);
	}
	for (k = 0, i = 0; k < s->nnoimage; k++)
		i += strstr(s->noimage[k], "kernel code") != NULL;
	CHECK_EQ_INT(i, 1);
	run_free(&r);
	free(w);
}

static const struct recording file_rec = { "perf.data.intel_pt-4.14", 3174,
					   true };
static const struct recording pipe_rec = {
	"perf.data.piped.intel_pt-4.14", 3587, false };

static void test_file_mode(void)
{
	struct seen s;

	check_recording(&file_rec, NULL, &s);
	seen_free(&s);
}

/* The pipe-mode recording, by path and on stdin: the same records. */
static void test_pipe_mode(void)
{
	struct seen a, b;
	char path[4200], *out_a = NULL;
	const char *args[] = { "decode", path, NULL };
	const char *args_in[] = { "decode", "-", NULL };
	struct run r;

	check_recording(&pipe_rec, NULL, &a);
	seen_free(&a);
	check_recording(&pipe_rec, "-", &b);
	seen_free(&b);
	(void)snprintf(path, sizeof(path), "%s/%s", data_dir, pipe_rec.file);
	r = run_cmd(ptctl, args, workdir);
	out_a = r.out;
	r.out = NULL;
	run_free(&r);
	r = run_cmd_in(ptctl, args_in, workdir, path);
	REQUIRE(out_a && r.out);
	/* Past the hello record (it names the input) they are the same. */
	CHECK(strchr(out_a, '\n') && strchr(r.out, '\n'));
	if (strchr(out_a, '\n') && strchr(r.out, '\n'))
		CHECK(!strcmp(strchr(out_a, '\n'), strchr(r.out, '\n')));
	free(out_a);
	run_free(&r);
}

/* ---- damage ---- */

static int fz_record(void *ctx, const struct ptd_record *r)
{
	(void)ctx;
	(void)r;
	return 0;
}

/* Damage one record's bytes (not a payload): its header, the event table
 * (pipe mode's HEADER_ATTR records), a sample id, a time; or swap two
 * records of one size, which puts them out of order. */
static void damage(struct ptd_buf *b, const struct walk *w, uint32_t *seed)
{
	size_t i = (size_t)rand_r(seed) % w->nrecs;
	uint64_t off = w->rec_off[i];
	uint16_t size = w->rec_size[i];

	switch (rand_r(seed) % 4) {
	case 0: {	/* the trailing sample id: id, cpu, time */
		size_t at = off + size - 8u * (1u + (unsigned)rand_r(seed) % 4);

		if (at >= off + 8 && at + 8 <= b->len) {
			uint64_t v = rand_r(seed) % 3 == 0 ? 0 :
				     ptd_get_u64(b->data + at) +
				     (uint64_t)(rand_r(seed) % 9) - 4;

			memcpy(b->data + at, &v, 8);
		}
		break;
	}
	case 1: {	/* two records of the same size trade places */
		size_t j = (size_t)rand_r(seed) % w->nrecs;
		uint8_t tmp[256];

		if (w->rec_size[j] == size && size <= sizeof(tmp) && i != j &&
		    w->rec_off[j] + size <= b->len && off + size <= b->len) {
			memcpy(tmp, b->data + off, size);
			memcpy(b->data + off, b->data + w->rec_off[j], size);
			memcpy(b->data + w->rec_off[j], tmp, size);
		}
		break;
	}
	default: {	/* a byte of the record (header included) */
		size_t at = off + (size_t)rand_r(seed) % size;

		if (at < b->len)
			b->data[at] = rand_r(seed) % 2 ? (uint8_t)rand_r(seed)
				      : b->data[at] ^ (uint8_t)(1u << (rand_r(seed) % 8));
		break;
	}
	}
	if (rand_r(seed) % 8 == 0)	/* and the event table of a file */
		pd_mutate(b, seed);
}

static void test_damage(void)
{
	const struct recording *recs[2] = { &file_rec, &pipe_rec };
	unsigned parsed = 0, decoded = 0, n;
	uint32_t seed = 4242;
	int k;

	for (k = 0; k < 2; k++) {
		char path[4200], *d = NULL;
		size_t len = 0;
		struct walk *w = calloc(1, sizeof(*w));

		REQUIRE(w);
		(void)snprintf(path, sizeof(path), "%s/%s", data_dir,
			       recs[k]->file);
		REQUIRE(ptd_file_read_all(path, 1 << 24, &d, &len) == 0);
		REQUIRE(walk_file((const uint8_t *)d, len, w));
		for (n = 0; n < 250; n++) {
			struct ptd_buf b = { 0 };
			struct ptd_perfdata *pd = NULL;
			struct ptd_diag diag = { "" };
			struct ptd_input_opts o;
			struct ptd_input_sink sink = { NULL, fz_record, NULL,
						       NULL, NULL };
			int r;

			put(&b, d, len);
			damage(&b, w, &seed);
			r = ptd_perfdata_parse(b.data, b.len, "damaged", &pd,
					       &diag);
			if (r < 0) {
				/* A refusal names the file and the offset. */
				if (r != -ENOMEM &&
				    !strstr(diag.msg, "damaged: offset 0x"))
					CHECK_FAIL_("refusal without an offset: "
						    "%s", diag.msg);
			} else {
				parsed++;
				memset(&o, 0, sizeof(o));
				o.sysroot = "/nonexistent";
				diag.msg[0] = 0;
				r = ptd_perfdata_decode_parsed(pd, &o, &sink,
							       NULL, &diag);
				if (r == 0)
					decoded++;
				else if (r < 0 && !diag.msg[0])
					CHECK_FAIL_("decode refused (%d) with "
						    "no message", r);
			}
			ptd_perfdata_free(pd);
			ptd_buf_fini(&b);
		}
		free(d);
		free(w);
	}
	fprintf(stderr, "damage: %u of 500 parsed, %u decoded\n", parsed,
		decoded);
	CHECK(parsed > 50 && decoded > 50);
}

/* ---- perf record files made here ---- */

/* One sideband record as perf script --show-mmap-events --show-task-events
 * prints it, from "PERF_RECORD_" on (perf 6.1's formats); 0 for records
 * it does not print so. */
static int perf_line(const struct ptd_perf_event *e, char *out, size_t n)
{
	const struct ptd_perf_mmap *m = &e->u.mmap;

	switch (e->type) {
	case PERF_RECORD_MMAP:
		return snprintf(out, n, "PERF_RECORD_MMAP %d/%d: [%#" PRIx64
				"(%#" PRIx64 ") @ %#" PRIx64 "]: %c %s",
				(int)m->pid, (int)m->tid, m->addr, m->len,
				m->pgoff, m->exec ? 'x' : 'r', m->filename);
	case PERF_RECORD_MMAP2:
		if (m->has_build_id)
			return 0;	/* not made here */
		return snprintf(out, n, "PERF_RECORD_MMAP2 %d/%d: [%#" PRIx64
				"(%#" PRIx64 ") @ %#" PRIx64 " %02x:%02x %"
				PRIu64 " %" PRIu64 "]: %c%c%c%c %s",
				(int)m->pid, (int)m->tid, m->addr, m->len,
				m->pgoff, m->maj, m->min, m->ino,
				m->ino_generation, m->prot & 1 ? 'r' : '-',
				m->prot & 2 ? 'w' : '-', m->prot & 4 ? 'x' : '-',
				m->flags & 1 ? 's' : 'p', m->filename);
	case PERF_RECORD_COMM:
		return snprintf(out, n, "PERF_RECORD_COMM%s: %s:%d/%d",
				e->u.comm.exec ? " exec" : "", e->u.comm.comm,
				(int)e->u.comm.pid, (int)e->u.comm.tid);
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		return snprintf(out, n, "PERF_RECORD_%s(%d:%d):(%d:%d)",
				e->type == PERF_RECORD_FORK ? "FORK" : "EXIT",
				(int)e->u.task.pid, (int)e->u.task.tid,
				(int)e->u.task.ppid, (int)e->u.task.ptid);
	default:
		return 0;
	}
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct lines {
	char *v[4096];
	size_t n;
};

static void lines_free(struct lines *l)
{
	while (l->n)
		free(l->v[--l->n]);
}

/* What ptd's reader gives of @file's sideband. */
static bool ptd_sideband(const char *file, struct lines *l)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	size_t i;

	if (ptd_perfdata_open(file, &pd, &diag) < 0) {
		CHECK_FAIL_("ptd refuses %s: %s", file, diag.msg);
		return false;
	}
	for (i = 0; i < pd->nrecs && l->n < 4096; i++) {
		struct ptd_perf_event e;
		char buf[4200];

		if (pd->recs[i].attr < 0 ||
		    ptd_perfdata_event(pd, i, &e, &diag) < 0)
			continue;
		if (perf_line(&e, buf, sizeof(buf)) > 0)
			l->v[l->n++] = strdup(buf);
	}
	ptd_perfdata_free(pd);
	qsort(l->v, l->n, sizeof(l->v[0]), strp_cmp);
	return true;
}

/* What perf script prints of it. */
static bool perf_sideband(const char *file, struct lines *l)
{
	const char *args[] = { "script", "-i", file, "--show-mmap-events",
			       "--show-task-events", NULL };
	struct run r = run_cmd("/usr/bin/perf", args, workdir);
	char *p = r.out;

	if (r.status != 0) {
		CHECK_FAIL_("perf script on %s: exit %d: %.300s", file,
			    r.status, r.err ? r.err : "");
		run_free(&r);
		return false;
	}
	while (p && *p && l->n < 4096) {
		char *nl = strchr(p, '\n');
		char *rec;

		if (nl)
			*nl = 0;
		rec = strstr(p, "PERF_RECORD_");
		if (rec && (!strncmp(rec + 12, "MMAP", 4) ||
			    !strncmp(rec + 12, "COMM", 4) ||
			    !strncmp(rec + 12, "FORK", 4) ||
			    !strncmp(rec + 12, "EXIT", 4)))
			l->v[l->n++] = strdup(rec);
		p = nl ? nl + 1 : NULL;
	}
	run_free(&r);
	qsort(l->v, l->n, sizeof(l->v[0]), strp_cmp);
	return true;
}

/* perf record @args -o FILE (or -o - > FILE) -- @prog; 0 if it ran. */
static int record(const char *const *args, bool pipe, const char *prog,
		  const char *arg, const char *file)
{
	const char *argv[24] = { "record", "-q" };
	char out[512];
	size_t n = 2;
	struct run r;
	int st;

	for (; *args; args++)
		argv[n++] = *args;
	argv[n++] = "-o";
	argv[n++] = pipe ? "-" : file;
	argv[n++] = "--";
	argv[n++] = prog;
	if (arg)
		argv[n++] = arg;
	argv[n] = NULL;
	r = run_cmd("/usr/bin/perf", argv, workdir);
	if (r.status == 0 && pipe) {
		(void)snprintf(out, sizeof(out), "%s/stdout", workdir);
		if (rename(out, file) < 0)
			r.status = -1;
	}
	st = r.status;
	if (st != 0)
		fprintf(stderr, "perf record failed (%d): %.300s\n", st,
			r.err ? r.err : "");
	run_free(&r);
	return st;
}

/* Real perf record files with several events: the reader accepts each,
 * and its sideband is what perf script shows of the same file. */
static void test_perf_record_files(void)
{
	static const char *const sw[] = { "-e", "dummy:u", "-e", "cpu-clock",
					  "-e", "task-clock", NULL };
	static const char *const sw_thr[] = { "--per-thread", "-e", "dummy:u",
					      "-e", "cpu-clock", "-e",
					      "task-clock", NULL };
	static const char *const tp[] = { "-e", "dummy", "-e",
					  "sched:sched_switch", "-e",
					  "cpu-clock:k", "-e", "task-clock:u",
					  NULL };
	static const char *const tp_thr[] = { "--per-thread", "-e", "dummy:u",
					      "-e", "sched:sched_process_exit",
					      NULL };
	const struct {
		const char *name;
		const char *const *args;
		bool pipe;
		const char *prog;
	} cfg[] = {
		{ "software events, per-CPU, file", sw, false, "prog-fork" },
		{ "software events, per-CPU, pipe", sw, true, "prog-threads" },
		{ "software events, per-thread, file", sw_thr, false,
		  "prog-threads" },
		{ "software events, per-thread, pipe", sw_thr, true,
		  "prog-exec" },
		{ "tracepoint, user and kernel, per-CPU, file", tp, false,
		  "prog-threads" },
		{ "tracepoint, user and kernel, per-CPU, pipe", tp, true,
		  "prog-fork" },
		{ "tracepoint, per-thread, pipe", tp_thr, true, "prog-dlopen" },
	};
	const char *progs = getenv("PTD_TEST_PROGS");
	unsigned done = 0;
	size_t c, i;

	if (access("/usr/bin/perf", X_OK) != 0 || !progs) {
		fprintf(stderr, "SKIP part: /usr/bin/perf (linux-perf) is not "
			"installed\n");
		return;
	}
	for (c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		char file[512], prog[512], lib[512];
		struct lines a = { .n = 0 }, b = { .n = 0 };

		(void)snprintf(file, sizeof(file), "%s/rec%zu.data", workdir,
			       c);
		(void)snprintf(prog, sizeof(prog), "%s/%s", progs,
			       cfg[c].prog);
		(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs);
		if (record(cfg[c].args, cfg[c].pipe, prog,
			   strcmp(cfg[c].prog, "prog-dlopen") ? NULL : lib,
			   file) != 0) {
			fprintf(stderr, "SKIP part: %s: perf record failed "
				"(perf_event_paranoid, or no tracefs)\n",
				cfg[c].name);
			continue;
		}
		if (ptd_sideband(file, &a) && perf_sideband(file, &b)) {
			bool same = a.n == b.n;

			for (i = 0; same && i < a.n; i++)
				same = !strcmp(a.v[i], b.v[i]);
			if (!same) {
				CHECK_FAIL_("%s: ptd has %zu sideband records, "
					    "perf script %zu", cfg[c].name,
					    a.n, b.n);
				for (i = 0; i < a.n || i < b.n; i++)
					if (i >= a.n || i >= b.n ||
					    strcmp(a.v[i], b.v[i])) {
						fprintf(stderr, "  ptd:  %s\n"
							"  perf: %s\n",
							i < a.n ? a.v[i] : "-",
							i < b.n ? b.v[i] : "-");
						break;
					}
			}
			/* exec, the program's maps and an exit at least */
			CHECK(a.n >= 4);
			done++;
		}
		lines_free(&a);
		lines_free(&b);
	}
	fprintf(stderr, "perf record files compared: %u of %zu\n", done,
		sizeof(cfg) / sizeof(cfg[0]));
}

int main(void)
{
	const char *root = getenv("PTD_BUILD_ROOT");
	const char *data = getenv("PTD_TEST_DATA");
	const char *tmp = getenv("TMPDIR");

	if (!root || !data)
		SKIP_ALL("PTD_BUILD_ROOT/PTD_TEST_DATA not set (run through "
			 "meson test)");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", root);
	(void)snprintf(data_dir, sizeof(data_dir), "%s/perfdata-real", data);
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-real-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		return 1;
	RUN(test_file_mode);
	RUN(test_pipe_mode);
	RUN(test_damage);
	RUN(test_perf_record_files);
	(void)ptd_rm_rf(workdir);
	return check_done();
}
