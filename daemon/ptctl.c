/* SPDX-License-Identifier: MIT */
/*
 * ptctl: ptd's command-line client.
 *
 *   ptctl trace [OPTIONS] -- PROGRAM [ARGS...]
 *   ptctl decode [OPTIONS] TRACE (capture, bundle, perf.data, LLDB bundle)
 *   ptctl decode [OPTIONS] --pt FILE (--elf FILE[:BASE] |
 *                --raw FILE[:FROM[-TO]]:ADDR)... [--cpu F/M[/S]]
 *                [--filter:addr<n>_cfg|_a|_b VALUE]...
 *   ptctl verify CAPTURE_DIR
 *
 * Exit status: 0 done; 1 bad usage; 2 an input could not be used (the
 * message says which and why); 3 the trace decoded with errors (error
 * records are in the stream); 4 verify found a difference from the ground
 * truth.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "aspace/elf.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "decode/decoder.h"
#include "daemon/session.h"
#include "bundle/bundle.h"
#include "input/input.h"
#include "lldb/export.h"
#include "perfdata/write.h"
#include "record/jsonw.h"
#include "swpt/capture.h"
#include "swpt/replay.h"
#include "swpt/tracer.h"

#define PTCTL_PROTOCOL 1

enum {
	EXIT_USAGE = 1,
	EXIT_INPUT = 2,
	EXIT_DECODE_ERRORS = 3,
	EXIT_MISMATCH = 4,
	/* daemon verbs */
	EXIT_CONNECT = 5,	/* ptd not running, or the socket refused us */
	EXIT_REFUSED = 6,	/* ptd refused the request (bad request...) */
	EXIT_NOT_FOUND = 7,	/* no such process / session */
	EXIT_PERMISSION = 8,	/* not allowed to trace that process */
	EXIT_NO_PT = 9,		/* no Intel PT, software source disabled */
	EXIT_LIMIT = 10,	/* a ptd limit (sessions, subscribers) */
	EXIT_STREAM = 11,	/* the stream ended on error or shutdown */
};

static const char *arg_program = "ptctl";

__attribute__((format(printf, 1, 2))) static void errx_msg(const char *fmt,
							    ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", arg_program);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Options every decoding verb shares. */
struct decode_args {
	struct ptd_decode_opts opts;
	bool cpu_given;		/* --cpu, also 'none' */
	bool have_tid;
	long tid;
	const char *sysroot;
	const char *buildid_dir;
	const char *kernel;
};

static void decode_args_init(struct decode_args *d)
{
	memset(d, 0, sizeof(*d));
	d->opts.path = PTD_PATH_BLOCK;
	d->opts.json_bodies = true;
	d->opts.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT) |
		       PTD_REC_BIT(PTD_REC_ERROR);
}

static int parse_records(const char *s, unsigned *ret)
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
				 "insn, block, event, error)",
				 tok);
			return -EINVAL;
		}
		want |= PTD_REC_BIT(t);
	}
	if (!want) {
		errx_msg("--records: no record kind given");
		return -EINVAL;
	}
	*ret = want | PTD_REC_BIT(PTD_REC_ERROR);
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
static int decode_option(struct decode_args *d, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 'r':
		return parse_records(arg, &d->opts.want) < 0 ? -EINVAL : 1;
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

static int check_decode_args(const struct decode_args *d)
{
	if ((d->opts.want & PTD_REC_BIT(PTD_REC_BLOCK)) &&
	    d->opts.path != PTD_PATH_BLOCK) {
		errx_msg("--records block needs --path block");
		return -EINVAL;
	}
	return 0;
}

/* The output: JSON lines on stdout. */
struct output {
	struct ptd_jsonw w;
	unsigned want;		/* PTD_REC_BIT()s asked for */
	struct ptd_decode_stats total;
	unsigned threads;
};

static int output_record(void *ctx, const struct ptd_record *rec)
{
	struct output *out = ctx;

	return ptd_jsonw_put(&out->w, rec);
}

static int output_json(struct output *out, cJSON *obj)
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
	return ptd_jsonw_line(&out->w, line, (size_t)n);
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
	return output_json(out, o);
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
	return output_hello(&io->out, info->source, io->path, info->pid);
}

static void input_thread_done(void *ctx, pid_t tid,
			      const struct ptd_decode_stats *st, int err,
			      const struct ptd_diag *diag)
{
	struct input_output *io = ctx;

	stats_add(&io->out.total, st);
	io->out.threads++;
	if (err < 0) {
		errx_msg("thread %ld: %s", (long)tid,
			 diag->msg[0] ? diag->msg : ptd_strerror(err));
		io->failed = true;
	}
}

static void input_notice(void *ctx, const struct ptd_diag *diag)
{
	(void)ctx;
	if (diag && diag->msg[0])
		errx_msg("note: %s", diag->msg);
}

/* Decode a saved trace of any kind (input/input.h). */
static int decode_input(const char *path, const struct decode_args *d)
{
	struct ptd_input_opts o;
	struct ptd_diag diag = { "" };
	struct input_output io;
	struct ptd_input_sink sink = { input_info, output_record,
				       input_thread_done, &io, input_notice };
	size_t thread_errors = 0;
	int r, ret = 0;

	memset(&io, 0, sizeof(io));
	io.path = path;
	io.out.want = d->opts.want;
	if (ptd_jsonw_init(&io.out.w, STDOUT_FILENO, 0) < 0) {
		errx_msg("out of memory");
		return EXIT_INPUT;
	}
	memset(&o, 0, sizeof(o));
	o.decode = d->opts;
	o.cpu_given = d->cpu_given;
	o.have_tid = d->have_tid;
	o.tid = (pid_t)d->tid;
	o.sysroot = d->sysroot;
	o.buildid_dir = d->buildid_dir;
	o.kernel = d->kernel;
	r = ptd_input_decode(path, &o, &sink, &thread_errors, &diag);
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
	if (ptd_jsonw_fini(&io.out.w) < 0 || r < 0) {
		errx_msg("writing records: %s",
			 ptd_strerror(r < 0 ? r : io.out.w.err));
		ret = EXIT_INPUT;
	}
	if (!ret && io.out.total.errors) {
		errx_msg("%" PRIu64 " decode errors (see the error records)",
			 io.out.total.errors);
		ret = EXIT_DECODE_ERRORS;
	}
	return ret;
out:
	(void)ptd_jsonw_fini(&io.out.w);
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
	if (ptd_jsonw_init(&out.w, STDOUT_FILENO, 0) < 0) {
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
	if (r == 0)
		r = ptd_decode_thread(&d->opts, &a, output_record, &out, &st);
	stats_add(&out.total, &st);
	out.threads = 1;
	if (r == 0)
		r = output_bye(&out, "end of trace");
	if (ptd_jsonw_fini(&out.w) < 0 || r != 0) {
		errx_msg("decoding '%s': %s", ri->pt,
			 ptd_strerror(r < 0 ? r : out.w.err));
		ret = EXIT_INPUT;
	} else if (out.total.errors) {
		errx_msg("%" PRIu64 " decode errors (see the error records)",
			 out.total.errors);
		ret = EXIT_DECODE_ERRORS;
	}
	free(data);
	return ret;
}

/* --filter:addr<n>_cfg|_a|_b, as ptxed takes them: option values
 * FILTER_OPT + 3 * n + (0 cfg, 1 a, 2 b). */
#define FILTER_OPT 0x100
#define FILTER_RANGES 4

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
	{ "path", required_argument, NULL, 'P' },
	{ "tid", required_argument, NULL, 't' },
	{ "cpu", required_argument, NULL, 'c' },
	{ "pt", required_argument, NULL, 'p' },
	{ "raw", required_argument, NULL, 'R' },
	{ "elf", required_argument, NULL, 'e' },
	{ "pid", required_argument, NULL, 'i' },
	{ "sysroot", required_argument, NULL, 'S' },
	{ "buildid-dir", required_argument, NULL, 'B' },
	{ "kernel", required_argument, NULL, 'K' },
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
	       "  --records KINDS   insn,block,event,error (default "
	       "insn,event,error)\n"
	       "  --path insn|block decoder path (default block; same "
	       "records)\n"
	       "  --tid TID         one thread of a capture / label for raw "
	       "input\n"
	       "  --cpu F/M[/S]     CPU the trace came from, for errata "
	       "(default: the capture's; 'none')\n"
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
	       "                    /boot, ... under --sysroot)\n");
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

