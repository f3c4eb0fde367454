/* SPDX-License-Identifier: MIT */
/*
 * ptctl decode: a saved trace (capture, bundle, perf.data, LLDB bundle) or
 * raw PT bytes with the code they ran, as JSON lines on stdout (hello,
 * records, bye); and the options and output the decoding verbs share.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aspace/elf.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "record/binframe.h"
#include "record/jsonw.h"
#include "swpt/capture.h"
#include "decode/counters.h"
#include "decode/traces.h"
#include "sym/symbols.h"
#include "ptctl.h"

/* --top's default. */
#define PTCTL_COUNTERS_TOP 20u

/* The version of the hello record's stream format. */
#define PTCTL_PROTOCOL 1

void decode_args_init(struct decode_args *d)
{
	memset(d, 0, sizeof(*d));
	d->opts.path = PTD_PATH_BLOCK;
	d->opts.json_bodies = true;
	d->opts.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT) |
		       PTD_REC_BIT(PTD_REC_ERROR);
	d->opts.counters_top = PTCTL_COUNTERS_TOP;
}

int parse_records(const char *s, unsigned *ret)
{
	_cleanup_free_ char *copy = strdup(s);
	char *save = NULL, *tok;
	unsigned want = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int t = ptd_rec_type_parse(tok);

		if (t < 0) {
			errx_msg("--records: unknown record kind '%s' (kinds: "
				 "insn, block, event, error, call, "
				 "first_exec, counters, trace)",
				 tok);
			return -EINVAL;
		}
		want |= PTD_REC_BIT(t);
		/* a trace and its withdrawal are asked for together */
		if (t == PTD_REC_TRACE || t == PTD_REC_TRACE_WITHDRAWN)
			want |= PTD_REC_BIT(PTD_REC_TRACE) |
				PTD_REC_BIT(PTD_REC_TRACE_WITHDRAWN);
	}
	if (!want) {
		errx_msg("--records: no record kind given");
		return -EINVAL;
	}
	*ret = want | PTD_REC_BIT(PTD_REC_ERROR);
	return 0;
}

int parse_fields(const char *s, uint32_t *ret)
{
	_cleanup_free_ char *copy = strdup(s);
	char *save = NULL, *tok;
	uint32_t fields = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int f = ptd_field_parse(tok);

		if (f < 0) {
			errx_msg("--fields: unknown field '%.64s' (fields: %s)",
				 tok, ptd_field_list());
			return -EINVAL;
		}
		if (fields & PTD_FIELD_BIT(f)) {
			errx_msg("--fields: '%s' given twice", tok);
			return -EINVAL;
		}
		fields |= PTD_FIELD_BIT(f);
	}
	if (!fields) {
		errx_msg("--fields: no field given");
		return -EINVAL;
	}
	*ret = fields | PTD_FIELD_BIT(PTD_FIELD_TYPE);
	return 0;
}

/* "F/M[/S]" or "none". */
static int parse_cpu(const char *s, struct pt_cpu *cpu)
{
	uint64_t v[3] = { 0, 0, 0 };
	const char *p = s;
	int n = 0;

	memset(cpu, 0, sizeof(*cpu));
	if (!strcmp(s, "none"))
		return 0;
	while (n < 3) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		if (ptd_parse_u64n(p, len, 0, &v[n]) < 0 || v[n] > 0xffff)
			break;
		n++;
		if (!slash) {
			p = NULL;
			break;
		}
		p = slash + 1;
	}
	if (p || n < 2 || v[1] > 0xff || v[2] > 0xff) {
		errx_msg("--cpu: expected FAMILY/MODEL[/STEPPING] or 'none', "
			 "got '%s'",
			 s);
		return -EINVAL;
	}
	cpu->vendor = pcv_intel;
	cpu->family = (uint16_t)v[0];
	cpu->model = (uint8_t)v[1];
	cpu->stepping = (uint8_t)v[2];
	/* libipt knows a CPU by its errata table; one it does not know would
	 * silently get no errata workarounds. */
	{
		struct pt_errata errata;
		struct pt_version ver = pt_library_version();

		if (pt_cpu_errata(&errata, cpu) < 0) {
			errx_msg("--cpu %s: family %u model %u (0x%x) is "
				 "not a CPU libipt %u.%u.%u knows errata "
				 "for; give a known FAMILY/MODEL[/STEPPING], "
				 "or 'none' to decode without errata "
				 "workarounds",
				 s, (unsigned)cpu->family,
				 (unsigned)cpu->model, (unsigned)cpu->model,
				 (unsigned)ver.major, (unsigned)ver.minor,
				 (unsigned)ver.patch);
			memset(cpu, 0, sizeof(*cpu));
			return -EINVAL;
		}
	}
	return 0;
}

/* Handle an option shared by the decoding verbs; returns 1 if it was one,
 * 0 if not, -EINVAL on a bad value. */
