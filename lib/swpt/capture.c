/* SPDX-License-Identifier: MIT */
/*
 * The capture directory of the software PT source: manifest (cJSON),
 * timeline (aspace/timeline.h), per-thread PT and ground-truth files.
 *
 * A capture read back is untrusted input: every manifest field is
 * type-checked and bounded, every file name must be a plain name inside the
 * directory, data files are opened without following symlinks and must be
 * regular files whose sizes agree with the manifest.
 */
#include "swpt/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/fileio.h"
#include "common/json.h"
#include "common/strutil.h"

#define MANIFEST_NAME "capture.json"
#define TIMELINE_NAME "timeline.jsonl"

/* Local limits on what a manifest may make us allocate. */
#define CAPTURE_MAX_ARGV 4096u
#define CAPTURE_MAX_INSNS (1ull << 30)	/* IPs in one truth file */
#define CAPTURE_MAX_TIMELINE (256u << 20)
/* Largest integer a JSON number (a double) holds exactly: what the writer
 * (cJSON) can write of a filter range. */
#define JSON_MAX_INT (1ull << 53)
#define VARINT_MAX 10u

/* ---- ground truth ---------------------------------------------------- */

int ptd_truth_writer_open(struct ptd_truth_writer *w, const char *path)
{
	FILE *f;

	if (!w || !path)
		return -EINVAL;
	f = fopen(path, "we");
	if (!f)
		return -errno;
	/* One IP is about 2 bytes: a big buffer keeps this off the profile. */
	if (setvbuf(f, NULL, _IOFBF, 1u << 18) != 0) {
		(void)fclose(f);
		return -ENOMEM;
	}
	w->f = f;
	w->last = 0;
	w->count = 0;
	return 0;
}

int ptd_truth_writer_add(struct ptd_truth_writer *w, uint64_t ip)
{
	/* zigzag: small negative deltas become small unsigned numbers */
	uint64_t d = ip - w->last;
	uint64_t z = (d << 1) ^ (uint64_t)((int64_t)d >> 63);
	uint8_t buf[VARINT_MAX];
	size_t n = 0;

	if (!w->f)
		return -EBADF;
	while (z >= 0x80) {
		buf[n++] = (uint8_t)(z | 0x80);
		z >>= 7;
	}
	buf[n++] = (uint8_t)z;
	if (fwrite_unlocked(buf, 1, n, w->f) != n)
		return -EIO;
	w->last = ip;
	w->count++;
	return 0;
}

int ptd_truth_writer_close(struct ptd_truth_writer *w)
{
	int r = 0;

	if (!w || !w->f)
		return 0;
	if (fflush(w->f) != 0)
		r = -errno;
	if (fclose(w->f) != 0 && r == 0)
		r = -errno;
	w->f = NULL;
	return r;
}

int ptd_truth_decode(const uint8_t *data, size_t len, const char *origin,
		     uint64_t **ret_ips, size_t *ret_n, struct ptd_diag *diag)
{
	uint64_t *ips, last = 0;
	size_t n = 0, i = 0, k = 0;

	if ((!data && len) || !ret_ips || !ret_n)
		return -EINVAL;
	if (!origin)
		origin = "truth";
	/* Every varint ends in exactly one byte with bit 7 clear. */
	for (size_t j = 0; j < len; j++)
		n += !(data[j] & 0x80);
	if (len && (data[len - 1] & 0x80))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: offset %zu: varint runs past the end",
				 origin, len);
	ips = malloc((n ? n : 1) * sizeof(*ips));
	if (!ips)
		return -ENOMEM;
	while (i < len) {
		size_t start = i;
		uint64_t z = 0;
		unsigned shift = 0;
		uint8_t b;

		do {
			b = data[i++];
			if (i - start > VARINT_MAX ||
			    (i - start == VARINT_MAX && (b & 0x7e))) {
				free(ips);
				return ptd_diagf(diag, -PTD_EFORMAT,
						 "%s: offset %zu: varint over "
						 "64 bits", origin, start);
			}
			z |= (uint64_t)(b & 0x7f) << shift;
			shift += 7;
		} while (b & 0x80);
		last += (z >> 1) ^ (0 - (z & 1));
		ips[k++] = last;
	}
	*ret_ips = ips;
	*ret_n = k;
	return 0;
}

/* ---- names and files ------------------------------------------------- */

static char *join(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

/* Open @name in @dir without following a symlink; it must be a regular
 * file.  Returns the fd (and its size) or a negative error with @diag. */
static int open_data(const char *dir, const char *name, uint64_t *ret_size,
		     struct ptd_diag *diag)
{
	_cleanup_free_ char *path = join(dir, name);
	struct stat st;
	int fd;

	if (!path)
		return -ENOMEM;
	fd = ptd_file_open_regular(AT_FDCWD, path, O_NOFOLLOW, &st, NULL);
	if (fd == -PTD_ENOTREG || fd == -EISDIR)
		return ptd_diagf(diag, -PTD_EFORMAT, "%s: not a regular file",
				 path);
	if (fd < 0)
		return ptd_diagf(diag, fd, "%s: cannot open: %s", path,
				 ptd_strerror(fd));
	*ret_size = (uint64_t)st.st_size;
	return fd;
}

static int read_exact(int fd, uint8_t *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, buf + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -PTD_ETRUNC;
		done += (size_t)n;
	}
	return 0;
}