static int verb_decode(int argc, char **argv)
{
	struct decode_args d;
	struct raw_input ri;
	int c, r, li = 0, ret = 0;

	decode_args_init(&d);
	memset(&ri, 0, sizeof(ri));
	ri.ic = ptd_iscache_new();
	ri.img = ri.ic ? ptd_image_new(ri.ic, "raw") : NULL;
	if (!ri.img) {
		errx_msg("out of memory");
		ptd_iscache_free(ri.ic);
		return EXIT_INPUT;
	}
	bool have_code = false;
	const char *filter_arg = NULL;	/* the first --filter: option */

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
	if (check_decode_args(&d) < 0 ||
	    check_filter(&d.opts.addr_filter) < 0) {
		ret = EXIT_USAGE;
		goto out;
	}
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
	ptd_image_free(ri.img);
	ptd_iscache_free(ri.ic);
	return ret;
}

static int print_verify(const char *dir)
{
	struct ptd_capture c;
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };
	size_t i;
	int r;

	r = ptd_capture_load(dir, &c, &diag);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return EXIT_INPUT;
	}
	r = ptd_replay_verify(&c, &rep, &diag);
	if (r < 0) {
		errx_msg("verify '%s': %s", dir,
			 diag.msg[0] ? diag.msg : ptd_strerror(r));
		ptd_capture_free(&c);
		return EXIT_INPUT;
	}
	for (i = 0; i < rep.nthreads; i++) {
		const struct ptd_verify_thread *t = &rep.threads[i];

		printf("tid %ld: %s: %" PRIu64 " executed, %" PRIu64
		       " decoded (insn path), %" PRIu64 " (block path)%s%s\n",
		       (long)t->tid, t->ok ? "ok" : "MISMATCH", t->truth,
		       t->insn_path, t->block_path, t->ok ? "" : ": ",
		       t->ok ? "" : t->why);
	}
	printf("%s\n", rep.ok ? "verified: every thread decodes to exactly "
				"what it executed, on both paths"
			      : "verification FAILED");
	r = rep.ok ? 0 : EXIT_MISMATCH;
	ptd_verify_report_free(&rep);
	ptd_capture_free(&c);
	return r;
}

/* ---- export: a capture as a bundle, a perf.data or an LLDB bundle ---- */

static void help_export(FILE *f)
{
	fprintf(f,
		"Usage: ptctl export --format bundle|perf-data|lldb [--reference] "
		"CAPTURE OUT\n\n"
		"Write a software-source capture in another form.  CAPTURE is a "
		"capture\ndirectory or, for perf-data and lldb, a ptd bundle "
		"(verified first; its\nimages are read from its copies):\n"
		"  bundle     a ptd bundle: the capture, a copy of every image it "
		"maps and a\n"
		"             manifest with the size and sha256 of every file, "
		"checked before\n"
		"             use (--reference: images referenced by path, "
		"size and sha256,\n"
		"             not copied)\n"
		"  perf-data  a per-thread intel_pt perf.data that `perf script "
		"--itrace=i1i`\n"
		"             (and ptctl decode) decode\n"
		"  lldb       an LLDB trace bundle for `trace load` (lldb 22 and "
		"later)\n"
		"OUT must not exist (bundle, lldb: or be an empty directory). "
		"Nothing is left\nbehind on failure.\n");
}

/* Write the capture in @in (a capture directory, or a ptd bundle: verified
 * first, its images read from its copies) as @format "lldb" or
 * "perf-data" at @out. */
static int export_other(const char *in, enum ptd_input_kind kind,
			const char *format, const char *out,
			struct ptd_diag *diag)
{
	struct ptd_bundle b;
	struct ptd_capture c;
	const struct ptd_capture *cap = &c;
	int r;

	memset(&b, 0, sizeof(b));
	if (kind == PTD_INPUT_BUNDLE) {
		r = ptd_bundle_load(in, &b, diag);
		cap = &b.capture;
	} else {
		r = ptd_capture_load(in, &c, diag);
	}
	if (r < 0) {
		ptd_bundle_free(&b);
		return r;
	}
	if (!strcmp(format, "lldb"))
		r = ptd_lldb_export_capture_resolved(
			cap, kind == PTD_INPUT_BUNDLE ? ptd_bundle_resolve : NULL,
			&b, out, diag);
	else
		r = ptd_perfdata_write_capture(cap, out, diag);
	if (kind == PTD_INPUT_BUNDLE)
		ptd_bundle_free(&b);
	else
		ptd_capture_free(&c);
	return r;
}

static int verb_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "reference", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ptd_bundle_save_opts bo = PTD_BUNDLE_SAVE_OPTS_INIT;
	struct ptd_diag diag = { "" };
	const char *format = NULL, *in, *out;
	enum ptd_input_kind kind;
	int opt, r;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f':
			format = optarg;
			break;
		case 'r':
			bo.reference_images = true;
			break;
		case 'h':
			help_export(stdout);
			return 0;
		default:
			help_export(stderr);
			return EXIT_USAGE;
		}
	}
	if (!format || optind + 2 != argc) {
		errx_msg("expected --format FORMAT CAPTURE OUT (see ptctl "
			 "export --help)");
		return EXIT_USAGE;
	}
	in = argv[optind];
	out = argv[optind + 1];
	if (strcmp(format, "bundle") && strcmp(format, "perf-data") &&
	    strcmp(format, "lldb")) {
		errx_msg("--format: expected bundle, perf-data or lldb, got "
			 "'%s'",
			 format);
		return EXIT_USAGE;
	}
	if (bo.reference_images && strcmp(format, "bundle")) {
		errx_msg("--reference is for --format bundle");
		return EXIT_USAGE;
	}
	if (!strcmp(format, "perf-data") && access(out, F_OK) == 0) {
		/* bundles and LLDB bundles refuse a non-empty OUT themselves;
		 * a file is never replaced either */
		errx_msg("'%s' exists: not replaced", out);
		return EXIT_INPUT;
	}
	r = ptd_input_detect(in, &kind, &diag);
	if (r == 0 && kind != PTD_INPUT_CAPTURE && kind != PTD_INPUT_BUNDLE)
		r = ptd_diagf(&diag, -PTD_EUNSUPPORTED, "'%s' is a %s: export "
			      "takes a capture or a ptd bundle", in,
			      ptd_input_kind_name(kind));
	if (r == 0 && kind == PTD_INPUT_BUNDLE && !strcmp(format, "bundle"))
		r = ptd_diagf(&diag, -PTD_EUNSUPPORTED, "'%s' is a ptd bundle "
			      "already", in);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return EXIT_INPUT;
	}
	if (!strcmp(format, "bundle"))
		r = ptd_bundle_save(in, out, &bo, &diag);
	else
		r = export_other(in, kind, format, out, &diag);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		return EXIT_INPUT;
	}
	printf("%s\n", out);
	return 0;
}

