/* SPDX-License-Identifier: MIT */
/*
 * Detecting a saved trace's kind and decoding it through its reader (see
 * input.h).
 */
#include "input/input.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aspace/iscache.h"
#include "aspace/timeline.h"
#include "bundle/bundle.h"
#include "common/fileio.h"
#include "decode/insncache.h"
#include "decode/threadpar.h"
#include "lldb/trace.h"
#include "perfdata/decode.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"

/* Each reader, once built, sets its entry here. */
static const struct {
	enum ptd_input_kind kind;
	const char *name;
	ptd_input_decode_fn decode;	/* NULL: not built yet */
} readers[] = {
	{ PTD_INPUT_CAPTURE, "swpt-capture", ptd_capture_decode },
	{ PTD_INPUT_BUNDLE, "ptd-bundle", ptd_bundle_decode },
	{ PTD_INPUT_PERFDATA, "perf.data", ptd_perfdata_decode },
	{ PTD_INPUT_LLDB, "lldb-bundle", ptd_lldb_decode },
};

const char *ptd_input_kind_name(enum ptd_input_kind k)
{
	size_t i;

	for (i = 0; i < sizeof(readers) / sizeof(readers[0]); i++)
		if (readers[i].kind == k)
			return readers[i].name;
	return "unknown";
}

static bool dir_has(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return false;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A file's first bytes say what it is: perf.data starts with its magic;
 * an LLDB trace description is a JSON object naming "intel-pt". */
static int detect_file(const char *path, enum ptd_input_kind *ret,
		       struct ptd_diag *diag)
{
	char head[4096];
	ssize_t n;
	int fd = ptd_file_open_regular(AT_FDCWD, path, 0, NULL, diag);

	if (fd < 0)
		return fd;
	n = read(fd, head, sizeof(head) - 1);
	(void)close(fd);
	if (n < 0)
		return ptd_diagf(diag, -errno, "cannot read '%s': %s", path,
				 strerror(errno));
	head[n] = '\0';
	if (n >= 8 && !memcmp(head, "PERFILE2", 8)) {
		*ret = PTD_INPUT_PERFDATA;
		return 0;
	}
	const char *p = head;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p == '{' && strstr(p, "\"intel-pt\"")) {
		*ret = PTD_INPUT_LLDB;
		return 0;
	}
	return ptd_diagf(diag, -PTD_EFORMAT,
			 "'%s' is not a trace ptd reads (not a perf.data file "
			 "nor an LLDB trace.json)", path);
}

int ptd_input_detect(const char *path, enum ptd_input_kind *ret,
		     struct ptd_diag *diag)
{
	struct stat st;

	if (!path || !ret)
		return -EINVAL;
	*ret = PTD_INPUT_NONE;
	if (!strcmp(path, "-")) {	/* a pipe-mode perf.data stream */
		*ret = PTD_INPUT_PERFDATA;
		return 0;
	}
	if (stat(path, &st) < 0)
		return ptd_diagf(diag, -errno, "'%s': %s", path,
				 strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		if (dir_has(path, "ptd-bundle.json"))
			*ret = PTD_INPUT_BUNDLE;
		else if (dir_has(path, "capture.json"))
			*ret = PTD_INPUT_CAPTURE;
		else if (dir_has(path, "trace.json"))
			*ret = PTD_INPUT_LLDB;
		else if (dir_has(path, "data")) {
			/* perf record --kcore writes a directory: the
			 * perf.data is its "data" file */
			char p[PATH_MAX];

			if (snprintf(p, sizeof(p), "%s/data", path) >=
			    (int)sizeof(p))
				return -ENAMETOOLONG;
			return detect_file(p, ret, diag);
		} else
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "directory '%s' holds no trace ptd "
					 "reads (no ptd-bundle.json, "
					 "capture.json, trace.json or perf "
					 "'data')", path);
		return 0;
	}
	if (S_ISFIFO(st.st_mode)) {
		/* reading to look would eat what the reader needs: a pipe
		 * can only carry a pipe-mode perf.data stream */
		*ret = PTD_INPUT_PERFDATA;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "'%s' is neither a file nor a directory",
				 path);
	return detect_file(path, ret, diag);
}

int ptd_input_decode(const char *path, const struct ptd_input_opts *o,
		     const struct ptd_input_sink *sink,
		     size_t *ret_thread_errors, struct ptd_diag *diag)
{
	enum ptd_input_kind k;
	size_t i;
	int r;

	if (!path || !o || !sink || !sink->record)
		return -EINVAL;
	r = ptd_input_detect(path, &k, diag);
	if (r < 0)
		return r;
	for (i = 0; i < sizeof(readers) / sizeof(readers[0]); i++) {
		if (readers[i].kind != k)
			continue;
		if (!readers[i].decode)
			return ptd_diagf(diag, -PTD_EUNSUPPORTED,
					 "'%s' is a %s, which this build of "
					 "ptd cannot read", path,
					 readers[i].name);
		return readers[i].decode(path, o, sink, ret_thread_errors,
					 diag);
	}
	return -EINVAL;
}

/* ---- the software-source capture reader ------------------------------ */