/* Read all of @name (exactly @size bytes as fstat said) into a buffer. */
static int read_data(const char *dir, const char *name, uint64_t limit,
		     const char *what, uint8_t **ret_data, size_t *ret_len,
		     uint64_t *ret_size, struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	uint64_t size;
	uint8_t *buf;
	int r;

	fd = open_data(dir, name, &size, diag);
	if (fd < 0)
		return fd;
	if (size > limit)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "%s/%s: %s of %" PRIu64 " bytes exceeds the "
				 "limit of %" PRIu64, dir, name, what, size,
				 limit);
	if (ret_size)
		*ret_size = size;
	buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	r = read_exact(fd, buf, size);
	if (r < 0) {
		free(buf);
		return ptd_diagf(diag, r, "%s/%s: read failed: %s", dir, name,
				 ptd_strerror(r));
	}
	*ret_data = buf;
	*ret_len = size;
	return 0;
}

/* ---- free, find ------------------------------------------------------ */

void ptd_capture_fini(struct ptd_capture *c)
{
	if (!c)
		return;
	free(c->dir);
	if (c->argv) {
		for (char **a = c->argv; *a; a++)
			free(*a);
		free(c->argv);
	}
	for (size_t i = 0; c->threads && i < c->nthreads; i++) {
		free(c->threads[i].pt);
		free(c->threads[i].truth);
	}
	free(c->threads);
	free(c->filter);
	ptd_timeline_fini(&c->tl);
	memset(c, 0, sizeof(*c));
}

ssize_t ptd_capture_find_thread(const struct ptd_capture *c, pid_t tid)
{
	for (size_t i = 0; c && i < c->nthreads; i++)
		if (c->threads[i].tid == tid)
			return (ssize_t)i;
	return -1;
}

/* ---- manifest: load -------------------------------------------------- */

/* Fields are required unless the caller says otherwise; integers are
 * read exactly, and as cJSON (our writer) prints them: 1e+15 is one. */
#define REQ (PTD_JSON_REQUIRED | PTD_JSON_INT_WHOLE)
#define HEX (PTD_JSON_REQUIRED | PTD_JSON_HEX)

/* A plain file name field, copied. */
static int get_name(const struct ptd_json_reader *r, const cJSON *obj,
		    const char *prefix, const char *key, char **ret)
{
	char path[PTD_JSON_PATH_MAX];
	const char *s = NULL;
	int e = ptd_json_get_str(r, obj, prefix, key, REQ, &s);

	if (e < 0)
		return e;
	if (!ptd_filename_is_plain(s))
		return ptd_json_badf(r, -PTD_EFORMAT,
				     ptd_json_path(path, prefix, key),
				     "\"%.64s\" is not a plain file name "
				     "inside the capture", s);
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

static int load_argv(const struct ptd_json_reader *r, const cJSON *root,
		     struct ptd_capture *c)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *arr = NULL, *it = NULL;
	const char *s;
	size_t n, i = 0;
	int e = ptd_json_get_array(r, root, "", "argv", REQ, CAPTURE_MAX_ARGV,
				   &arr, &n);

	if (e < 0)
		return e;
	c->argv = calloc(n + 1, sizeof(*c->argv));
	if (!c->argv)
		return -ENOMEM;
	cJSON_ArrayForEach(it, arr) {
		e = ptd_json_read_str(r, it,
				      ptd_json_path_index(path, "", "argv", i),
				      REQ, SIZE_MAX, &s);
		if (e < 0)
			return e;
		c->argv[i] = strdup(s);
		if (!c->argv[i])
			return -ENOMEM;
		i++;
	}
	return 0;
}

static int load_cpu(const struct ptd_json_reader *r, const cJSON *root,
		    struct ptd_capture *c)
{
	const cJSON *cpu = NULL;
	const char *vendor = NULL;
	uint64_t family, model, stepping;
	int e;

	if ((e = ptd_json_get_object(r, root, "", "cpu", REQ, &cpu)) < 0 ||
	    (e = ptd_json_get_str(r, cpu, "cpu", "vendor", REQ, &vendor)) < 0 ||
	    (e = ptd_json_get_u64(r, cpu, "cpu", "family", REQ, 0, UINT16_MAX,
				  &family)) < 0 ||
	    (e = ptd_json_get_u64(r, cpu, "cpu", "model", REQ, 0, UINT8_MAX,
				  &model)) < 0 ||
	    (e = ptd_json_get_u64(r, cpu, "cpu", "stepping", REQ, 0,
				  UINT8_MAX, &stepping)) < 0)
		return e;
	if (strcmp(vendor, "intel") == 0)
		c->cpu.vendor = pcv_intel;
	else if (strcmp(vendor, "unknown") == 0)
		c->cpu.vendor = pcv_unknown;
	else
		return ptd_json_bad(r, "cpu.vendor",
				    "neither \"intel\" nor \"unknown\"");
	c->cpu.family = (uint16_t)family;
	c->cpu.model = (uint8_t)model;
	c->cpu.stepping = (uint8_t)stepping;
	return 0;
}