static int verb_verify(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		printf("Usage: ptctl verify CAPTURE_DIR\n\n"
		       "Decode every thread of a software-source capture on "
		       "both decoder paths and\ncompare with the ground truth "
		       "it recorded.\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0
							        : EXIT_USAGE;
	}
	return print_verify(argv[1]);
}

static const struct option trace_long[] = {
	{ "records", required_argument, NULL, 'r' },
	{ "path", required_argument, NULL, 'P' },
	{ "tid", required_argument, NULL, 't' },
	{ "out", required_argument, NULL, 'o' },
	{ "psb-period", required_argument, NULL, 'b' },
	{ "noretcomp", no_argument, NULL, 'n' },
	{ "tsc", no_argument, NULL, 'T' },
	{ "max-insns", required_argument, NULL, 'm' },
	{ "quiet-target", no_argument, NULL, 'q' },
	{ "no-decode", no_argument, NULL, 'N' },
	{ "verify", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void help_trace(void)
{
	printf("Usage: ptctl trace [OPTIONS] -- PROGRAM [ARGS...]\n\n"
	       "Run PROGRAM under the software PT source (ptrace single-step "
	       "+ libipt's encoder;\nit runs orders of magnitude slower "
	       "than normal), then stream its decoded\ninstructions as "
	       "JSON lines.\n\n"
	       "  --out DIR         keep the capture in DIR (default: a "
	       "temporary one, removed)\n"
	       "  --psb-period N    bytes between PSB packets (power of "
	       "two, 256..1M; default 4096)\n"
	       "  --noretcomp       no return compression\n"
	       "  --tsc             TSC packets in PSB+\n"
	       "  --max-insns N     detach after N instructions\n"
	       "  --quiet-target    send PROGRAM's stdout/stderr to "
	       "/dev/null\n"
	       "  --no-decode       only write the capture (needs --out)\n"
	       "  --verify          instead of streaming, check the decode "
	       "against the ground truth\n"
	       "  --records, --path, --tid   as for ptctl decode\n");
}

static int verb_trace(int argc, char **argv)
{
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	struct decode_args d;
	char tmpl[4096];
	const char *outdir = NULL;
	bool tmp = false, no_decode = false, verify = false;
	int c, r, ret;

	decode_args_init(&d);
	memset(&so, 0, sizeof(so));
	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", trace_long, NULL)) != -1) {
		uint64_t v;

		r = decode_option(&d, c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		switch (c) {
		case 'o':
			outdir = optarg;
			break;
		case 'b':
			if (ptd_parse_size(optarg, &v) < 0 || v < 256 ||
			    v > (1u << 20) || (v & (v - 1))) {
				errx_msg("--psb-period: expected a power of "
					 "two from 256 to 1M, got '%s'",
					 optarg);
				return EXIT_USAGE;
			}
			so.gen.psb_period = v;
			break;
		case 'n':
			so.gen.noretcomp = true;
			break;
		case 'T':
			so.gen.tsc = true;
			break;
		case 'm':
			if (ptd_parse_u64(optarg, 10, &v) < 0 || v == 0) {
				errx_msg("--max-insns: expected a positive "
					 "number, got '%s'",
					 optarg);
				return EXIT_USAGE;
			}
			so.max_insns = v;
			break;
		case 'q':
			so.quiet_target = true;
			break;
		case 'N':
			no_decode = true;
			break;
		case 'V':
			verify = true;
			break;
		case 'h':
			help_trace();
			return 0;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		errx_msg("no program to trace (ptctl trace [OPTIONS] -- "
			 "PROGRAM [ARGS...])");
		return EXIT_USAGE;
	}
	if (check_decode_args(&d) < 0)
		return EXIT_USAGE;
	if (no_decode && !outdir) {
		errx_msg("--no-decode needs --out DIR");
		return EXIT_USAGE;
	}
	if (!outdir) {
		const char *t = getenv("TMPDIR");

		(void)snprintf(tmpl, sizeof(tmpl), "%s/ptctl-trace-XXXXXX",
			       t && *t ? t : "/tmp");
		if (!mkdtemp(tmpl)) {
			errx_msg("cannot create a temporary directory in "
				 "'%s': %s",
				 t && *t ? t : "/tmp", strerror(errno));
			return EXIT_INPUT;
		}
		outdir = tmpl;
		tmp = true;
	}
	so.outdir = outdir;
	fprintf(stderr,
		"%s: tracing '%s' with the software PT source (single-step: "
		"orders of magnitude slower than native)\n",
		arg_program, argv[optind]);
	r = ptd_swpt_run(argv + optind, &so, &res, &diag);
	if (r < 0) {
		errx_msg("%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
		ret = EXIT_INPUT;
		goto out;
	}
	fprintf(stderr,
		"%s: %" PRIu64 " instructions in %u thread(s), %" PRIu64
		" PT bytes; ",
		arg_program, res.insns, res.threads, res.pt_bytes);
	if (res.detached)
		fprintf(stderr, "detached at --max-insns, target %ld runs on "
				"untraced\n", (long)res.pid);
	else if (res.exit_signal)
		fprintf(stderr, "target killed by signal %d\n",
			res.exit_signal);
	else
		fprintf(stderr, "target exited with %d\n", res.exit_code);
	if (verify)
		ret = print_verify(outdir);
	else if (no_decode)
		ret = 0;
	else
		ret = decode_input(outdir, &d);
out:
	if (tmp)
		(void)ptd_rm_rf(outdir);
	return ret;
}


/* ---- daemon verbs: talk to ptd over its socket ---- */

#define PTCTL_DEFAULT_SOCKET "/run/ptd/ptd.sock"
/* Longest response line ptctl accepts. */
#define PTCTL_MAX_LINE (16u << 20)

static const char *arg_socket;

static const char *socket_path(void)
{
	const char *env = getenv("PTD_SOCKET");

	if (arg_socket)
		return arg_socket;
	return env && *env ? env : PTCTL_DEFAULT_SOCKET;
}

/* Connect to ptd; on failure say why and what to do. */
static int client_connect(FILE **ret)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *path = socket_path();
	int fd, err;
	FILE *f;

	if (strlen(path) >= sizeof(a.sun_path)) {
		errx_msg("socket path '%s' is too long", path);
		return EXIT_USAGE;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		errx_msg("cannot create a socket: %s", strerror(errno));
		return EXIT_CONNECT;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		err = errno;
		close(fd);
		if (err == ENOENT || err == ECONNREFUSED)
			errx_msg("cannot connect to %s: %s — is ptd running? "
				 "(systemctl start ptd)",
				 path,
				 err == ENOENT ? "no such file"
					       : "connection refused");
		else if (err == EACCES || err == EPERM)
			errx_msg("cannot connect to %s: permission denied — "
				 "ask to be added to the socket's group "
				 "(usually 'ptd')",
				 path);
		else
			errx_msg("cannot connect to %s: %s", path,
				 strerror(err));
		return EXIT_CONNECT;
	}
	f = fdopen(fd, "r+");
	if (!f) {
		close(fd);
		errx_msg("out of memory");
		return EXIT_CONNECT;
	}
	*ret = f;
	return 0;
}

/* Read one line (without the newline) into *line. Returns its length, or
 * -1 at EOF/error. */
static ssize_t read_line(FILE *f, char **line, size_t *cap)
{
	ssize_t n = getline(line, cap, f);

	if (n <= 0)
		return -1;
	if ((size_t)n > PTCTL_MAX_LINE)
		return -1;
	if ((*line)[n - 1] == '\n')
		(*line)[--n] = 0;
	return n;
}

/* The exit status for an error response's code. */
static int exit_for_code(const char *code)
{
	if (!strcmp(code, "no_such_process") ||
	    !strcmp(code, "no_such_session"))
		return EXIT_NOT_FOUND;
	if (!strcmp(code, "permission_denied"))
		return EXIT_PERMISSION;
	if (!strcmp(code, "no_intel_pt"))
		return EXIT_NO_PT;
	if (!strcmp(code, "limit"))
		return EXIT_LIMIT;
	return EXIT_REFUSED;
}

/* Send @req (taken) and read its response into *ret_resp.  Returns 0 if
 * ok:true; an exit status otherwise, with the message printed. */
static int client_read_response(FILE *f, bool json, cJSON **ret_resp);

static int client_call(FILE *f, cJSON *req, bool json, cJSON **ret_resp)
{
	_cleanup_free_ char *s = cJSON_PrintUnformatted(req);

	cJSON_Delete(req);
	if (!s || fprintf(f, "%s\n", s) < 0 || fflush(f) != 0) {
		errx_msg("cannot send the request to ptd: %s",
			 strerror(errno));
		return EXIT_CONNECT;
	}
	return client_read_response(f, json, ret_resp);
}

/* Read a response into *ret_resp: 0 if ok:true; an exit status
 * otherwise, with the message printed. */
static int client_read_response(FILE *f, bool json, cJSON **ret_resp)
{
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	cJSON *resp, *ok, *err;

	if (read_line(f, &line, &cap) < 0) {
		errx_msg("ptd closed the connection without answering");
		return EXIT_CONNECT;
	}
	resp = cJSON_Parse(line);
	ok = resp ? cJSON_GetObjectItemCaseSensitive(resp, "ok") : NULL;
	if (!cJSON_IsBool(ok)) {
		errx_msg("ptd sent something that is not a response: %.200s",
			 line);
		cJSON_Delete(resp);
		return EXIT_REFUSED;
	}
	if (json)
		printf("%s\n", line);
	if (cJSON_IsFalse(ok)) {
		const cJSON *code, *msg;
		int ret;

		err = cJSON_GetObjectItemCaseSensitive(resp, "error");
		code = cJSON_GetObjectItemCaseSensitive(err, "code");
		msg = cJSON_GetObjectItemCaseSensitive(err, "message");
		ret = exit_for_code(cJSON_IsString(code) ? code->valuestring
							 : "");
		errx_msg("%s: %s",
			 cJSON_IsString(code) ? code->valuestring : "error",
			 cJSON_IsString(msg) ? msg->valuestring : "");
		cJSON_Delete(resp);
		return ret;
	}
	*ret_resp = resp;
	return 0;
}

static cJSON *new_request(const char *cmd)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "id", 1);
	cJSON_AddStringToObject(o, "cmd", cmd);
	return o;
}

static double num_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static int parse_session_arg(const char *s, uint64_t *ret)
{
	if (ptd_parse_u64(s, 10, ret) < 0 || *ret == 0 ||
	    *ret > (1ull << 53)) {
		errx_msg("expected a session id (a positive number), got '%s'",
			 s);
		return EXIT_USAGE;
	}
	return 0;
}

/* Follow a stream: copy JSON lines to stdout until bye. */
static int follow_stream(FILE *f)
{
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = EXIT_STREAM;

	while ((n = read_line(f, &line, &cap)) >= 0) {
		if (fwrite(line, 1, (size_t)n, stdout) != (size_t)n ||
		    putchar('\n') == EOF) {
			errx_msg("writing to stdout: %s", strerror(errno));
			return EXIT_STREAM;
		}
		if (!strncmp(line, "{\"type\":\"bye\"", 13)) {
			cJSON *o = cJSON_Parse(line);
			const char *why = str_of(o, "reason");

			ret = !strcmp(why, "exited") ||
					      !strcmp(why, "detached") ||
					      !strcmp(why, "limit")
				      ? 0
				      : EXIT_STREAM;
			if (ret)
				errx_msg("the stream ended: %s%s%s", why,
					 *str_of(o, "message") ? ": " : "",
					 str_of(o, "message"));
			cJSON_Delete(o);
			break;
		}
	}
	if (fflush(stdout) != 0)
		ret = EXIT_STREAM;
	if (n < 0 && ret == EXIT_STREAM && !ferror(stdout))
		errx_msg("ptd closed the stream before its bye record");
	return ret;
}

struct stream_args {
	unsigned kinds;
	cJSON *tids, *ranges, *iclass;
	const char *module;
};

static int subscribe_and_follow(FILE *f, uint64_t session,
				struct stream_args *sa)
{
	cJSON *req = new_request("subscribe"), *resp = NULL, *filter;
	int r;

	cJSON_AddNumberToObject(req, "session", (double)session);
	if (sa->kinds) {
		cJSON *k = cJSON_AddArrayToObject(req, "kinds");

		for (unsigned t = 0; t < PTD_REC_NTYPES; t++)
			if (sa->kinds & PTD_REC_BIT(t))
				cJSON_AddItemToArray(
					k, cJSON_CreateString(ptd_rec_type_name(
						   (enum ptd_rec_type)t)));
	}
	filter = cJSON_AddObjectToObject(req, "filter");
	if (sa->tids)
		cJSON_AddItemToObject(filter, "tid", PTD_TAKE_PTR(sa->tids));
	if (sa->ranges)
		cJSON_AddItemToObject(filter, "ranges",
				      PTD_TAKE_PTR(sa->ranges));
	if (sa->iclass)
		cJSON_AddItemToObject(filter, "iclass",
				      PTD_TAKE_PTR(sa->iclass));
	if (sa->module)
		cJSON_AddStringToObject(filter, "module", sa->module);
	r = client_call(f, req, false, &resp);
	if (r)
		return r;
	cJSON_Delete(resp);
	return follow_stream(f);
}

static void stream_args_free(struct stream_args *sa)
{
	cJSON_Delete(sa->tids);
	cJSON_Delete(sa->ranges);
	cJSON_Delete(sa->iclass);
}

/* One of the stream options; 1 if it was one, 0 if not, EXIT_USAGE. */
static int stream_option(struct stream_args *sa, int c, const char *arg)
{
	uint64_t v, a, b;
	char buf[40];
	const char *dash;

	switch (c) {
	case 'k':
		if (parse_records(arg, &sa->kinds) < 0)
			return EXIT_USAGE;
		return 1;
	case 't':
		if (ptd_parse_u64(arg, 10, &v) < 0 || v == 0 || v > INT32_MAX) {
			errx_msg("--tid: expected a thread id, got '%s'", arg);
			return EXIT_USAGE;
		}
		if (!sa->tids)
			sa->tids = cJSON_CreateArray();
		cJSON_AddItemToArray(sa->tids, cJSON_CreateNumber((double)v));
		return 1;
	case 'R':
		dash = strchr(arg, '-');
		if (!dash || ptd_parse_u64n(arg, (size_t)(dash - arg), 0, &a) < 0 ||
		    ptd_parse_u64(dash + 1, 0, &b) < 0 || a >= b) {
			errx_msg("--range: expected START-END (END exclusive, "
				 "e.g. 0x401000-0x402000), got '%s'",
				 arg);
			return EXIT_USAGE;
		}
		if (!sa->ranges)
			sa->ranges = cJSON_CreateArray();
		cJSON *pair = cJSON_CreateArray();

		(void)snprintf(buf, sizeof(buf), "0x%" PRIx64, a);
		cJSON_AddItemToArray(pair, cJSON_CreateString(buf));
		(void)snprintf(buf, sizeof(buf), "0x%" PRIx64, b);
		cJSON_AddItemToArray(pair, cJSON_CreateString(buf));
		cJSON_AddItemToArray(sa->ranges, pair);
		return 1;
	case 'I':
		if (!sa->iclass)
			sa->iclass = cJSON_CreateArray();
		cJSON_AddItemToArray(sa->iclass, cJSON_CreateString(arg));
		return 1;
	case 'M':
		sa->module = arg;
		return 1;
	default:
		return 0;
	}
}

static const struct option stream_long[] = {
	{ "kinds", required_argument, NULL, 'k' },
	{ "tid", required_argument, NULL, 't' },
	{ "range", required_argument, NULL, 'R' },
	{ "iclass", required_argument, NULL, 'I' },
	{ "module", required_argument, NULL, 'M' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int verb_stream(int argc, char **argv)
{
	struct stream_args sa;
	FILE *f = NULL;
	uint64_t session;
	int c, r;

	memset(&sa, 0, sizeof(sa));
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", stream_long, NULL)) != -1) {
		r = stream_option(&sa, c, optarg);
		if (r == 1)
			continue;
		if (c == 'h') {
			printf("Usage: ptctl stream SESSION [--kinds "
			       "insn,block,event,error] [--tid N]...\n"
			       "       [--range START-END]... [--iclass C]... "
			       "[--module M]\n\n"
			       "Write the session's records as JSON lines to "
			       "stdout until its bye record.\n");
			stream_args_free(&sa);
			return 0;
		}
		stream_args_free(&sa);
		return EXIT_USAGE;
	}
	if (optind + 1 != argc) {
		errx_msg("expected one SESSION (ptctl stream SESSION "
			 "[OPTIONS])");
		stream_args_free(&sa);
		return EXIT_USAGE;
	}
	r = parse_session_arg(argv[optind], &session);
	if (!r)
		r = client_connect(&f);
	if (!r)
		r = subscribe_and_follow(f, session, &sa);
	stream_args_free(&sa);
	if (f)
		fclose(f);
	return r;
}

static const struct option attach_long[] = {
	{ "source", required_argument, NULL, 's' },
	{ "tsc", no_argument, NULL, 'T' },
	{ "max-insns", required_argument, NULL, 'm' },
	{ "capture", required_argument, NULL, 'C' },
	{ "follow", no_argument, NULL, 'f' },
	{ "json", no_argument, NULL, 'j' },
	{ "snapshot", no_argument, NULL, 'S' },
	{ "snapshot-size", required_argument, NULL, 'Z' },
	{ "kinds", required_argument, NULL, 'k' },
	{ "tid", required_argument, NULL, 't' },
	{ "range", required_argument, NULL, 'R' },
	{ "iclass", required_argument, NULL, 'I' },
	{ "module", required_argument, NULL, 'M' },
	{ "record", required_argument, NULL, 'D' },
	{ "record-format", required_argument, NULL, 'G' },
	{ "per-cpu", no_argument, NULL, 'P' },
	{ "filter", required_argument, NULL, 'F' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int send_record(FILE *f, uint64_t session, const char *dir,
		       bool wait, bool json, cJSON **ret_resp);
static int record_lldb(FILE *f, uint64_t session, const char *dir,
		       bool json, cJSON **ret_resp);

/* Whether an LLDB bundle may be written at @dir: nothing there, or an
 * empty directory. */
static bool lldb_dir_free(const char *dir)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	bool empty = true;

	if (lstat(dir, &st) < 0)
		return errno == ENOENT;
	if (!S_ISDIR(st.st_mode) || !(d = opendir(dir)))
		return false;
	while (empty && (de = readdir(d)) != NULL)
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	(void)closedir(d);
	return empty;
}

static int verb_attach(int argc, char **argv)
{
	struct stream_args sa;
	cJSON *req, *opts, *resp = NULL;
	const char *source = NULL, *capture = NULL, *record = NULL;
	const char *addr_filter = NULL;	/* --filter: checked by ptd */
	bool tsc = false, follow = false, json = false, snapshot = false;
	bool per_cpu = false, record_lldb_fmt = false;
	uint64_t pid, max_insns = 0, session, snap_size = 0;
	FILE *f = NULL;
	int c, r;

	memset(&sa, 0, sizeof(sa));
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", attach_long, NULL)) != -1) {
		r = stream_option(&sa, c, optarg);
		if (r == 1)
			continue;
		if (r) {
			stream_args_free(&sa);
			return r;
		}
		switch (c) {
		case 's':
			if (strcmp(optarg, "auto") &&
			    strcmp(optarg, "software") &&
			    strcmp(optarg, "intel_pt")) {
				errx_msg("--source: expected auto, software or "
					 "intel_pt, got '%s'",
					 optarg);
				r = EXIT_USAGE;
			}
			source = optarg;
			break;
		case 'T':
			tsc = true;
			break;
		case 'm':
			if (ptd_parse_u64(optarg, 10, &max_insns) < 0 ||
			    !max_insns || max_insns > (1ull << 53)) {
				errx_msg("--max-insns: expected a positive "
					 "number, got '%s'",
					 optarg);
				r = EXIT_USAGE;
			}
			break;
		case 'C':
			if (optarg[0] != '/') {
				errx_msg("--capture: expected an absolute "
					 "path, got '%s'", optarg);
				r = EXIT_USAGE;
			}
			capture = optarg;
			break;
		case 'f':
			follow = true;
			break;
		case 'j':
			json = true;
			break;
		case 'D':
			record = optarg;
			break;
		case 'G':
			if (!strcmp(optarg, "lldb")) {
				record_lldb_fmt = true;
			} else if (strcmp(optarg, "bundle")) {
				errx_msg("--record-format: expected bundle or "
					 "lldb, got '%s'", optarg);
				r = EXIT_USAGE;
			}
			break;
		case 'S':
			snapshot = true;
			break;
		case 'P':
			per_cpu = true;
			break;
		case 'F':
			addr_filter = optarg;
			break;
		case 'Z':
			if (ptd_parse_u64(optarg, 10, &snap_size) < 0 ||
			    snap_size < 4096 ||
			    snap_size > PTD_SESSION_SNAPSHOT_MAX ||
			    (snap_size & (snap_size - 1))) {
				errx_msg("--snapshot-size: expected a power "
					 "of two from 4096 to %u bytes, got "
					 "'%s'", PTD_SESSION_SNAPSHOT_MAX,
					 optarg);
				r = EXIT_USAGE;
			}
			break;
		case 'h':
			printf("Usage: ptctl attach PID [--source "
			       "auto|software|intel_pt] [--tsc]\n"
			       "       [--max-insns N] [--capture DIR] "
			       "[--snapshot [--snapshot-size BYTES]]\n"
			       "       [--record DIR [--record-format "
			       "bundle|lldb]] [--per-cpu] [--filter TEXT]\n"
			       "       [--follow [stream options]] [--json]\n\n"
			       "Start tracing process PID; print the session "
			       "id (with --follow, stream it\nlike ptctl "
			       "stream).  --snapshot: keep only the newest "
			       "trace, decoded at each\n`ptctl snapshot "
			       "SESSION`.  --record: when the session ends, ptd "
			       "writes a bundle of\nits trace into DIR (an "
			       "empty directory of yours); with --record-format "
			       "lldb,\nan LLDB trace bundle for `trace load`, "
			       "and ptctl waits for the end to write\nit (DIR "
			       "must not exist, or be empty).  --per-cpu: one "
			       "trace buffer per CPU\n(perf's layout; "
			       "intel_pt follows new threads and children by "
			       "inheritance)\ninstead of one per thread.  "
			       "--filter: trace only inside address ranges,\n"
			       "perf record's --filter syntax: 'filter "
			       "OFFSET/SIZE@FILE' (also 'tracestop'),\n"
			       "up to 4, separated by ','.  A range in a file "
			       "the process has not mapped\nyet (a library it "
			       "will dlopen) waits until it does, as perf's "
			       "does.\n");
			stream_args_free(&sa);
			return 0;
		default:
			r = EXIT_USAGE;
			break;
		}
		if (r) {
			stream_args_free(&sa);
			return r;
		}
	}
	if (optind + 1 != argc || ptd_parse_u64(argv[optind], 10, &pid) < 0 ||
	    pid == 0 || pid > INT32_MAX) {
		errx_msg("expected one PID (ptctl attach PID [OPTIONS])");
		stream_args_free(&sa);
		return EXIT_USAGE;
	}
	if (snap_size && !snapshot) {
		errx_msg("--snapshot-size needs --snapshot");
		stream_args_free(&sa);
		return EXIT_USAGE;
	}
	if (record_lldb_fmt && !record) {
		errx_msg("--record-format needs --record DIR");
		stream_args_free(&sa);
		return EXIT_USAGE;
	}
	if (record_lldb_fmt && !lldb_dir_free(record)) {
		/* found out now, not after the whole session */
		errx_msg("'%s' exists and is not an empty directory", record);
		stream_args_free(&sa);
		return EXIT_INPUT;
	}
	r = client_connect(&f);
	if (r) {
		stream_args_free(&sa);
		return r;
	}
	req = new_request("attach");
	cJSON_AddNumberToObject(req, "pid", (double)pid);
	opts = cJSON_AddObjectToObject(req, "options");
	if (source)
		cJSON_AddStringToObject(opts, "source", source);
	if (tsc)
		cJSON_AddBoolToObject(opts, "tsc", true);
	if (max_insns)
		cJSON_AddNumberToObject(opts, "max_insns", (double)max_insns);
	if (capture)
		cJSON_AddStringToObject(opts, "capture", capture);
	if (snapshot)
		cJSON_AddStringToObject(opts, "mode", "snapshot");
	if (per_cpu)
		cJSON_AddBoolToObject(opts, "per_cpu", true);
	if (addr_filter)
		cJSON_AddStringToObject(opts, "filter", addr_filter);
	if (record)
		cJSON_AddBoolToObject(opts, "record", true);
	if (snap_size)
		cJSON_AddNumberToObject(opts, "snapshot_size",
					(double)snap_size);
	r = client_call(f, req, json, &resp);
	if (!r) {
		const cJSON *res = cJSON_GetObjectItemCaseSensitive(resp,
								    "result");

		session = (uint64_t)num_of(res, "session");
		if (*str_of(res, "warning"))
			errx_msg("warning: %s", str_of(res, "warning"));
		if (!json && !follow)
			printf("%" PRIu64 "\n", session);
		else if (!json)
			errx_msg("session %" PRIu64 " (%s source, pid %.0f)",
				 session, str_of(res, "source"),
				 num_of(res, "pid"));
		cJSON_Delete(resp);
		resp = NULL;
		if (record && record_lldb_fmt) {
			/* written by ptctl from the session's bundle once
			 * the session has ended: after the stream with
			 * --follow, on a connection of its own */
			FILE *rf = NULL;

			if (follow)
				r = subscribe_and_follow(f, session, &sa);
			if (!r)
				r = client_connect(&rf);
			if (!r)
				r = record_lldb(rf, session, record, json,
						&resp);
			if (rf)
				fclose(rf);
			cJSON_Delete(resp);
			if (!r && !json)
				errx_msg("the LLDB trace bundle of session "
					 "%" PRIu64 " is written into '%s'",
					 session, record);
			stream_args_free(&sa);
			fclose(f);
			return r;
		}
		if (record) {
			r = send_record(f, session, record, false, json,
					&resp);
			cJSON_Delete(resp);
			if (r)
				errx_msg("session %" PRIu64 " is traced but "
					 "will not be recorded (ptctl record "
					 "%" PRIu64 " DIR, or ptctl detach "
					 "%" PRIu64 ")", session, session,
					 session);
			else if (!json)
				errx_msg("the bundle of session %" PRIu64
					 " will be written into '%s' when it "
					 "ends", session, record);
		}
		if (follow && !r)
			r = subscribe_and_follow(f, session, &sa);
	}
	stream_args_free(&sa);
	fclose(f);
	return r;
}

/* Send a record request for @session with @dir's descriptor (opened
 * here, as the user: ptd writes into what the user could open). */
static int send_record(FILE *f, uint64_t session, const char *dir,
		       bool wait, bool json, cJSON **ret_resp)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	_cleanup_close_ int dfd = -1;
	_cleanup_free_ char *js = NULL, *s = NULL;
	cJSON *req = new_request("record");
	struct iovec iov;
	struct msghdr m;
	size_t len;
	ssize_t n;

	cJSON_AddNumberToObject(req, "session", (double)session);
	cJSON_AddBoolToObject(req, "wait", wait);
	js = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		errx_msg("cannot open directory '%s': %s", dir,
			 strerror(errno));
		return EXIT_USAGE;
	}
	len = js ? strlen(js) : 0;
	s = js ? malloc(len + 2) : NULL;
	if (!s) {
		errx_msg("out of memory");
		return EXIT_CONNECT;
	}
	memcpy(s, js, len);
	s[len++] = '\n';
	s[len] = 0;
	iov = (struct iovec){ s, len };
	memset(&m, 0, sizeof(m));
	memset(&ctl, 0, sizeof(ctl));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.b;
	m.msg_controllen = sizeof(ctl.b);
	CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
	CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
	CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), &dfd, sizeof(int));
	/* The fd goes with the request's first byte; the rest plainly. */
	if (fflush(f) != 0 ||
	    (n = sendmsg(fileno(f), &m, MSG_NOSIGNAL)) < 0 ||
	    ptd_write_all(fileno(f), s + n, len - (size_t)n) < 0) {
		errx_msg("cannot send the request to ptd: %s",
			 strerror(errno));
		return EXIT_CONNECT;
	}
	return client_read_response(f, json, ret_resp);
}