int decode_option(struct decode_args *d, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 'r':
		return parse_records(arg, &d->opts.want) < 0 ? -EINVAL : 1;
	case PTCTL_FIELDS_OPT:
		return parse_fields(arg, &d->fields) < 0 ? -EINVAL : 1;
	case PTCTL_FORMAT_OPT:
		return parse_format(arg, &d->binary, &d->packed) < 0 ? -EINVAL
								     : 1;
	case 'P':
		if (!strcmp(arg, "insn"))
			d->opts.path = PTD_PATH_INSN;
		else if (!strcmp(arg, "block"))
			d->opts.path = PTD_PATH_BLOCK;
		else {
			errx_msg("--path: expected 'insn' or 'block', got "
				 "'%s'",
				 arg);
			return -EINVAL;
		}
		return 1;
	case 't':
		if (ptd_parse_u64(arg, 10, &v) < 0 || v == 0 || v > INT32_MAX) {
			errx_msg("--tid: expected a thread id, got '%s'", arg);
			return -EINVAL;
		}
		d->have_tid = true;
		d->tid = (long)v;
		return 1;
	case 'c':
		d->cpu_given = true;
		return parse_cpu(arg, &d->opts.cpu) < 0 ? -EINVAL : 1;
	default:
		return 0;
	}
}

int check_decode_args(const struct decode_args *d)
{
	if ((d->opts.want & PTD_REC_BIT(PTD_REC_BLOCK)) &&
	    d->opts.path != PTD_PATH_BLOCK) {
		errx_msg("--records block needs --path block");
		return -EINVAL;
	}
	return 0;
}

int parse_format(const char *s, bool *binary, bool *packed)
{
	if (!strcmp(s, "json") || !strcmp(s, "binary") ||
	    !strcmp(s, "packed")) {
		*binary = strcmp(s, "json") != 0;
		*packed = !strcmp(s, "packed");
		return 0;
	}
	errx_msg("--format: expected 'json', 'binary' or 'packed', got "
		 "'%.64s'", s);
	return -EINVAL;
}

int parse_jobs(const char *s, unsigned *ret)
{
	uint64_t v;

	if (ptd_parse_u64(s, 10, &v) < 0 || v == 0 ||
	    v > PTD_DECODE_MAX_JOBS) {
		errx_msg("--jobs: expected a number of threads from 1 to %u, "
			 "got '%.64s'", PTD_DECODE_MAX_JOBS, s);
		return -EINVAL;
	}
	*ret = (unsigned)v;
	return 0;
}

/* The output on stdout: JSON lines, or binary frames (--format binary;
 * record/binframe.h) of the same records. */
struct output {
	bool binary;
	struct ptd_jsonw w;
	struct ptd_binw bw;
	/* --records first_exec,counters: one table over every thread */
	struct ptd_counters *counters;
	long pid;
	unsigned want;		/* PTD_REC_BIT()s asked for */
	struct ptd_decode_stats total;
	unsigned threads;
};

static int output_open(struct output *out, const struct decode_args *d)
{
	out->binary = d->binary;
	if (out->binary) {
		int e = ptd_binw_init(&out->bw, STDOUT_FILENO, d->fields);

		if (d->packed)
			ptd_binw_set_packed(&out->bw);
		return e;
	}
	if (ptd_jsonw_init(&out->w, STDOUT_FILENO, 0) < 0)
		return -ENOMEM;
	ptd_jsonw_set_fields(&out->w, d->fields);
	return 0;
}

/* Flush and free; the first write error. */
static int output_close(struct output *out)
{
	return out->binary ? ptd_binw_fini(&out->bw) : ptd_jsonw_fini(&out->w);
}

static int output_err(const struct output *out)
{
	return out->binary ? out->bw.err : out->w.err;
}

static int output_record(void *ctx, const struct ptd_record *rec)
{
	struct output *out = ctx;

	if (out->binary)
		return ptd_binw_put(&out->bw, rec);
	return ptd_jsonw_put(&out->w, rec);
}

/* A run of records (decoder.h, opts.batch). */
static int output_records(void *ctx, const struct ptd_record *recs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = output_record(ctx, &recs[i]);

		if (r)
			return r;
	}
	return 0;
}

/* A run of addresses (decoder.h, opts.ips): binary ip/tid/pid only. */
static int output_ips(void *ctx, pid_t pid, pid_t tid, const uint64_t *ips,
		      size_t n)
{
	struct output *out = ctx;

	return ptd_binw_ips(&out->bw, pid, tid, ips, n);
}

/* Records in runs, and where the output reads nothing of an insn record
 * but its address, thread and process, runs of addresses instead: the
 * decoder decides where it may (no call stack, counters...).  Not with
 * --symbols: its notes on files without symbols come from resolving
 * the records' instructions.  @gate must outlive the decode; @out is
 * the decode's ctx (or its first member). */
static void output_runs(struct output *out, struct ptd_decode_opts *o,
			atomic_bool *gate)
{
	o->batch = output_records;
	o->batch_of = output_record;
	o->ips = output_ips;
	atomic_init(gate, out->binary && ptd_binw_takes_ips(&out->bw) &&
				  !o->symbols);
	o->ips_gate = gate;
}