static int load_config(const struct ptd_json_reader *r, const cJSON *root,
		       struct ptd_capture *c)
{
	const cJSON *cfg = NULL;
	uint64_t period, cbr = 0;
	int e;

	if ((e = ptd_json_get_object(r, root, "", "config", REQ, &cfg)) < 0 ||
	    (e = ptd_json_get_u64(r, cfg, "config", "psb_period", REQ, 0,
				  1u << 20, &period)) < 0 ||
	    (e = ptd_json_get_bool(r, cfg, "config", "noretcomp", REQ,
				   &c->config.noretcomp)) < 0 ||
	    (e = ptd_json_get_bool(r, cfg, "config", "tsc", REQ,
				   &c->config.tsc)) < 0)
		return e;
	if (period < 256 || (period & (period - 1)))
		return ptd_json_bad(r, "config.psb_period",
				    "not a power of two between 256 and 1 MiB");
	/* cbr is optional: captures without it had no CBR packets. */
	e = ptd_json_get_u64(r, cfg, "config", "cbr", PTD_JSON_INT_WHOLE, 0,
			     UINT8_MAX, &cbr);
	if (e < 0 && e != -ENOENT)
		return e;
	c->config.psb_period = period;
	c->config.cbr = (uint8_t)cbr;
	return 0;
}

/* The optional "clock" and "wallref" objects. */
static int load_clock(const struct ptd_json_reader *r, const cJSON *root,
		      struct ptd_capture *c)
{
	const cJSON *o = NULL;
	uint64_t mult, shift;
	int e;

	if (!cJSON_GetObjectItemCaseSensitive(root, "clock")) {
		if (cJSON_GetObjectItemCaseSensitive(root, "wallref"))
			return ptd_json_bad(r, "wallref",
					    "given without a \"clock\"");
		return 0;
	}
	if ((e = ptd_json_get_object(r, root, "", "clock", REQ, &o)) < 0 ||
	    (e = ptd_json_get_u64(r, o, "clock", "time_zero", HEX, 0,
				  UINT64_MAX, &c->clock.time_zero)) < 0 ||
	    (e = ptd_json_get_u64(r, o, "clock", "time_mult", REQ, 0,
				  UINT32_MAX, &mult)) < 0 ||
	    (e = ptd_json_get_u64(r, o, "clock", "time_shift", REQ, 0, 31,
				  &shift)) < 0)
		return e;
	if (!mult)
		return ptd_json_bad(r, "clock.time_mult", "0 (no conversion)");
	c->clock.time_mult = (uint32_t)mult;
	c->clock.time_shift = (uint16_t)shift;
	c->has_clock = true;
	if (!cJSON_GetObjectItemCaseSensitive(root, "wallref"))
		return 0;
	if ((e = ptd_json_get_object(r, root, "", "wallref", REQ, &o)) < 0 ||
	    (e = ptd_json_get_u64(r, o, "wallref", "perf_ns", HEX, 0,
				  UINT64_MAX, &c->wallref.perf_ns)) < 0 ||
	    (e = ptd_json_get_u64(r, o, "wallref", "wall_ns", HEX, 0,
				  UINT64_MAX, &c->wallref.wall_ns)) < 0)
		return e;
	c->has_wallref = true;
	return 0;
}

/* Slot @i of a decoder filter config. */
static void filter_slot(struct pt_conf_addr_filter *f, unsigned i,
			uint64_t **a, uint64_t **b)
{
	uint64_t *v[4][2] = { { &f->addr0_a, &f->addr0_b },
			      { &f->addr1_a, &f->addr1_b },
			      { &f->addr2_a, &f->addr2_b },
			      { &f->addr3_a, &f->addr3_b } };

	*a = v[i][0];
	*b = v[i][1];
}

static int load_range(const struct ptd_json_reader *r, const cJSON *it,
		      unsigned i, struct pt_conf_addr_filter *f)
{
	char where[PTD_JSON_PATH_MAX], path[PTD_JSON_PATH_MAX];
	const char *action = NULL;
	uint64_t a, b, *pa, *pb, cfg;
	int e;

	ptd_json_path_index(where, "filter", "ranges", i);
	if (!cJSON_IsObject(it))
		return ptd_json_badf(r, -PTD_EFORMAT, where,
				     "expected an object, not %s",
				     ptd_json_type_name(it));
	if ((e = ptd_json_get_str(r, it, where, "action", REQ, &action)) < 0 ||
	    (e = ptd_json_get_u64(r, it, where, "a", REQ, 0, JSON_MAX_INT,
				  &a)) < 0 ||
	    (e = ptd_json_get_u64(r, it, where, "b", REQ, 0, JSON_MAX_INT,
				  &b)) < 0)
		return e;
	if (!strcmp(action, "filter"))
		cfg = 1;
	else if (!strcmp(action, "tracestop"))
		cfg = 2;
	else
		return ptd_json_bad(r, ptd_json_path(path, where, "action"),
				    "neither \"filter\" nor \"tracestop\"");
	if (a > b)
		return ptd_json_bad(r, ptd_json_path(path, where, "b"),
				    "below a");
	f->config.addr_cfg |= cfg << (4 * i);
	filter_slot(f, i, &pa, &pb);
	*pa = a;
	*pb = b;
	return 0;
}