/* ptctl record --format lldb: the session's bundle into a temporary
 * directory beside @dir (received as for a bundle), verified and written
 * as an LLDB bundle at @dir (which must not exist, or be empty), then
 * removed. */
static int record_lldb(FILE *f, uint64_t session, const char *dir,
		       bool json, cJSON **ret_resp)
{
	struct ptd_diag diag = { "" };
	_cleanup_free_ char *tmp = NULL;
	struct stat st;
	int r;

	if (!lldb_dir_free(dir) || (lstat(dir, &st) == 0 && rmdir(dir) < 0)) {
		errx_msg("'%s' exists and is not an empty directory", dir);
		return EXIT_INPUT;
	}
	if (asprintf(&tmp, "%s.ptd-bundle-XXXXXX", dir) < 0) {
		tmp = NULL;
		errx_msg("out of memory");
		return EXIT_INPUT;
	}
	if (!mkdtemp(tmp)) {
		errx_msg("cannot create '%s': %s", tmp, strerror(errno));
		return EXIT_INPUT;
	}
	r = send_record(f, session, tmp, true, json, ret_resp);
	if (r == 0 &&
	    export_other(tmp, PTD_INPUT_BUNDLE, "lldb", dir, &diag) < 0) {
		errx_msg("%s", diag.msg);
		r = EXIT_INPUT;
	}
	(void)ptd_rm_rf(tmp);
	return r;
}