/* A ready line; @end: the stream's last (bye: the end frame). */
static int output_line(struct output *out, const char *line, size_t n,
		       bool end)
{
	if (!out->binary)
		return ptd_jsonw_line(&out->w, line, n);
	return end ? ptd_binw_end(&out->bw, line, n)
		   : ptd_binw_line(&out->bw, line, n);
}

static int output_json_end(struct output *out, cJSON *obj, bool end)
{
	_cleanup_free_ char *s = cJSON_PrintUnformatted(obj);
	_cleanup_free_ char *line = NULL;
	int n;

	cJSON_Delete(obj);
	if (!s)
		return -ENOMEM;
	n = asprintf(&line, "%s\n", s);
	if (n < 0) {
		line = NULL;
		return -ENOMEM;
	}
	return output_line(out, line, (size_t)n, end);
}

static int output_json(struct output *out, cJSON *obj)
{
	return output_json_end(out, obj, false);
}

static void hex_field(cJSON *o, const char *key, uint64_t v)
{
	char buf[24];

	(void)snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	cJSON_AddStringToObject(o, key, buf);
}

static int output_hello(struct output *out, const char *source,
			const char *input, long pid)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return -ENOMEM;
	cJSON_AddStringToObject(o, "type", "hello");
	cJSON_AddNumberToObject(o, "protocol", PTCTL_PROTOCOL);
	cJSON_AddStringToObject(o, "source", source);
	cJSON_AddStringToObject(o, "input", input);
	if (pid > 0)
		cJSON_AddNumberToObject(o, "pid", (double)pid);
	return output_json(out, o);
}

static int output_bye(struct output *out, const char *reason)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return -ENOMEM;
	cJSON_AddStringToObject(o, "type", "bye");
	cJSON_AddStringToObject(o, "reason", reason);
	cJSON_AddNumberToObject(o, "threads", out->threads);
	hex_field(o, "insns", out->total.insns);
	if (out->want & PTD_REC_BIT(PTD_REC_BLOCK))
		hex_field(o, "blocks", out->total.blocks);
	hex_field(o, "events", out->total.events);
	hex_field(o, "errors", out->total.errors);
	hex_field(o, "trace_bytes", out->total.bytes);
	hex_field(o, "skipped_bytes", out->total.skipped);
	return output_json_end(out, o, true);
}

static void stats_add(struct ptd_decode_stats *t,
		      const struct ptd_decode_stats *s)
{
	t->insns += s->insns;
	t->blocks += s->blocks;
	t->events += s->events;
	t->errors += s->errors;
	t->bytes += s->bytes;
	t->skipped += s->skipped;
	t->tl_applied += s->tl_applied;
}

/* --jobs: parts of thread @tid's trace the parallel decoder left to the
 * serial one (decode/parallel.h); the records are the same either way. */
static void note_serial(long tid, const struct ptd_decode_stats *st)
{
	if (st->serial_parts)
		errx_msg("note: thread %ld: %" PRIu64 " of its trace's parts "
			 "decoded serially: %s",
			 tid, st->serial_parts,
			 st->serial_why ? st->serial_why : "?");
}

/* Decode every (or one) thread of the capture in @dir to stdout. */
/* The sink of a saved trace's decode: hello from what the input says of
 * itself, records to the writer, each thread's problems to stderr. */
struct input_output {
	struct output out;
	const char *path;
	bool failed;		/* a thread ended early */
	bool hello;		/* the stream has begun */
};

static int input_info(void *ctx, const struct ptd_input_info *info)
{
	struct input_output *io = ctx;

	io->hello = true;
	io->out.pid = info->pid;
	return output_hello(&io->out, info->source, io->path, info->pid);
}

static void input_thread_done(void *ctx, pid_t tid,
			      const struct ptd_decode_stats *st, int err,
			      const struct ptd_diag *diag)
{
	struct input_output *io = ctx;

	stats_add(&io->out.total, st);
	io->out.threads++;
	note_serial((long)tid, st);
	if (err < 0) {
		decode_thread_failed(tid, err, diag);
		io->failed = true;
	}
}

void decode_input_opts(const struct decode_args *d, struct ptd_input_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->streams = true;	/* the user's own FIFO or stdin */
	o->decode = d->opts;
	o->cpu_given = d->cpu_given;
	o->have_tid = d->have_tid;
	o->tid = (pid_t)d->tid;
	o->sysroot = d->sysroot;
	o->buildid_dir = d->buildid_dir;
	o->kernel = d->kernel;
}

int decode_symbols_open(struct decode_args *d)
{
	struct ptd_symbols_opts so = { d->debug_dir, d->perfmap_dir };

	if ((d->debug_dir || d->perfmap_dir) && !d->symbols) {
		errx_msg("--debug-dir and --perf-map-dir are for --symbols");
		return EXIT_USAGE;
	}
	if (d->symbols && ptd_symbols_new(&so, &d->opts.symbols) < 0) {
		errx_msg("out of memory");
		return EXIT_INPUT;
	}
	return 0;
}