/* The optional "filter" object. */
static int load_filter(const struct ptd_json_reader *r, const cJSON *root,
		       struct ptd_capture *c)
{
	struct pt_conf_addr_filter f;
	const cJSON *fo = NULL, *ranges = NULL, *it;
	const char *text = NULL;
	unsigned n = 0;
	size_t count;
	int e;

	if (!cJSON_GetObjectItemCaseSensitive(root, "filter"))
		return 0;
	if ((e = ptd_json_get_object(r, root, "", "filter", REQ, &fo)) < 0 ||
	    (e = ptd_json_get_array(r, fo, "filter", "ranges", REQ, SIZE_MAX,
				    &ranges, &count)) < 0)
		return e;
	memset(&f, 0, sizeof(f));
	cJSON_ArrayForEach(it, ranges) {
		if (n == 4)
			return ptd_json_bad(r, "filter.ranges",
					    "more than 4 ranges");
		if ((e = load_range(r, it, n, &f)) < 0)
			return e;
		n++;
	}
	if (!n)
		return ptd_json_bad(r, "filter.ranges", "empty");
	e = ptd_json_get_str(r, fo, "filter", "text", 0, &text);
	if (e < 0 && e != -ENOENT)
		return e;
	if (text && !(c->filter = strdup(text)))
		return -ENOMEM;
	c->addr_filter = f;
	return 0;
}

static int load_exit(const struct ptd_json_reader *r, const cJSON *root,
		     struct ptd_capture *c)
{
	const cJSON *ex = NULL;
	uint64_t v;
	int e, kinds;

	if ((e = ptd_json_get_object(r, root, "", "exit", REQ, &ex)) < 0)
		return e;
	kinds = !!cJSON_GetObjectItemCaseSensitive(ex, "code") +
		!!cJSON_GetObjectItemCaseSensitive(ex, "signal") +
		!!cJSON_GetObjectItemCaseSensitive(ex, "detached");
	if (kinds != 1)
		return ptd_json_bad(r, "exit",
				    "needs exactly one of code, signal, "
				    "detached");
	if (cJSON_GetObjectItemCaseSensitive(ex, "code")) {
		if ((e = ptd_json_get_u64(r, ex, "exit", "code", REQ, 0, 255,
					  &v)) < 0)
			return e;
		c->exited = true;
		c->exit_code = (int)v;
	} else if (cJSON_GetObjectItemCaseSensitive(ex, "signal")) {
		if ((e = ptd_json_get_u64(r, ex, "exit", "signal", REQ, 0, 127,
					  &v)) < 0)
			return e;
		if (v == 0)
			return ptd_json_bad(r, "exit.signal",
					    "0 is not a signal");
		c->exited = true;
		c->exit_signal = (int)v;
	} else {
		if ((e = ptd_json_get_bool(r, ex, "exit", "detached", REQ,
					   &c->detached)) < 0)
			return e;
		if (!c->detached)
			return ptd_json_bad(r, "exit.detached", "must be true");
	}
	return 0;
}

/* Thread @i's tid was given before only to threads that had ended before
 * it started (their end_seq <= its first_seq): the kernel reuses a thread
 * id once it is free, never while it is in use. */
static int check_reused(const struct ptd_json_reader *r,
			const struct ptd_capture *c, size_t i,
			const char *path)
{
	const struct ptd_capture_thread *th = &c->threads[i];

	for (size_t j = i; j-- > 0;) {
		const struct ptd_capture_thread *p = &c->threads[j];

		if (p->tid != th->tid)
			continue;
		if (!p->has_end)
			return ptd_json_badf(r, -PTD_EFORMAT, path,
					     "thread %ld listed twice, and "
					     "threads[%zu] has no end_seq",
					     (long)th->tid, j);
		if (p->end_seq > th->first_seq)
			return ptd_json_badf(r, -PTD_EFORMAT, path,
					     "thread %ld listed twice with "
					     "lives that overlap: threads[%zu] "
					     "ends at seq %" PRIu64 ", after "
					     "this one's first_seq %" PRIu64,
					     (long)th->tid, j, p->end_seq,
					     th->first_seq);
		return 0;	/* p was checked against those before it */
	}
	return 0;
}