static int verb_record(int argc, char **argv)
{
	bool json = false, lldb = false;
	const char *args[2];
	unsigned nargs = 0;
	uint64_t session;
	cJSON *resp = NULL;
	FILE *f = NULL;
	int i, r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "lldb")) {
				lldb = true;
			} else if (strcmp(argv[i], "bundle")) {
				errx_msg("--format: expected bundle or lldb, "
					 "got '%s'", argv[i]);
				return EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--help") ||
			   !strcmp(argv[i], "-h")) {
			printf("Usage: ptctl record SESSION DIR [--format "
			       "bundle|lldb] [--json]\n\n"
			       "Write SESSION's trace into DIR once the "
			       "session has ended; the session\nmust have "
			       "been attached with --record.  Waits until it "
			       "is written.\n"
			       "  --format bundle  a ptd bundle (default); DIR "
			       "is an empty directory of yours\n"
			       "  --format lldb    an LLDB trace bundle for "
			       "`trace load` (lldb 22 and later);\n"
			       "                   DIR must not exist (or be "
			       "empty)\n");
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			errx_msg("unknown option '%s' (see ptctl record "
				 "--help)", argv[i]);
			return EXIT_USAGE;
		} else if (nargs < 2) {
			args[nargs++] = argv[i];
		} else {
			nargs = 3;
		}
	}
	if (nargs != 2) {
		errx_msg("expected SESSION and DIR (ptctl record SESSION DIR)");
		return EXIT_USAGE;
	}
	r = parse_session_arg(args[0], &session);
	if (!r)
		r = client_connect(&f);
	if (!r)
		r = lldb ? record_lldb(f, session, args[1], json, &resp)
			 : send_record(f, session, args[1], true, json, &resp);
	if (!r && !json)
		printf("%s of session %" PRIu64 " written to %s\n",
		       lldb ? "LLDB trace bundle" : "bundle", session,
		       args[1]);
	cJSON_Delete(resp);
	if (f)
		fclose(f);
	return r;
}