void decode_symbols_close(struct decode_args *d)
{
	/* Files whose symbols could not be read: the records say nothing
	 * of them, so say it here. */
	for (size_t i = 0; d->opts.symbols &&
			   ptd_symbols_failure(d->opts.symbols, i); i++)
		errx_msg("symbols: %s", ptd_symbols_failure(d->opts.symbols, i));
	ptd_symbols_free(d->opts.symbols);
	d->opts.symbols = NULL;
}

void decode_thread_failed(pid_t tid, int err, const struct ptd_diag *diag)
{
	errx_msg("thread %ld: %s", (long)tid,
		 diag->msg[0] ? diag->msg : ptd_strerror(err));
}

void decode_notice(void *ctx, const struct ptd_diag *diag)
{
	(void)ctx;
	if (diag && diag->msg[0])
		errx_msg("note: %s", diag->msg);
}

/* Decode a saved trace of any kind (input/input.h). */
int decode_input(const char *path, const struct decode_args *d)
{
	struct ptd_input_opts o;
	struct ptd_diag diag = { "" };
	struct input_output io;
	atomic_bool ips_gate;
	struct ptd_input_sink sink = { input_info, output_record,
				       input_thread_done, &io, decode_notice };
	size_t thread_errors = 0;
	int r, ret = 0;

	memset(&io, 0, sizeof(io));
	io.path = path;
	io.out.want = d->opts.want;
	if (output_open(&io.out, d) < 0) {
		errx_msg("out of memory");
		return EXIT_INPUT;
	}
	decode_input_opts(d, &o);
	/* (io.out is io's first member: the sink's ctx is both) */
	output_runs(&io.out, &o.decode, &ips_gate);
	/* counts and first executions over the whole trace, every thread:
	 * the first execution is the first in the output */
	if ((d->opts.want & PTD_COUNTERS_KINDS) &&
	    (ptd_counters_new(0, &io.out.counters) < 0 ||
	     ((d->opts.want & PTD_REC_BIT(PTD_REC_TRACE)) &&
	      ptd_counters_enable_traces(io.out.counters,
					 d->opts.trace_threshold) < 0))) {
		ptd_counters_free(io.out.counters);
		(void)output_close(&io.out);
		errx_msg("out of memory");
		return EXIT_INPUT;
	}
	o.decode.counters = io.out.counters;
	r = ptd_input_decode(path, &o, &sink, &thread_errors, &diag);
	if (r >= 0 && (d->opts.want & PTD_REC_BIT(PTD_REC_COUNTERS)))
		r = ptd_counters_emit(io.out.counters, d->opts.counters_top,
				      (pid_t)io.out.pid, 0, output_record,
				      &io.out);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		ret = EXIT_INPUT;
		/* a refused input before any record has no stream at all */
		if (!io.hello)
			goto out;
	} else if (thread_errors || io.failed) {
		ret = EXIT_INPUT;
	}
	if (r <= 0)
		r = output_bye(&io.out, ret ? "input error" : "end of trace");
	ptd_counters_free(io.out.counters);
	if (output_close(&io.out) < 0 || r < 0) {
		errx_msg("writing records: %s",
			 ptd_strerror(r < 0 ? r : output_err(&io.out)));
		ret = EXIT_INPUT;
	}
	if (!ret && io.out.total.errors) {
		errx_msg("%" PRIu64 " decode errors (see the error records)",
			 io.out.total.errors);
		ret = EXIT_DECODE_ERRORS;
	}
	return ret;
out:
	ptd_counters_free(io.out.counters);
	(void)output_close(&io.out);
	return ret;
}

/* ptxed-style raw input: one PT file and the code it ran. */
struct raw_input {
	const char *pt;
	struct ptd_image *img;
	struct ptd_iscache *ic;
	long pid;
};

/* --raw FILE[:FROM[-TO]]:ADDR, as ptxed takes it: bytes [FROM, TO) of FILE
 * (default: all of it) loaded at ADDR. */
static int add_raw(struct raw_input *ri, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	_cleanup_free_ char *path = NULL;
	struct ptd_diag diag = { "" };
	struct stat st;
	uint64_t addr, from = 0, to = 0;
	bool range = false;
	int r;

	if (!colon || colon == arg ||
	    ptd_parse_u64(colon + 1, 0, &addr) < 0) {
		errx_msg("--raw: expected FILE[:FROM[-TO]]:ADDRESS, got '%s'",
			 arg);
		return EXIT_USAGE;
	}
	path = strndup(arg, (size_t)(colon - arg));
	if (!path)
		return EXIT_INPUT;
	/* An optional FROM[-TO] before the address. */
	char *c2 = strrchr(path, ':');
	if (c2 && c2 != path) {
		char *dash = strchr(c2 + 1, '-');
		size_t flen = dash ? (size_t)(dash - c2 - 1) : strlen(c2 + 1);

		if (ptd_parse_u64n(c2 + 1, flen, 0, &from) == 0 &&
		    (!dash || ptd_parse_u64(dash + 1, 0, &to) == 0)) {
			range = true;
			*c2 = 0;
		}
	}
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		errx_msg("--raw: '%s' is not a non-empty regular file", path);
		return EXIT_INPUT;
	}
	if (!range || !to)
		to = (uint64_t)st.st_size;
	if (from >= to || to > (uint64_t)st.st_size) {
		errx_msg("--raw: range 0x%" PRIx64 "-0x%" PRIx64
			 " is not inside '%s' (0x%" PRIx64 " bytes)",
			 from, to, path, (uint64_t)st.st_size);
		return EXIT_INPUT;
	}
	r = ptd_image_map_file(ri->img, path, from, to - from, addr, NULL,
			       &diag);
	if (r < 0) {
		errx_msg("--raw: %s", diag.msg[0] ? diag.msg
						   : ptd_strerror(r));
		return EXIT_INPUT;
	}
	return 0;
}