/* One thread entry; its files must exist and agree with the counts. */
static int load_thread(const struct ptd_json_reader *r, const cJSON *t,
		       size_t i, struct ptd_capture *c)
{
	struct ptd_capture_thread *th = &c->threads[i];
	char where[PTD_JSON_PATH_MAX], path[PTD_JSON_PATH_MAX];
	uint64_t v, size;
	int e, fd;

	ptd_json_path_index(where, "", "threads", i);
	if (!cJSON_IsObject(t))
		return ptd_json_badf(r, -PTD_EFORMAT, where,
				     "expected an object, not %s",
				     ptd_json_type_name(t));
	if ((e = ptd_json_get_u64(r, t, where, "tid", REQ, 0, INT_MAX,
				  &v)) < 0)
		return e;
	ptd_json_path(path, where, "tid");
	if (v == 0)
		return ptd_json_bad(r, path, "0 is not a thread id");
	th->tid = (pid_t)v;
	if ((e = ptd_json_get_u64(r, t, where, "first_seq", REQ, 0,
				  PTD_TL_MAX_EVENTS, &th->first_seq)) < 0)
		return e;
	e = ptd_json_get_u64(r, t, where, "end_seq", PTD_JSON_INT_WHOLE,
			     th->first_seq, PTD_TL_MAX_EVENTS, &th->end_seq);
	if (e < 0 && e != -ENOENT)
		return e;
	th->has_end = e == 0;
	if ((e = check_reused(r, c, i, path)) < 0 ||
	    (e = get_name(r, t, where, "pt", &th->pt)) < 0 ||
	    (e = get_name(r, t, where, "truth", &th->truth)) < 0 ||
	    (e = ptd_json_get_u64(r, t, where, "insns", REQ, 0,
				  CAPTURE_MAX_INSNS, &th->insns)) < 0 ||
	    (e = ptd_json_get_u64(r, t, where, "pt_bytes", REQ, 0,
				  PTD_CAPTURE_MAX_PT, &th->pt_bytes)) < 0)
		return e;

	fd = open_data(c->dir, th->pt, &size, r->diag);
	if (fd < 0)
		return fd;
	(void)close(fd);
	if (size != th->pt_bytes)
		return ptd_json_badf(r, -PTD_EFORMAT,
				     ptd_json_path(path, where, "pt_bytes"),
				     "%" PRIu64 ", but %s/%s has %" PRIu64
				     " bytes", th->pt_bytes, c->dir, th->pt,
				     size);
	fd = open_data(c->dir, th->truth, &size, r->diag);
	if (fd < 0)
		return fd;
	(void)close(fd);
	/* each IP takes 1 to 10 bytes */
	if (size < th->insns || size > th->insns * VARINT_MAX)
		return ptd_json_badf(r, -PTD_EFORMAT,
				     ptd_json_path(path, where, "insns"),
				     "%" PRIu64 " IPs, which the %" PRIu64
				     " bytes of %s/%s cannot hold",
				     th->insns, size, c->dir, th->truth);
	return 0;
}

struct fname {
	const char *name;
	size_t thread;
	const char *key;
};

static int fname_cmp(const void *a, const void *b)
{
	const struct fname *x = a, *y = b;
	int d = strcmp(x->name, y->name);

	if (d)
		return d;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

/* No two threads (nor one thread's pt and truth) share a file. */
static int check_names_unique(const struct ptd_json_reader *r,
			      const struct ptd_capture *c)
{
	_cleanup_free_ struct fname *v = calloc(2 * c->nthreads, sizeof(*v));
	char path[PTD_JSON_PATH_MAX], where[PTD_JSON_PATH_MAX];

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < c->nthreads; i++) {
		v[2 * i] = (struct fname){ c->threads[i].pt, i, "pt" };
		v[2 * i + 1] = (struct fname){ c->threads[i].truth, i, "truth" };
	}
	qsort(v, 2 * c->nthreads, sizeof(*v), fname_cmp);
	for (size_t k = 1; k < 2 * c->nthreads; k++) {
		if (strcmp(v[k - 1].name, v[k].name))
			continue;
		ptd_json_path_index(where, "", "threads", v[k].thread);
		return ptd_json_badf(r, -PTD_EFORMAT,
				     ptd_json_path(path, where, v[k].key),
				     "\"%.64s\" is threads[%zu].%s's file "
				     "too", v[k].name, v[k - 1].thread,
				     v[k - 1].key);
	}
	return 0;
}

static int load_threads(const struct ptd_json_reader *r, const cJSON *root,
			struct ptd_capture *c)
{
	const cJSON *arr = NULL, *it = NULL;
	size_t n, i = 0;
	int e = ptd_json_get_array(r, root, "", "threads", REQ,
				   PTD_CAPTURE_MAX_THREADS, &arr, &n);

	if (e < 0)
		return e;
	if (n == 0)
		return ptd_json_bad(r, "threads", "no thread");
	c->threads = calloc(n, sizeof(*c->threads));
	if (!c->threads)
		return -ENOMEM;
	cJSON_ArrayForEach(it, arr) {
		c->nthreads = i + 1;
		e = load_thread(r, it, i, c);
		if (e < 0)
			return e;
		i++;
	}
	return check_names_unique(r, c);
}

/* The timeline must name only plain snapshot files, and no thread may start
 * after an event that does not exist. */