static const struct option replay_long[] = {
	{ "lossless", no_argument, NULL, 'L' },
	{ "kinds", required_argument, NULL, 'k' },
	{ "tid", required_argument, NULL, 't' },
	{ "range", required_argument, NULL, 'R' },
	{ "iclass", required_argument, NULL, 'I' },
	{ "module", required_argument, NULL, 'M' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* ptctl replay: ptd decodes a saved trace (read with the user's own
 * permissions) as a session; stream it like ptctl stream. */
static int verb_replay(int argc, char **argv)
{
	struct stream_args sa;
	_cleanup_free_ char *path = NULL;
	bool lossless = false;
	cJSON *req, *resp = NULL;
	uint64_t session;
	FILE *f = NULL;
	int c, r;

	memset(&sa, 0, sizeof(sa));
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", replay_long, NULL)) != -1) {
		r = stream_option(&sa, c, optarg);
		if (r == 1)
			continue;
		if (c == 'L') {
			lossless = true;
			continue;
		}
		if (c == 'h')
			printf("Usage: ptctl replay [--lossless] [stream "
			       "options] TRACE\n\n"
			       "ptd decodes the saved TRACE (a capture, "
			       "bundle, perf.data or LLDB bundle,\nread with "
			       "your permissions) as a session; its records "
			       "are written like\nptctl stream's.  "
			       "--lossless: ptd waits for this client "
			       "instead of dropping\nrecords.\n");
		stream_args_free(&sa);
		return c == 'h' ? 0 : r ? r : EXIT_USAGE;
	}
	if (optind + 1 != argc) {
		errx_msg("expected one TRACE (ptctl replay [OPTIONS] TRACE)");
		stream_args_free(&sa);
		return EXIT_USAGE;
	}
	path = realpath(argv[optind], NULL);
	if (!path) {
		errx_msg("'%s': %s", argv[optind], strerror(errno));
		stream_args_free(&sa);
		return EXIT_NOT_FOUND;
	}
	r = client_connect(&f);
	if (r) {
		stream_args_free(&sa);
		return r;
	}
	req = new_request("replay");
	cJSON_AddStringToObject(req, "path", path);
	if (lossless)
		cJSON_AddBoolToObject(req, "lossless", true);
	r = client_call(f, req, false, &resp);
	if (!r) {
		session = (uint64_t)num_of(
			cJSON_GetObjectItemCaseSensitive(resp, "result"),
			"session");
		cJSON_Delete(resp);
		r = subscribe_and_follow(f, session, &sa);
	}
	stream_args_free(&sa);
	fclose(f);
	return r;
}

/* ptctl detach|list|status: one request, text or --json output. */
static int simple_verb(int argc, char **argv, const char *cmd,
		       bool need_session, bool may_session,
		       void (*print)(const cJSON *result))
{
	bool json = false;
	const char *sess = NULL;
	uint64_t session = 0;
	cJSON *req, *resp = NULL;
	FILE *f = NULL;
	int i, r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("Usage: ptctl %s%s [--json]\n", cmd,
			       need_session	? " SESSION"
			       : may_session ? " [SESSION]"
					     : "");
			return 0;
		} else if (argv[i][0] != '-' && !sess &&
			   (need_session || may_session))
			sess = argv[i];
		else {
			errx_msg("%s: unexpected argument '%s'", cmd, argv[i]);
			return EXIT_USAGE;
		}
	}
	if (need_session && !sess) {
		errx_msg("%s: expected a SESSION", cmd);
		return EXIT_USAGE;
	}
	if (sess && (r = parse_session_arg(sess, &session)))
		return r;
	r = client_connect(&f);
	if (r)
		return r;
	req = new_request(cmd);
	if (sess)
		cJSON_AddNumberToObject(req, "session", (double)session);
	r = client_call(f, req, json, &resp);
	if (!r && !json)
		print(cJSON_GetObjectItemCaseSensitive(resp, "result"));
	cJSON_Delete(resp);
	fclose(f);
	return r;
}