/* --elf FILE[:BASE] */
static int add_elf(struct raw_input *ri, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	_cleanup_free_ char *path = NULL;
	struct ptd_diag diag = { "" };
	uint64_t base = 0;
	bool has_base = false;
	int r;

	if (colon && ptd_parse_u64(colon + 1, 0, &base) == 0) {
		has_base = true;
		path = strndup(arg, (size_t)(colon - arg));
	} else {
		path = strdup(arg);
	}
	if (!path)
		return EXIT_INPUT;
	r = ptd_elf_load(ri->img, path, has_base, base, &diag);
	if (r < 0) {
		errx_msg("--elf: %s", diag.msg[0] ? diag.msg
						   : ptd_strerror(r));
		return EXIT_INPUT;
	}
	return 0;
}

static int decode_raw(struct raw_input *ri, const struct decode_args *d)
{
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats st;
	struct output out;
	char *data = NULL;
	size_t len = 0;
	int r, ret = 0;

	r = ptd_file_read_all(ri->pt, PTD_CAPTURE_MAX_PT, &data, &len);
	if (r < 0) {
		errx_msg("cannot read PT file '%s': %s", ri->pt,
			 ptd_strerror(r));
		return EXIT_INPUT;
	}
	memset(&out, 0, sizeof(out));
	out.want = d->opts.want;
	if (output_open(&out, d) < 0) {
		free(data);
		return EXIT_INPUT;
	}
	memset(&a, 0, sizeof(a));
	memset(&st, 0, sizeof(st));
	a.pt = (const uint8_t *)data;
	a.len = len;
	a.pid = (pid_t)ri->pid;
	a.tid = d->have_tid ? (pid_t)d->tid : (pid_t)ri->pid;
	a.img = ri->img;
	r = output_hello(&out, "raw", ri->pt, ri->pid);
	if (r == 0) {
		struct ptd_decode_opts o = d->opts;
		atomic_bool ips_gate;

		output_runs(&out, &o, &ips_gate);
		r = ptd_decode_thread(&o, &a, output_record, &out, &st);
	}
	stats_add(&out.total, &st);
	note_serial((long)a.tid, &st);
	out.threads = 1;
	if (r == 0)
		r = output_bye(&out, "end of trace");
	if (output_close(&out) < 0 || r != 0) {
		errx_msg("decoding '%s': %s", ri->pt,
			 ptd_strerror(r < 0 ? r : output_err(&out)));
		ret = EXIT_INPUT;
	} else if (out.total.errors) {
		errx_msg("%" PRIu64 " decode errors (see the error records)",
			 out.total.errors);
		ret = EXIT_DECODE_ERRORS;
	}
	free(data);
	return ret;
}