static int load_timeline(struct ptd_capture *c, struct ptd_diag *diag)
{
	_cleanup_free_ char *path = join(c->dir, TIMELINE_NAME);
	_cleanup_free_ char *text = NULL;
	size_t len;
	uint64_t end_seq;
	int r;

	if (!path)
		return -ENOMEM;
	r = ptd_file_read_all(path, CAPTURE_MAX_TIMELINE, &text, &len);
	if (r == -PTD_ELIMIT)
		return ptd_diagf(diag, r, "%s: larger than %u bytes", path,
				 CAPTURE_MAX_TIMELINE);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cannot read: %s", path,
				 ptd_strerror(r));
	r = ptd_timeline_parse(text, len, path, &c->tl, diag);
	if (r < 0)
		return r;
	for (size_t i = 0; i < c->tl.n; i++) {
		const struct ptd_tl_event *ev = &c->tl.ev[i];

		if (ev->op == PTD_TL_SNAPSHOT &&
		    (!ev->file || !ptd_filename_is_plain(ev->file)))
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: event seq %" PRIu64 ": file "
					 "\"%.64s\" is not a plain file name "
					 "inside the capture", path, ev->seq,
					 ev->file ? ev->file : "");
	}
	end_seq = c->tl.n ? c->tl.ev[c->tl.n - 1].seq + 1 : 0;
	for (size_t i = 0; i < c->nthreads; i++) {
		const struct ptd_capture_thread *t = &c->threads[i];

		if (t->first_seq > end_seq)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s/" MANIFEST_NAME ": "
					 "threads[%zu].first_seq: %" PRIu64
					 " is past the timeline's last event",
					 c->dir, i, t->first_seq);
		if (t->has_end && t->end_seq > end_seq)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s/" MANIFEST_NAME ": "
					 "threads[%zu].end_seq: %" PRIu64
					 " is past the timeline's last event",
					 c->dir, i, t->end_seq);
	}
	return 0;
}

static int load_manifest(const char *origin, const char *text, size_t len,
			 struct ptd_capture *c, struct ptd_diag *diag)
{
	struct ptd_json_reader r = { NULL, origin, diag };
	struct ptd_json *doc = NULL;
	const cJSON *root;
	uint64_t pid;
	int e = ptd_json_parse(text, len, origin, &doc, diag);

	if (e < 0)
		return e;
	r.doc = doc;
	root = ptd_json_root(doc);
	if ((e = ptd_json_check_format(&r, root, PTD_CAPTURE_FORMAT,
					PTD_CAPTURE_VERSION)) < 0 ||
	    (e = ptd_json_get_u64(&r, root, "", "pid", REQ, 0, INT_MAX,
				  &pid)) < 0 ||
	    (e = pid ? 0 : ptd_json_bad(&r, "pid",
					"0 is not a process id")) < 0 ||
	    (e = load_argv(&r, root, c)) < 0 ||
	    (e = load_cpu(&r, root, c)) < 0 ||
	    (e = load_config(&r, root, c)) < 0 ||
	    (e = load_filter(&r, root, c)) < 0 ||
	    (e = load_clock(&r, root, c)) < 0 ||
	    (e = load_exit(&r, root, c)) < 0 ||
	    (e = load_threads(&r, root, c)) < 0)
		goto out;
	c->pid = (pid_t)pid;
out:
	ptd_json_free(doc);
	return e;
}

int ptd_capture_load(const char *dir, struct ptd_capture *ret,
		     struct ptd_diag *diag)
{
	struct ptd_capture c = { 0 };
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r;

	if (!dir || !ret)
		return -EINVAL;
	ptd_timeline_init(&c.tl);
	path = join(dir, MANIFEST_NAME);
	c.dir = strdup(dir);
	if (!path || !c.dir) {
		r = -ENOMEM;
		goto err;
	}
	r = ptd_file_read_all(path, PTD_CAPTURE_MAX_MANIFEST, &text, &len);
	if (r == -PTD_ELIMIT) {
		r = ptd_diagf(diag, r, "%s: larger than %u bytes", path,
			      PTD_CAPTURE_MAX_MANIFEST);
		goto err;
	}
	if (r < 0) {
		r = ptd_diagf(diag, r, "%s: cannot read: %s", path,
			      ptd_strerror(r));
		goto err;
	}
	r = load_manifest(path, text, len, &c, diag);
	if (r < 0)
		goto err;
	r = load_timeline(&c, diag);
	if (r < 0)
		goto err;
	*ret = c;
	return 0;
err:
	ptd_capture_fini(&c);
	return r;
}

/* ---- manifest: save -------------------------------------------------- */

static bool add_num(cJSON *o, const char *k, double v)
{
	return cJSON_AddNumberToObject(o, k, v) != NULL;
}

static bool add_thread(cJSON *arr, const struct ptd_capture_thread *th)
{
	cJSON *t = cJSON_CreateObject();

	if (!t || !cJSON_AddItemToArray(arr, t)) {
		cJSON_Delete(t);
		return false;
	}
	return add_num(t, "tid", th->tid) &&
	       add_num(t, "first_seq", (double)th->first_seq) &&
	       (!th->has_end ||
		add_num(t, "end_seq", (double)th->end_seq)) &&
	       cJSON_AddStringToObject(t, "pt", th->pt) &&
	       cJSON_AddStringToObject(t, "truth", th->truth) &&
	       add_num(t, "insns", (double)th->insns) &&
	       add_num(t, "pt_bytes", (double)th->pt_bytes);
}