static void print_detach(const cJSON *res)
{
	printf("session %.0f detached\n", num_of(res, "session"));
}

static void print_list(const cJSON *res)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(res, "sessions");
	const cJSON *s;

	printf("%-8s %-8s %-6s %-9s %-9s %s\n", "SESSION", "PID", "OWNER",
	       "SOURCE", "STATE", "SUBSCRIBERS");
	cJSON_ArrayForEach(s, a)
		printf("%-8.0f %-8.0f %-6.0f %-9s %-9s %.0f\n",
		       num_of(s, "session"), num_of(s, "pid"),
		       num_of(s, "owner"), str_of(s, "source"),
		       str_of(s, "state"), num_of(s, "subscribers"));
}

/* status's "memory": the user's use against user_memory_limit. */
static void print_memory(const cJSON *m)
{
	if (!m)
		return;
	printf("memory of uid %.0f: %.1f MiB of %.1f MiB in use "
	       "(user_memory_limit)\n", num_of(m, "uid"),
	       num_of(m, "used") / 1048576, num_of(m, "limit") / 1048576);
}

static void print_status(const cJSON *res)
{
	const cJSON *subs, *s, *k;

	if (!cJSON_GetObjectItemCaseSensitive(res, "session")) {
		printf("ptd %s (protocol %.0f), up %.0f s, %.0f session(s), "
		       "%.0f connection(s)\n",
		       str_of(res, "ptd"), num_of(res, "protocol"),
		       num_of(res, "uptime_ms") / 1000, num_of(res, "sessions"),
		       num_of(res, "connections"));
		print_memory(cJSON_GetObjectItemCaseSensitive(res, "memory"));
		return;
	}
	printf("session %.0f: pid %.0f, owner %.0f, %s source, %s mode, %s\n",
	       num_of(res, "session"), num_of(res, "pid"), num_of(res, "owner"),
	       str_of(res, "source"), str_of(res, "mode"),
	       str_of(res, "state"));
	if (*str_of(res, "buffers"))	/* live sessions */
		printf("  buffers: %s\n", str_of(res, "buffers"));
	if (*str_of(res, "record_state"))	/* attached with --record */
		printf("  record: %s%s%s\n", str_of(res, "record_state"),
		       *str_of(res, "record_error") ? ": " : "",
		       str_of(res, "record_error"));
	if (!strcmp(str_of(res, "mode"), "snapshot"))
		printf("  snapshots %.0f (%.0f bytes per thread), %.0f bytes "
		       "overwritten before a snapshot\n",
		       num_of(res, "snapshots"), num_of(res, "snapshot_size"),
		       num_of(res, "overwritten_bytes"));
	printf("  threads %.0f (%.0f live), %.0f trace bytes, %.0f "
	       "instructions, %.0f records, %.0f bytes lost by the source\n",
	       num_of(res, "threads"), num_of(res, "threads_live"),
	       num_of(res, "trace_bytes"), num_of(res, "insns"),
	       num_of(res, "records"), num_of(res, "lost_bytes"));
	subs = cJSON_GetObjectItemCaseSensitive(res, "subscriber_list");
	cJSON_ArrayForEach(s, subs) {
		printf("  subscriber %.0f [", num_of(s, "id"));
		cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(s, "kinds"))
			printf("%s%s", k == cJSON_GetObjectItemCaseSensitive(
						    s, "kinds")->child
					       ? ""
					       : ",",
			       cJSON_IsString(k) ? k->valuestring : "?");
		printf("]: %.0f sent, %.0f lost\n", num_of(s, "sent"),
		       num_of(s, "lost"));
	}
}