/* The capture's selected threads as units (decode/threadpar.h). */
struct cap_units {
	const struct ptd_capture *c;
	const size_t *sel;		/* thread indexes */
	struct ptd_iscache *ic;
	struct ptd_insncache *icache;	/* one thread at a time only */
	const struct ptd_input_sink *sink;
	size_t errors;
};

/* Every section the thread's decode can add (threadpar.h). */
static int cap_sections(void *ctx, size_t i)
{
	struct cap_units *u = ctx;
	const struct ptd_capture_thread *t = &u->c->threads[u->sel[i]];

	return ptd_tl_add_sections(u->ic, &u->c->tl, u->c->dir, t->tid,
				  t->first_seq,
				  t->has_end ? t->end_seq : UINT64_MAX);
}

static int cap_decode(void *ctx, size_t i, const struct ptd_decode_opts *o,
		      pthread_mutex_t *lock, ptd_record_fn fn, void *fctx,
		      struct ptd_decode_stats *st, struct ptd_diag *diag)
{
	struct cap_units *u = ctx;

	return ptd_capture_decode_thread(u->c, u->sel[i], o, u->ic,
					 lock ? NULL : u->icache, lock, fn,
					 fctx, st, diag);
}

static void cap_done(void *ctx, size_t i, int err,
		     const struct ptd_decode_stats *st,
		     const struct ptd_diag *diag)
{
	struct cap_units *u = ctx;

	if (err < 0)
		u->errors++;
	if (u->sink->thread_done)
		u->sink->thread_done(u->sink->ctx, u->c->threads[u->sel[i]].tid,
				     st, err, diag);
}

int ptd_capture_decode_loaded(const struct ptd_capture *c, const char *origin,
			      enum ptd_input_kind kind, const char *source,
			      ptd_iscache_resolve_fn resolve, void *resolve_ctx,
			      const struct ptd_input_opts *o,
			      const struct ptd_input_sink *sink,
			      size_t *ret_thread_errors,
			      struct ptd_diag *diag)
{
	struct ptd_iscache *ic = NULL;
	struct ptd_insncache *icache = NULL;
	struct ptd_decode_opts dopts;
	struct ptd_input_info info;
	struct cap_units u;
	struct ptd_threadpar_ops ops = { cap_sections, cap_decode, cap_done,
					 &u };
	size_t i, nsel = 0, *sel = NULL;
	uint64_t *bytes = NULL;
	int r;

	if (!c || !origin || !source || !o || !sink || !sink->record)
		return -EINVAL;
	if (ret_thread_errors)
		*ret_thread_errors = 0;
	sel = calloc(c->nthreads ? c->nthreads : 1, sizeof(*sel));
	bytes = calloc(c->nthreads ? c->nthreads : 1, sizeof(*bytes));
	if (!sel || !bytes) {
		free(sel);
		free(bytes);
		return -ENOMEM;
	}
	for (i = 0; i < c->nthreads; i++)
		if (!o->have_tid || c->threads[i].tid == o->tid) {
			bytes[nsel] = c->threads[i].pt_bytes;
			sel[nsel++] = i;
		}
	if (o->have_tid && !nsel) {
		free(sel);
		free(bytes);
		return ptd_diagf(diag, -ENOENT, "%s '%s' has no thread %ld",
				 ptd_input_kind_name(kind), origin,
				 (long)o->tid);
	}
	(void)ptd_iscache_new(&ic);
	(void)ptd_insncache_new(0, &icache);
	if (!ic || !icache) {
		r = -ENOMEM;
		goto out;
	}
	if (resolve)
		ptd_iscache_set_resolver(ic, resolve, resolve_ctx);
	dopts = o->decode;
	if (!o->cpu_given)
		dopts.cpu = c->cpu;
	/* The clock the live stream had: records get its time and wall. */
	if (!dopts.has_clock && c->has_clock) {
		dopts.has_clock = true;
		dopts.clock = c->clock;
		dopts.has_wallref = c->has_wallref;
		dopts.wallref = c->wallref;
	}
	info = (struct ptd_input_info){ kind, source, (long)c->pid, nsel };
	r = sink->info ? sink->info(sink->ctx, &info) : 0;
	u = (struct cap_units){ c, sel, ic, icache, sink, 0 };
	if (r == 0)
		r = ptd_threadpar_run(&dopts, nsel,
				      ptd_threadpar_fits(&dopts, bytes, nsel),
				      &ops, sink->record, sink->ctx);
	if (ret_thread_errors)
		*ret_thread_errors = u.errors;
out:
	free(sel);
	free(bytes);
	ptd_insncache_free(icache);
	ptd_iscache_free(ic);
	return r;
}

int ptd_capture_decode(const char *path, const struct ptd_input_opts *o,
		       const struct ptd_input_sink *sink,
		       size_t *ret_thread_errors, struct ptd_diag *diag)
{
	struct ptd_capture c;
	int r;

	if (!path || !o || !sink || !sink->record)
		return -EINVAL;
	if (ret_thread_errors)
		*ret_thread_errors = 0;
	r = ptd_capture_load(path, &c, diag);
	if (r < 0)
		return r;
	r = ptd_capture_decode_loaded(&c, path, PTD_INPUT_CAPTURE,
				      "swpt-capture", NULL, NULL, o, sink,
				      ret_thread_errors, diag);
	ptd_capture_fini(&c);
	return r;
}