/* The "filter" object, if there is a filter. */
static bool add_filter(cJSON *root, const struct ptd_capture *c)
{
	struct pt_conf_addr_filter f = c->addr_filter;
	cJSON *fo, *ranges;

	if (!f.config.addr_cfg)
		return true;
	if (!(fo = cJSON_AddObjectToObject(root, "filter")) ||
	    (c->filter && !cJSON_AddStringToObject(fo, "text", c->filter)) ||
	    !(ranges = cJSON_AddArrayToObject(fo, "ranges")))
		return false;
	for (unsigned i = 0; i < 4; i++) {
		unsigned cfg = (unsigned)(f.config.addr_cfg >> (4 * i)) & 0xf;
		uint64_t *a, *b;
		cJSON *r;

		if (!cfg)
			continue;
		filter_slot(&f, i, &a, &b);
		r = cJSON_CreateObject();
		if (!r || !cJSON_AddItemToArray(ranges, r)) {
			cJSON_Delete(r);
			return false;
		}
		if (!cJSON_AddStringToObject(r, "action", cfg == 2 ? "tracestop"
								   : "filter") ||
		    !add_num(r, "a", (double)*a) || !add_num(r, "b", (double)*b))
			return false;
	}
	return true;
}

static bool add_hex64(cJSON *o, const char *key, uint64_t v)
{
	char hex[24];

	(void)snprintf(hex, sizeof(hex), "0x%" PRIx64, v);
	return cJSON_AddStringToObject(o, key, hex) != NULL;
}

/* The "clock" and "wallref" objects, if known. */
static bool add_clock(cJSON *root, const struct ptd_capture *c)
{
	cJSON *o;

	if (!c->has_clock)
		return true;
	if (!(o = cJSON_AddObjectToObject(root, "clock")) ||
	    !add_hex64(o, "time_zero", c->clock.time_zero) ||
	    !add_num(o, "time_mult", c->clock.time_mult) ||
	    !add_num(o, "time_shift", c->clock.time_shift))
		return false;
	if (!c->has_wallref)
		return true;
	return (o = cJSON_AddObjectToObject(root, "wallref")) &&
	       add_hex64(o, "perf_ns", c->wallref.perf_ns) &&
	       add_hex64(o, "wall_ns", c->wallref.wall_ns);
}

static cJSON *build_manifest(const struct ptd_capture *c)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *argv = NULL, *cpu = NULL, *cfg = NULL, *thr = NULL, *ex = NULL;
	bool ok;

	if (!root)
		return NULL;
	ok = cJSON_AddStringToObject(root, "format", PTD_CAPTURE_FORMAT) &&
	     add_num(root, "version", PTD_CAPTURE_VERSION) &&
	     add_num(root, "pid", c->pid) &&
	     (argv = cJSON_AddArrayToObject(root, "argv")) &&
	     (cpu = cJSON_AddObjectToObject(root, "cpu")) &&
	     (cfg = cJSON_AddObjectToObject(root, "config")) &&
	     (thr = cJSON_AddArrayToObject(root, "threads")) &&
	     (ex = cJSON_AddObjectToObject(root, "exit"));
	for (char **a = c->argv; ok && a && *a; a++) {
		cJSON *s = cJSON_CreateString(*a);

		ok = s && cJSON_AddItemToArray(argv, s);
		if (!ok)
			cJSON_Delete(s);
	}
	ok = ok && cJSON_AddStringToObject(cpu, "vendor",
					   c->cpu.vendor == pcv_intel
					   ? "intel" : "unknown") &&
	     add_num(cpu, "family", c->cpu.family) &&
	     add_num(cpu, "model", c->cpu.model) &&
	     add_num(cpu, "stepping", c->cpu.stepping);
	ok = ok && add_num(cfg, "psb_period", (double)(c->config.psb_period
						       ? c->config.psb_period
						       : 4096)) &&
	     cJSON_AddBoolToObject(cfg, "noretcomp", c->config.noretcomp) &&
	     cJSON_AddBoolToObject(cfg, "tsc", c->config.tsc) &&
	     add_num(cfg, "cbr", c->config.cbr);
	for (size_t i = 0; ok && i < c->nthreads; i++)
		ok = add_thread(thr, &c->threads[i]);
	ok = ok && add_filter(root, c) && add_clock(root, c);
	if (ok && c->detached)
		ok = cJSON_AddBoolToObject(ex, "detached", true);
	else if (ok && c->exit_signal)
		ok = add_num(ex, "signal", c->exit_signal);
	else if (ok)
		ok = add_num(ex, "code", c->exit_code);
	if (!ok) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

static int save_timeline(const struct ptd_capture *c, struct ptd_diag *diag)
{
	_cleanup_free_ char *path = join(c->dir, TIMELINE_NAME);
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	if (!path)
		return -ENOMEM;
	f = open_memstream(&buf, &len);
	if (!f)
		return -errno;
	r = ptd_timeline_write(&c->tl, f);
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0)
		r = ptd_file_write_atomic(path, buf, len);
	free(buf);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cannot write: %s", path,
				 ptd_strerror(r));
	return 0;
}