/* --from-binary FILE: frames to JSON lines on stdout. */
static int decode_from_binary(const char *path)
{
	struct ptd_diag diag = { "" };
	struct ptd_jsonw w;
	int fd = STDIN_FILENO, r, e;

	if (strcmp(path, "-")) {
		fd = ptd_file_open_regular(AT_FDCWD, path, O_RDONLY, NULL,
					   &diag);
		if (fd < 0) {
			errx_msg("%s", diag.msg[0] ? diag.msg
						   : ptd_strerror(fd));
			return EXIT_INPUT;
		}
	}
	if (ptd_jsonw_init(&w, STDOUT_FILENO, 0) < 0) {
		errx_msg("out of memory");
		r = -ENOMEM;
	} else {
		r = ptd_bin_to_json(fd, &w, &diag);
		e = ptd_jsonw_fini(&w);
		if (r == 0 && e < 0)
			r = ptd_diagf(&diag, e, "writing JSON lines: %s",
				      ptd_strerror(e));
		if (r < 0)
			errx_msg("%s: %s", path, diag.msg);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	return r < 0 ? EXIT_INPUT : 0;
}

/* --filter:addr<n>_cfg|_a|_b, as ptxed takes them: option values
 * FILTER_OPT + 3 * n + (0 cfg, 1 a, 2 b). */
#define FILTER_OPT 0x100
#define FILTER_RANGES 4
#define FROM_BINARY_OPT 0x201
#define TRACE_THRESHOLD_OPT 0x202

static const struct option decode_long[] = {
	{ "filter:addr0_cfg", required_argument, NULL, FILTER_OPT + 0 },
	{ "filter:addr0_a", required_argument, NULL, FILTER_OPT + 1 },
	{ "filter:addr0_b", required_argument, NULL, FILTER_OPT + 2 },
	{ "filter:addr1_cfg", required_argument, NULL, FILTER_OPT + 3 },
	{ "filter:addr1_a", required_argument, NULL, FILTER_OPT + 4 },
	{ "filter:addr1_b", required_argument, NULL, FILTER_OPT + 5 },
	{ "filter:addr2_cfg", required_argument, NULL, FILTER_OPT + 6 },
	{ "filter:addr2_a", required_argument, NULL, FILTER_OPT + 7 },
	{ "filter:addr2_b", required_argument, NULL, FILTER_OPT + 8 },
	{ "filter:addr3_cfg", required_argument, NULL, FILTER_OPT + 9 },
	{ "filter:addr3_a", required_argument, NULL, FILTER_OPT + 10 },
	{ "filter:addr3_b", required_argument, NULL, FILTER_OPT + 11 },
	{ "records", required_argument, NULL, 'r' },
	{ "fields", required_argument, NULL, PTCTL_FIELDS_OPT },
	{ "format", required_argument, NULL, PTCTL_FORMAT_OPT },
	{ "from-binary", required_argument, NULL, FROM_BINARY_OPT },
	{ "path", required_argument, NULL, 'P' },
	{ "tid", required_argument, NULL, 't' },
	{ "cpu", required_argument, NULL, 'c' },
	{ "jobs", required_argument, NULL, 'j' },
	{ "part-size", required_argument, NULL, 'z' },
	{ "pt", required_argument, NULL, 'p' },
	{ "raw", required_argument, NULL, 'R' },
	{ "elf", required_argument, NULL, 'e' },
	{ "pid", required_argument, NULL, 'i' },
	{ "sysroot", required_argument, NULL, 'S' },
	{ "buildid-dir", required_argument, NULL, 'B' },
	{ "kernel", required_argument, NULL, 'K' },
	{ "symbols", no_argument, NULL, 'Y' },
	{ "top", required_argument, NULL, 'T' },
	{ "trace-threshold", required_argument, NULL, TRACE_THRESHOLD_OPT },
	{ "debug-dir", required_argument, NULL, 'D' },
	{ "perf-map-dir", required_argument, NULL, 'M' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void help_decode(void)
{
	printf("Usage: ptctl decode [OPTIONS] TRACE\n"
	       "       ptctl decode [OPTIONS] --pt FILE (--elf FILE[:BASE] | "
	       "--raw FILE[:FROM[-TO]]:ADDR)...\n\n"
	       "Decode a trace into JSON lines on stdout (hello, records, "
	       "bye).\nTRACE is a capture directory, a ptd bundle, a "
	       "perf.data file ('-': a pipe-mode\nstream on stdin) or an "
	       "LLDB trace bundle (its directory or trace.json);\nthe kind "
	       "is found from the content.\n\n"
	       "  --records KINDS   insn,block,event,error,call,first_exec,"
	       "counters,trace\n"
	       "                    (default insn,event,error; call: call, "
	       "return and stack_reset\n"
	       "                    records; first_exec: an instruction's "
	       "first execution;\n"
	       "                    counters: exact execution counts at the end; trace: hot "
	       "traces formed and\n"
	       "                    withdrawn, as DynamoRIO builds them)\n"
	       "  --trace-threshold N  trace: executions of a trace head "
	       "that make it hot\n"
	       "                    (default %u, DynamoRIO's)\n"
	       "  --top N           counters: the N most executed "
	       "instructions, blocks and\n"
	       "                    functions (default %u; 0: all)\n"
	       "  --fields NAMES    what insn and block records carry, e.g. "
	       "ip,tid (default all:\n"
	       "                    type,pid,tid,ip,end_ip,ninsn,size,raw,"
	       "iclass,mode,isid,module,\n"
	       "                    offset,flags,tsc,time,wall; type always)\n"
	       "  --format json|binary|packed  JSON lines (default), or "
	       "binary frames\n"
	       "                    (doc/protocol.md, \"Binary framing\"): "
	       "the same records;\n"
	       "                    packed: runs of ip[,tid,pid] as "
	       "address frames\n"
	       "  --from-binary FILE  no decode: convert binary frames "
	       "(ptctl decode or stream\n"
	       "                    --format binary/packed; '-': stdin) into the "
	       "JSON lines they carry\n"
	       "  --path insn|block decoder path (default block; same "
	       "records)\n"
	       "  --tid TID         one thread of a capture / label for raw "
	       "input\n"
	       "  --cpu F/M[/S]     CPU the trace came from, for errata "
	       "(default: the capture's; 'none')\n"
	       "  --jobs N          decode each thread's trace on N threads "
	       "(1-%u, default 1):\n"
	       "                    cut at its PSBs, the same records\n"
	       "  --part-size BYTES trace bytes per thread's part (default: "
	       "automatic;\n"
	       "                    1: a part at every PSB)\n"
	       "  --pt FILE         raw Intel PT bytes\n"
	       "  --elf FILE[:BASE] executable segments of an ELF file, "
	       "optionally relocated to BASE\n"
	       "  --raw FILE[:FROM[-TO]]:ADDR  bytes FROM..TO of a file (default "
	       "all) loaded at ADDR\n"
	       "  --pid PID         label for raw input\n"
	       "  --filter:addr<n>_cfg CFG, --filter:addr<n>_a A, "
	       "--filter:addr<n>_b B   (n 0..3)\n"
	       "                    the IP filter --pt input was recorded "
	       "with, as ptxed takes it:\n"
	       "                    IA32_RTIT_CTL.ADDRn_CFG (0 off, 1 "
	       "filter, 2 TraceStop) and\n"
	       "                    IA32_RTIT_ADDRn_A/B (inclusive); with "
	       "--cpu, lets the decoder\n"
	       "                    place the IP-less TIP.PGDs of erratum "
	       "SKL014\n"
	       "  --sysroot DIR     look for the traced files under DIR "
	       "first\n"
	       "  --buildid-dir DIR perf's build-id cache (default "
	       "~/.debug, then\n"
	       "                    /usr/lib/debug/.build-id)\n"
	       "  --kernel FILE     the kernel's code for a trace of kernel "
	       "code: a kcore copy\n"
	       "                    or a vmlinux (default: the perf.data "
	       "directory's kcore_dir,\n"
	       "                    then by build-id, then vmlinux-RELEASE "
	       "in /usr/lib/debug/boot,\n"
	       "                    /boot, ... under --sysroot)\n"
	       "  --symbols         each insn and block record names the "
	       "function of its ip:\n"
	       "                    \"sym\":\"NAME+0xOFFSET\" (.symtab, "
	       ".dynsym, NAME@plt, debug files,\n"
	       "                    the vDSO, perf maps of JIT code)\n"
	       "  --debug-dir DIR   where separate debug files are (default "
	       "/usr/lib/debug):\n"
	       "                    DIR/.build-id/xx/yyyy.debug, DIR/PATH-DIR/"
	       "DEBUGLINK\n"
	       "  --perf-map-dir DIR  where perf-PID.map files of JIT code "
	       "are (default /tmp)\n",
	       PTD_TRACES_DEFAULT_THRESHOLD, PTCTL_COUNTERS_TOP,
	       PTD_DECODE_MAX_JOBS);
}

/* One --filter:addr<n>_* option (@c from decode_long) into @f. */
static int filter_option(struct pt_conf_addr_filter *f, int c,
			 const char *name, const char *arg)
{
	uint64_t *ab[FILTER_RANGES][2] = {
		{ &f->addr0_a, &f->addr0_b }, { &f->addr1_a, &f->addr1_b },
		{ &f->addr2_a, &f->addr2_b }, { &f->addr3_a, &f->addr3_b },
	};
	unsigned n = (unsigned)(c - FILTER_OPT) / 3;
	unsigned k = (unsigned)(c - FILTER_OPT) % 3;
	uint64_t v;

	if (ptd_parse_u64(arg, 0, &v) < 0) {
		errx_msg("--%s: expected a number, got '%s'", name, arg);
		return -EINVAL;
	}
	if (k == 0) {
		if (v > 2) {
			errx_msg("--%s: expected 0 (off), 1 (filter) or 2 "
				 "(TraceStop), got '%s'",
				 name, arg);
			return -EINVAL;
		}
		f->config.addr_cfg &= ~(0xfull << (4 * n));
		f->config.addr_cfg |= v << (4 * n);
		return 0;
	}
	*ab[n][k - 1] = v;
	return 0;
}

/* Each range in use runs from its A up to its B. */
static int check_filter(const struct pt_conf_addr_filter *f)
{
	const uint64_t ab[FILTER_RANGES][2] = {
		{ f->addr0_a, f->addr0_b }, { f->addr1_a, f->addr1_b },
		{ f->addr2_a, f->addr2_b }, { f->addr3_a, f->addr3_b },
	};

	for (unsigned n = 0; n < FILTER_RANGES; n++) {
		if (!((f->config.addr_cfg >> (4 * n)) & 0xf))
			continue;
		if (ab[n][0] > ab[n][1]) {
			errx_msg("--filter:addr%u_a 0x%" PRIx64 " is above "
				 "--filter:addr%u_b 0x%" PRIx64,
				 n, ab[n][0], n, ab[n][1]);
			return -EINVAL;
		}
	}
	return 0;
}

int verb_decode(int argc, char **argv)
{
	struct decode_args d;
	struct raw_input ri;
	int c, r, li = 0, ret = 0;

	decode_args_init(&d);
	memset(&ri, 0, sizeof(ri));
	(void)ptd_iscache_new(&ri.ic);
	(void)ptd_image_new(ri.ic, "raw", &ri.img);
	if (!ri.img) {
		errx_msg("out of memory");
		ptd_iscache_free(ri.ic);
		return EXIT_INPUT;
	}
	bool have_code = false;
	const char *filter_arg = NULL;	/* the first --filter: option */
	const char *from_binary = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", decode_long, &li)) != -1) {
		uint64_t v;

		if (c >= FILTER_OPT && c < FILTER_OPT + 3 * FILTER_RANGES) {
			if (!filter_arg)
				filter_arg = decode_long[li].name;
			if (filter_option(&d.opts.addr_filter, c,
					  decode_long[li].name, optarg) < 0) {
				ret = EXIT_USAGE;
				goto out;
			}
			continue;
		}
		r = decode_option(&d, c, optarg);
		if (r < 0) {
			ret = EXIT_USAGE;
			goto out;
		}
		if (r > 0)
			continue;
		switch (c) {
		case 'p':
			ri.pt = optarg;
			break;
		case 'j':
			if (parse_jobs(optarg, &d.opts.jobs) < 0)
				ret = EXIT_USAGE;
			break;
		case 'z':
			if (ptd_parse_u64(optarg, 0, &v) < 0 || v == 0 ||
			    v > UINT32_MAX) {
				errx_msg("--part-size: expected a number of "
					 "bytes from 1 to %u, got '%s'",
					 UINT32_MAX, optarg);
				ret = EXIT_USAGE;
			}
			d.opts.part_bytes = (uint32_t)v;
			break;
		case 'R':
			ret = add_raw(&ri, optarg);
			have_code = true;
			break;
		case 'e':
			ret = add_elf(&ri, optarg);
			have_code = true;
			break;
		case 'i':
			if (ptd_parse_u64(optarg, 10, &v) < 0 || v == 0 ||
			    v > INT32_MAX) {
				errx_msg("--pid: expected a process id, got "
					 "'%s'",
					 optarg);
				ret = EXIT_USAGE;
			}
			ri.pid = (long)v;
			break;
		case 'S':
			d.sysroot = optarg;
			break;
		case 'B':
			d.buildid_dir = optarg;
			break;
		case 'K':
			d.kernel = optarg;
			break;
		case 'Y':
			d.symbols = true;
			break;
		case 'T':
			if (ptd_parse_u64(optarg, 10, &v) < 0 ||
			    v > UINT32_MAX) {
				errx_msg("--top: expected a number of counted "
					 "items (0: all), got '%s'",
					 optarg);
				ret = EXIT_USAGE;
			}
			d.opts.counters_top = (uint32_t)v;
			break;
		case 'D':
			d.debug_dir = optarg;
			break;
		case 'M':
			d.perfmap_dir = optarg;
			break;
		case TRACE_THRESHOLD_OPT:
			if (ptd_parse_u64(optarg, 10, &v) < 0 || v == 0 ||
			    v > PTD_TRACES_MAX_THRESHOLD) {
				errx_msg("--trace-threshold: expected executions "
					 "of a trace head, 1 to %u, got '%s'",
					 PTD_TRACES_MAX_THRESHOLD, optarg);
				ret = EXIT_USAGE;
			}
			d.opts.trace_threshold = (uint32_t)v;
			break;
		case FROM_BINARY_OPT:
			from_binary = optarg;
			break;
		case 'h':
			help_decode();
			goto out;
		default:
			ret = EXIT_USAGE;
			break;
		}
		if (ret)
			goto out;
	}
	if (from_binary) {
		if (optind != argc || ri.pt || have_code || d.binary) {
			errx_msg("--from-binary FILE takes no trace and no "
				 "--format: it converts frames to JSON lines");
			ret = EXIT_USAGE;
		} else {
			ret = decode_from_binary(from_binary);
		}
		goto out;
	}
	if (check_decode_args(&d) < 0 ||
	    check_filter(&d.opts.addr_filter) < 0) {
		ret = EXIT_USAGE;
		goto out;
	}
	ret = decode_symbols_open(&d);
	if (ret)
		goto out;
	if (filter_arg && !ri.pt) {
		errx_msg("--%s is for --pt input: a capture, bundle or "
			 "perf.data carries the filter it was recorded with",
			 filter_arg);
		ret = EXIT_USAGE;
		goto out;
	}
	if (ri.pt) {
		if (optind != argc) {
			errx_msg("--pt takes no TRACE argument");
			ret = EXIT_USAGE;
		} else if (!have_code) {
			errx_msg("--pt needs the code it ran: --elf FILE or "
				 "--raw FILE:ADDR");
			ret = EXIT_USAGE;
		} else {
			ret = decode_raw(&ri, &d);
		}
		goto out;
	}
	if (have_code || optind + 1 != argc) {
		errx_msg("expected one TRACE, or --pt FILE with --elf/"
			 "--raw (see ptctl decode --help)");
		ret = EXIT_USAGE;
		goto out;
	}
	ret = decode_input(argv[optind], &d);
out:
	decode_symbols_close(&d);
	ptd_image_free(ri.img);
	ptd_iscache_free(ri.ic);
	return ret;
}