static void print_snapshot(const cJSON *res)
{
	const cJSON *t;

	printf("session %.0f snapshot %.0f: %.0f thread(s), %.0f bytes "
	       "read, %.0f overwritten, %.0f records (%.0f instructions)\n",
	       num_of(res, "session"), num_of(res, "seq"),
	       num_of(res, "threads_total"), num_of(res, "bytes"),
	       num_of(res, "overwritten"), num_of(res, "records"),
	       num_of(res, "insns"));
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(res, "threads"))
		printf("  tid %.0f: %.0f bytes, %.0f overwritten, %.0f "
		       "records\n", num_of(t, "tid"), num_of(t, "bytes"),
		       num_of(t, "overwritten"), num_of(t, "records"));
}

static int verb_snapshot(int argc, char **argv)
{
	return simple_verb(argc, argv, "snapshot", true, false,
			   print_snapshot);
}

static int verb_detach(int argc, char **argv)
{
	return simple_verb(argc, argv, "detach", true, false, print_detach);
}

static int verb_list(int argc, char **argv)
{
	return simple_verb(argc, argv, "list", false, false, print_list);
}

static int verb_status(int argc, char **argv)
{
	return simple_verb(argc, argv, "status", false, true, print_status);
}

static const struct verb {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
} verbs[] = {
	{ "trace", verb_trace,
	  "run a program under the software PT source and stream it" },
	{ "decode", verb_decode,
	  "decode a saved trace (capture, bundle, perf.data, LLDB) or raw PT" },
	{ "export", verb_export,
	  "write a capture as a ptd bundle, a perf.data or an LLDB bundle" },
	{ "verify", verb_verify,
	  "check a capture's decode against its ground truth" },
	{ "attach", verb_attach, "ask ptd to trace a running process" },
	{ "detach", verb_detach, "stop a session; the process runs on" },
	{ "snapshot", verb_snapshot,
	  "decode a snapshot-mode session's newest trace" },
	{ "list", verb_list, "list your sessions" },
	{ "status", verb_status, "ptd's status, or one session's" },
	{ "stream", verb_stream, "a session's records as JSON lines" },
	{ "replay", verb_replay,
	  "ptd decodes a saved trace as a session; stream it" },
	{ "record", verb_record,
	  "write a recorded session's bundle into a directory" },
};

static void help(FILE *f)
{
	size_t i;

	fprintf(f, "Usage: ptctl [--socket PATH] VERB [OPTIONS...]\n\n");
	for (i = 0; i < PTD_ARRAY_SIZE(verbs); i++)
		fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].help);
	fprintf(f, "\nptctl VERB --help for a verb's options.\n"
		   "The daemon verbs talk to ptd at --socket PATH, $PTD_SOCKET "
		   "or " PTCTL_DEFAULT_SOCKET ".\n"
		   "Exit status: 0 ok, 1 usage, 2 bad input, 3 decoded with "
		   "errors, 4 ground truth mismatch,\n5 cannot connect to ptd, "
		   "6 request refused, 7 no such process/session,\n8 "
		   "permission denied, 9 no Intel PT, 10 a ptd limit, 11 stream "
		   "ended on error/shutdown.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	(void)ptd_nofile_raise();	/* copies of decoded code hold fds */
	/* The global option comes before the verb. */
	if (argc >= 2 && !strncmp(argv[1], "--socket=", 9)) {
		arg_socket = argv[1] + 9;
		argc--;
		argv++;
	} else if (argc >= 3 && !strcmp(argv[1], "--socket")) {
		arg_socket = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (arg_socket && !*arg_socket) {
		errx_msg("--socket: empty path");
		return EXIT_USAGE;
	}
	if (argc < 2) {
		help(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		help(stdout);
		return 0;
	}
	for (i = 0; i < PTD_ARRAY_SIZE(verbs); i++)
		if (!strcmp(argv[1], verbs[i].name))
			return verbs[i].run(argc - 1, argv + 1);
	errx_msg("unknown verb '%s'", argv[1]);
	help(stderr);
	return EXIT_USAGE;
}