int ptd_capture_save(const struct ptd_capture *c, struct ptd_diag *diag)
{
	_cleanup_free_ char *path = NULL;
	char *text;
	cJSON *root;
	int r;

	if (!c || !c->dir)
		return -EINVAL;
	for (size_t i = 0; i < c->nthreads; i++)
		if (!c->threads[i].pt || !c->threads[i].truth ||
		    !ptd_filename_is_plain(c->threads[i].pt) ||
		    !ptd_filename_is_plain(c->threads[i].truth))
			return ptd_diagf(diag, -EINVAL,
					 "thread %d: file names must be plain "
					 "names", (int)c->threads[i].tid);
	/* The timeline first: a manifest names a complete capture. */
	r = save_timeline(c, diag);
	if (r < 0)
		return r;
	path = join(c->dir, MANIFEST_NAME);
	root = build_manifest(c);
	if (!path || !root) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	r = ptd_file_write_atomic(path, text, strlen(text));
	cJSON_free(text);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cannot write: %s", path,
				 ptd_strerror(r));
	return 0;
}

/* ---- data files ------------------------------------------------------ */

int ptd_capture_open_pt(const struct ptd_capture *c, size_t idx, int *ret_fd,
			struct ptd_diag *diag)
{
	const struct ptd_capture_thread *th;
	uint64_t size;
	int fd;

	if (!c || idx >= c->nthreads || !ret_fd)
		return -EINVAL;
	th = &c->threads[idx];
	if (!ptd_filename_is_plain(th->pt))
		return ptd_diagf(diag, -PTD_EFORMAT, "\"%.64s\": not a plain "
				 "file name", th->pt);
	fd = open_data(c->dir, th->pt, &size, diag);
	if (fd < 0)
		return fd;
	if (size != th->pt_bytes) {
		(void)close(fd);
		return ptd_diagf(diag, -PTD_ECHECKSUM,
				 "%s/%s: %" PRIu64 " bytes, but the manifest's "
				 "pt_bytes says %" PRIu64, c->dir, th->pt, size,
				 th->pt_bytes);
	}
	*ret_fd = fd;
	return 0;
}

int ptd_capture_read_pt(const struct ptd_capture *c, size_t idx,
			uint8_t **ret_data, size_t *ret_len,
			struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	const struct ptd_capture_thread *th;
	uint8_t *data;
	int r;

	if (!ret_data || !ret_len)
		return -EINVAL;
	r = ptd_capture_open_pt(c, idx, &fd, diag);
	if (r < 0)
		return r;
	th = &c->threads[idx];
	if (th->pt_bytes > PTD_CAPTURE_MAX_PT)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "%s/%s: PT of %" PRIu64 " bytes exceeds the "
				 "limit of %" PRIu64, c->dir, th->pt,
				 th->pt_bytes, (uint64_t)PTD_CAPTURE_MAX_PT);
	data = malloc(th->pt_bytes ? th->pt_bytes : 1);
	if (!data)
		return -ENOMEM;
	r = read_exact(fd, data, th->pt_bytes);
	if (r < 0) {
		free(data);
		return ptd_diagf(diag, r, "%s/%s: read failed: %s", c->dir,
				 th->pt, ptd_strerror(r));
	}
	*ret_data = data;
	*ret_len = th->pt_bytes;
	return 0;
}

int ptd_capture_read_truth(const struct ptd_capture *c, size_t idx,
			   uint64_t **ret_ips, size_t *ret_n,
			   struct ptd_diag *diag)
{
	const struct ptd_capture_thread *th;
	_cleanup_free_ uint8_t *data = NULL;
	_cleanup_free_ char *origin = NULL;
	uint64_t *ips;
	size_t len = 0, n;
	int r;

	if (!c || idx >= c->nthreads || !ret_ips || !ret_n)
		return -EINVAL;
	th = &c->threads[idx];
	if (!ptd_filename_is_plain(th->truth))
		return ptd_diagf(diag, -PTD_EFORMAT, "\"%.64s\": not a plain "
				 "file name", th->truth);
	if (th->insns > CAPTURE_MAX_INSNS)
		return ptd_diagf(diag, -PTD_ELIMIT, "%s/%s: %" PRIu64 " IPs "
				 "exceed the limit", c->dir, th->truth,
				 th->insns);
	r = read_data(c->dir, th->truth, th->insns * VARINT_MAX, "truth",
		      &data, &len, NULL, diag);
	if (r < 0)
		return r;
	origin = join(c->dir, th->truth);
	if (!origin)
		return -ENOMEM;
	r = ptd_truth_decode(data, len, origin, &ips, &n, diag);
	if (r < 0)
		return r;
	if (n != th->insns) {
		free(ips);
		return ptd_diagf(diag, -PTD_ECHECKSUM,
				 "%s: holds %zu IPs, but the manifest's insns "
				 "says %" PRIu64, origin, n, th->insns);
	}
	*ret_ips = ips;
	*ret_n = n;
	return 0;
}
