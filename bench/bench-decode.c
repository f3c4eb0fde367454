/* SPDX-License-Identifier: MIT */
/*
 * Decode throughput, side by side in one process on one trace:
 *
 *   bare pt_insn_next loop         the baseline for instruction output
 *   bare pt_blk_next loop          the baseline for block output
 *   ptd insn records -> JSON pipe  what a subscriber of insn records costs
 *   ptd block records -> JSON pipe
 *   ptd insn path, records counted what the decoder itself adds to
 *   ptd block path, records counted  pt_insn_next / pt_blk_next, no output
 *   ... ip,tid                     insn records with only "ip" and "tid"
 *                                  (subscribe "fields"), both paths
 *   through ptd, 1 / 4 / 16 subs   the trace replayed by a ptd started
 *                                  for the run (lossless replay, insn
 *                                  records, full or ip,tid), each
 *                                  subscriber a thread reading its socket;
 *                                  4 and 16: aggregate, and the slowest
 *                                  one.
 *                                  A replay decodes on the block path
 *                                  (daemon/server/replay.c): compare with
 *                                  the offline block path rows.  Its time
 *                                  runs from the replay request to the
 *                                  last bye.
 *   ptd insn records with symbols  what --symbols costs beside plain insn
 *                                  records (loading the symbols included)
 *   ptd call records (+ symbols)   the call stack's call/return records
 *                                  alone, with symbols (as --records call
 *                                  --symbols), and insn records with call
 *                                  records beside them, without: each
 *                                  against plain insn records
 *   ip,tid binary (offline to a pipe, insn records ip,tid as binary frames
 *   and through ptd, 1 sub)        (record/binframe.h; subscribe "format":
 *                                  "binary"): 12 bytes a record; the
 *                                  subscriber thread counts the records
 *                                  from the frame headers.  Both go
 *                                  through runs of addresses
 *                                  (decode/decoder.h, opts.ips), as
 *                                  ptctl decode and a replay do
 *   ... binary, jobs 1 / jobs N    the same replay with "jobs" 1 and N
 *                                  (daemon/server/replay.c: the insn path,
 *                                  each thread on that many threads, the
 *                                  same records for any jobs): jobs 1
 *                                  against the replay without jobs (the
 *                                  block path), jobs N against jobs 1 and
 *                                  against the replay without jobs
 *   ptd first_exec + counters      first executions and exact counts
 *                                  (decode/counters.h; the top 20 of each
 *                                  kind at the end), alone and beside insn
 *                                  records: each against plain insn
 *                                  records
 *   ptd trace records              DynamoRIO's hot traces (decode/traces.h,
 *                                  default threshold), alone and beside
 *                                  insn records: each against plain insn
 *                                  records
 *   parallel decoder, 1 / N threads the block path's insn records counted,
 *                                  serially and with opts.jobs N
 *                                  (decode/parallel.h: the block path is
 *                                  decoded serially, so about 1x: what
 *                                  deciding that costs), the ratio of the
 *                                  two; and the insn path with N threads
 *                                  beside the insn path alone
 *   threads at once                the capture through ptd_input_decode
 *                                  with opts.jobs N on the insn path,
 *                                  records counted, as ptctl decode
 *                                  --jobs N --path insn decodes it: a
 *                                  capture mostly of short threads has
 *                                  them decoded at once
 *                                  (decode/threadpar.h), against the insn
 *                                  path row (thread after thread).  For a
 *                                  trace of many threads:
 *                                  -- tests/progs/prog-threads N ITERS
 *   ptd block path, addresses      the decoder alone where it makes runs
 *   counted                        of addresses (opts.ips), counted: the
 *                                  ceiling of the ip,tid rows on one
 *                                  decode thread
 *   ip,tid packed (offline to a    as the ip,tid binary rows, in a packed
 *   pipe, and through ptd, 1 sub)  stream ("format": "packed"): runs of
 *                                  addresses as address frames, 1-2
 *                                  bytes a record
 *
 * The JSON goes through a pipe to a child process that reads and discards
 * it, as a subscriber would.  Each measurement is the best of --repeat runs;
 * figures are M instructions/s and ratios to the bare loops (the machines
 * are shared and noisy: compare ratios, not absolute numbers).
 *
 * The trace comes from the software PT source and is cached in --cache DIR
 * (branch mode, the default, runs at ~260 k instructions/s: the first run
 * takes about half a minute).
 *
 *   bench-decode [--cache DIR] [--repeat N] [--only ROW] [--jobs N]
 *                [-- PROGRAM ARGS...]
 *
 * --jobs N (2..64, default 2) the threads of the parallel rows.
 *
 * --only ROW measures one row (0-based, in the order printed) beside its
 * baseline: for a profiler.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aspace/iscache.h"
#include "common/bytes.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "decode/decoder.h"
#include "input/input.h"
#include "record/binframe.h"
#include "record/jsonw.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"
#include "sym/symbols.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct pt_config base_config(const struct ptd_capture_stream *rs,
				    const struct ptd_capture *c)
{
	struct pt_config cfg;

	pt_config_init(&cfg);
	cfg.begin = rs->pt;
	cfg.end = rs->pt + rs->len;
	cfg.cpu = c->cpu;
	if (cfg.cpu.vendor != pcv_unknown)
		(void)pt_cpu_errata(&cfg.errata, &cfg.cpu);
	return cfg;
}

/* The bare pt_insn_next loop: count instructions, drain events, resync on
 * errors.  Applies the timeline like ptd does, so both pay for it. */
static uint64_t bare_insn(const struct ptd_capture *c,
			  struct ptd_capture_stream *rs)
{
	struct pt_config cfg = base_config(rs, c);
	struct pt_insn_decoder *d = pt_insn_alloc_decoder(&cfg);
	uint64_t n = 0;
	int st;

	if (!d)
		return 0;
	(void)pt_insn_set_image(d, ptd_image_pt(rs->img));
	for (st = pt_insn_sync_forward(d); st != -pte_eos;) {
		struct pt_insn insn;
		uint64_t off;

		if (st < 0) {
			st = pt_insn_sync_forward(d);
			if (st == -pte_eos)
				break;
			continue;
		}
		while (st & pts_event_pending) {
			struct pt_event ev;

			st = pt_insn_event(d, &ev, sizeof(ev));
			if (st < 0)
				break;
		}
		if (st < 0)
			continue;
		if (!pt_insn_get_offset(d, &off) &&
		    ptd_tl_cursor_due(&rs->cursor, off))
			(void)ptd_tl_cursor_advance(&rs->cursor, off, rs->img,
						    NULL);
		st = pt_insn_next(d, &insn, sizeof(insn));
		if (st >= 0)
			n++;
	}
	pt_insn_free_decoder(d);
	return n;
}

static uint64_t bare_blk(const struct ptd_capture *c,
			 struct ptd_capture_stream *rs)
{
	struct pt_config cfg = base_config(rs, c);
	struct pt_block_decoder *d = pt_blk_alloc_decoder(&cfg);
	uint64_t n = 0;
	int st;

	if (!d)
		return 0;
	(void)pt_blk_set_image(d, ptd_image_pt(rs->img));
	for (st = pt_blk_sync_forward(d); st != -pte_eos;) {
		struct pt_block b;
		uint64_t off;

		if (st < 0) {
			st = pt_blk_sync_forward(d);
			if (st == -pte_eos)
				break;
			continue;
		}
		while (st & pts_event_pending) {
			struct pt_event ev;

			st = pt_blk_event(d, &ev, sizeof(ev));
			if (st < 0)
				break;
		}
		if (st < 0)
			continue;
		if (!pt_blk_get_offset(d, &off) &&
		    ptd_tl_cursor_due(&rs->cursor, off))
			(void)ptd_tl_cursor_advance(&rs->cursor, off, rs->img,
						    NULL);
		st = pt_blk_next(d, &b, sizeof(b));
		if (st >= 0)
			n += b.ninsn;
	}
	pt_blk_free_decoder(d);
	return n;
}

struct sink {
	struct ptd_jsonw w;
};

static int sink_record(void *ctx, const struct ptd_record *rec)
{
	return ptd_jsonw_put(&((struct sink *)ctx)->w, rec);
}

/* A subscriber: a child process reading the pipe to its end. */
static pid_t start_reader(int *ret_wfd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	pid = fork();
	if (pid == 0) {
		static char buf[1 << 16];
		unsigned long long total = 0;
		ssize_t n;

		close(p[1]);
		while ((n = read(p[0], buf, sizeof(buf))) > 0)
			total += (unsigned long long)n;
		_exit(total ? 0 : 1);
	}
	close(p[0]);
	*ret_wfd = p[1];
	return pid;
}

/* ptd decoding with records written as JSON to a pipe, with @fields
 * (0: every field). */
static uint64_t ptd_json(const struct ptd_capture *c,
			 struct ptd_capture_stream *rs, unsigned want,
			 enum ptd_decode_path path, uint32_t fields,
			 struct ptd_insncache *icache,
			 struct ptd_symbols *symbols, uint64_t *ret_bytes)
{
	struct ptd_decode_opts o;
	struct ptd_decode_stats st;
	struct sink s;
	int wfd, status;
	pid_t child = start_reader(&wfd);

	if (child < 0)
		return 0;
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = want;
	o.json_bodies = true;
	o.symbols = symbols;
	o.cpu = c->cpu;
	o.counters_top = 20;	/* as ptctl decode's default */
	memset(&st, 0, sizeof(st));
	(void)ptd_jsonw_init(&s.w, wfd, 1 << 20);
	ptd_jsonw_set_fields(&s.w, fields);
	rs->args.icache = icache;
	(void)ptd_decode_thread(&o, &rs->args, sink_record, &s, &st);
	(void)ptd_jsonw_fini(&s.w);
	close(wfd);
	(void)waitpid(child, &status, 0);
	*ret_bytes = s.w.bytes;
	return st.insns;
}

static int bin_record(void *ctx, const struct ptd_record *rec)
{
	return ptd_binw_put(ctx, rec);
}

static int bin_records(void *ctx, const struct ptd_record *recs, size_t n)
{
	int r = 0;

	for (size_t i = 0; i < n && !r; i++)
		r = ptd_binw_put(ctx, &recs[i]);
	return r;
}

static int bin_ips(void *ctx, pid_t pid, pid_t tid, const uint64_t *ips,
		   size_t n)
{
	return ptd_binw_ips(ctx, pid, tid, ips, n);
}

/* ptd decoding (block path) with insn records of @fields written as
 * binary frames to a pipe, as ptctl decode --format binary writes them:
 * in runs, of addresses where the fields are ip/tid/pid at most. */
static uint64_t ptd_bin(const struct ptd_capture *c,
			struct ptd_capture_stream *rs, uint32_t fields,
			bool packed, struct ptd_insncache *icache,
			uint64_t *ret_bytes)
{
	struct ptd_decode_opts o;
	struct ptd_decode_stats st;
	struct ptd_binw w;
	atomic_bool gate;
	int wfd, status;
	pid_t child = start_reader(&wfd);

	if (child < 0)
		return 0;
	memset(&o, 0, sizeof(o));
	o.path = PTD_PATH_BLOCK;
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	o.cpu = c->cpu;
	memset(&st, 0, sizeof(st));
	(void)ptd_binw_init(&w, wfd, fields);
	if (packed)
		ptd_binw_set_packed(&w);
	o.batch = bin_records;
	o.batch_of = bin_record;
	o.ips = bin_ips;
	atomic_init(&gate, ptd_binw_takes_ips(&w));
	o.ips_gate = &gate;
	rs->args.icache = icache;
	(void)ptd_decode_thread(&o, &rs->args, bin_record, &w, &st);
	(void)ptd_binw_end(&w, NULL, 0);
	(void)ptd_binw_fini(&w);
	close(wfd);
	(void)waitpid(child, &status, 0);
	*ret_bytes = w.bytes;
	return st.insns;
}

static int count_ips(void *ctx, pid_t pid, pid_t tid, const uint64_t *ips,
		     size_t n)
{
	(void)pid;
	(void)tid;
	(void)ips;
	*(uint64_t *)ctx += n;
	return 0;
}

static int count_record(void *ctx, const struct ptd_record *rec)
{
	(void)rec;
	++*(uint64_t *)ctx;
	return 0;
}

static int count_records(void *ctx, const struct ptd_record *recs, size_t n)
{
	(void)recs;
	*(uint64_t *)ctx += n;
	return 0;
}

/* The decoder alone on @path: insn records counted, nothing rendered;
 * with @ips, as runs of addresses where the decoder makes them (what the
 * decoder costs a consumer of addresses alone: ip,tid binary). */
static uint64_t ptd_count(const struct ptd_capture *c,
			  struct ptd_capture_stream *rs,
			  enum ptd_decode_path path,
			  struct ptd_insncache *icache, unsigned jobs,
			  bool ips)
{
	struct ptd_decode_opts o;
	struct ptd_decode_stats st;
	atomic_bool gate;
	uint64_t n = 0;

	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	o.cpu = c->cpu;
	o.jobs = jobs;
	if (ips) {
		atomic_init(&gate, true);
		o.batch = count_records;
		o.batch_of = count_record;
		o.ips = count_ips;
		o.ips_gate = &gate;
	}
	memset(&st, 0, sizeof(st));
	rs->args.icache = icache;
	(void)ptd_decode_thread(&o, &rs->args, count_record, &n, &st);
	if (st.serial_parts)
		fprintf(stderr, "bench: %" PRIu64 " part(s) decoded serially: "
				"%s\n",
			st.serial_parts, st.serial_why);
	/* What was delivered: a parallel decode's statistics count the
	 * parts' instructions, the records are what the serial decode
	 * gives. */
	return n;
}

enum which { BARE_INSN, BARE_BLK, PTD_INSN, PTD_BLOCK, PTD_INSN_PATH,
	     PTD_BLK_PATH, PTD_INSN_JSON, PTD_INSN_IPTID, PTD_INSN_JSON_IPTID,
	     PTD_D1, PTD_D1_IPTID, PTD_D4, PTD_D4_IPTID, PTD_INSN_SYMS,
	     PTD_CALLS_SYMS, PTD_INSN_CALLS, PTD_PAR1, PTD_PAR2, PTD_PAR2_INSN,
	     PTD_INSN_BIN_IPTID, PTD_D1_BIN_IPTID,
	     PTD_FIRSTEXEC, PTD_INSN_FIRSTEXEC, PTD_TRACES, PTD_INSN_TRACES,
	     PTD_D1_BIN_J1, PTD_D1_BIN_J2, PTD_D16, PTD_THREADS, PTD_IPS_COUNT,
	     PTD_INSN_PACKED_IPTID, PTD_D1_PACKED_IPTID, NWHICH };
static const char *names[NWHICH] = {
	"bare pt_insn_next loop", "bare pt_blk_next loop",
	"ptd insn records, JSON to a pipe", "ptd block records, JSON to a pipe",
	"ptd insn path, insn records counted",
	"ptd block path, insn records counted",
	"ptd insn path, insn JSON to a pipe",
	"ptd insn records ip,tid, to a pipe",
	"ptd insn path, ip,tid to a pipe",
	"via ptd replay, 1 subscriber",
	"via ptd replay, 1 subscriber, ip,tid",
	"via ptd replay, 4 subs (aggregate)",
	"via ptd replay, 4 subs ip,tid (aggregate)",
	"ptd insn records + symbols, JSON",
	"ptd call records + symbols, JSON",
	"ptd insn + call records, JSON",
	"parallel decoder, 1 thread (serial)",
	"parallel decoder, 2 threads",
	"parallel decoder, 2 threads, insn path",
	"ptd insn records ip,tid, binary, pipe",
	"via ptd replay, 1 sub, ip,tid binary",
	"ptd first_exec + counters, JSON",
	"ptd insn + first_exec + counters, JSON",
	"ptd trace records, JSON",
	"ptd insn + trace records, JSON",
	"via ptd replay, ip,tid binary, jobs 1",
	"via ptd replay, ip,tid binary, jobs 2",
	"via ptd replay, 16 subs (aggregate)",
	"threads at once, insn path, counted",
	"ptd block path, addresses counted",
	"ptd insn records ip,tid, packed, pipe",
	"via ptd replay, 1 sub, ip,tid packed",
};
/* What each row is compared with, and that row's short name. */
static const enum which baseline[NWHICH] = {
	BARE_INSN, BARE_BLK, BARE_INSN, BARE_BLK, BARE_INSN, BARE_BLK,
	BARE_INSN, BARE_INSN, BARE_INSN, BARE_INSN, BARE_INSN, BARE_INSN,
	BARE_INSN, PTD_INSN, PTD_INSN, PTD_INSN, BARE_BLK, PTD_PAR1,
	PTD_INSN_PATH, BARE_INSN, BARE_INSN, PTD_INSN, PTD_INSN, PTD_INSN,
	PTD_INSN, PTD_D1_BIN_IPTID, PTD_D1_BIN_J1, PTD_D1, PTD_INSN_PATH,
	BARE_INSN, BARE_INSN, BARE_INSN,
};
static const char *const short_names[NWHICH] = {
	"bare pt_insn_next", "bare pt_blk_next ", "insn records",
	"block records", "insn path", "", "", "", "", "1 sub", "", "", "",
	"", "", "", "1 thread", "", "", "", "no jobs", "", "", "", "", "jobs 1",
	"", "", "", "", "", "",
};
/* The rows through ptd. */
static bool via_ptd(enum which w)
{
	return (w >= PTD_D1 && w <= PTD_D4_IPTID) || w == PTD_D1_BIN_IPTID ||
	       w == PTD_D1_BIN_J1 || w == PTD_D1_BIN_J2 || w == PTD_D16 ||
	       w == PTD_D1_PACKED_IPTID;
}

/* The threads of the parallel rows (--jobs). */
static unsigned arg_jobs = 2;

/* The replay's "jobs" of the rows through ptd (0: none). */
static unsigned jobs_of(enum which w)
{
	return w == PTD_D1_BIN_J1 ? 1 : w == PTD_D1_BIN_J2 ? arg_jobs : 0;
}

/* Subscribers of the rows through ptd (1 elsewhere). */
static unsigned nsubs_of(enum which w)
{
	return w == PTD_D4 || w == PTD_D4_IPTID ? 4 : w == PTD_D16 ? 16 : 1;
}

#define IPTID (PTD_FIELD_BIT(PTD_FIELD_IP) | PTD_FIELD_BIT(PTD_FIELD_TID))

/* ---- through ptd: a daemon started for the run ---- */

static char ptd_sock[96];
static char ptd_dir[] = "/tmp/bench-ptd-XXXXXX";
static pid_t ptd_pid;

static int sock_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	(void)snprintf(a.sun_path, sizeof(a.sun_path), "%s", ptd_sock);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Start @exe with a config in a new directory under /tmp; false (said
 * why) if it cannot be. */
static bool ptd_start(const char *exe)
{
	const char *dir = ptd_dir;
	char conf[PATH_MAX], text[2 * PATH_MAX], log[PATH_MAX];

	if (access(exe, X_OK) != 0) {
		fprintf(stderr, "bench: no ptd at %s: the rows through ptd "
				"are left out (--ptd PATH)\n", exe);
		return false;
	}
	if (!mkdtemp(ptd_dir))
		return false;
	(void)snprintf(conf, sizeof(conf), "%s/ptd.conf", dir);
	(void)snprintf(log, sizeof(log), "%s/ptd.log", dir);
	(void)snprintf(ptd_sock, sizeof(ptd_sock), "%s/run/ptd.sock", dir);
	(void)snprintf(text, sizeof(text),
		       "socket_path = %s\nsocket_mode = 0600\n"
		       "log_level = warning\nuser_memory_limit = 64G\n"
		       "max_decode_jobs = %u\n",
		       ptd_sock, arg_jobs);
	{
		FILE *f = fopen(conf, "we");
		bool ok;

		if (!f)
			return false;
		ok = fputs(text, f) >= 0;
		if (fclose(f) != 0 || !ok)
			return false;
	}
	ptd_pid = fork();
	if (ptd_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0600);

		if (fd >= 0)
			(void)dup2(fd, 2);
		execl(exe, exe, "-c", conf, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; ptd_pid > 0 && i < 500; i++) {
		int fd = sock_connect();

		if (fd >= 0) {
			close(fd);
			return true;
		}
		usleep(10000);
	}
	fprintf(stderr, "bench: ptd did not start (see %s)\n", log);
	return false;
}

/* CPU seconds this process has used so far, all its threads. */
static double cpu_now(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds ptd has used so far (user + system, all its threads): on a
 * loaded machine a steadier measure of its cost than the wall clock. */
static double ptd_cpu(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	int n = 0;

	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)ptd_pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	/* after "(comm)": field 3 onwards; utime and stime are 14 and 15 */
	p = strrchr(buf, ')');
	for (int field = 3; p && *p && field <= 15; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			break;
		if (field == 14)
			n += sscanf(p + 1, "%lu %lu", &ut, &st);
	}
	return n == 2 ? (double)(ut + st) / (double)sysconf(_SC_CLK_TCK) : 0;
}

static void ptd_stop(void)
{
	int st;

	if (ptd_pid <= 0)
		return;
	kill(ptd_pid, SIGTERM);
	(void)waitpid(ptd_pid, &st, 0);
	ptd_pid = 0;
	(void)ptd_rm_rf(ptd_dir);
}

/* Read one line (a response) into @buf; false on any failure or an
 * error response. */
static bool read_response(int fd, char *buf, size_t cap)
{
	size_t n = 0;

	while (n + 1 < cap) {
		ssize_t k = read(fd, buf + n, 1);	/* only the response */

		if (k <= 0)
			return false;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
	return strstr(buf, "\"ok\":true") != NULL;
}

/* Send @req and read its response into @buf. */
static bool call_line(int fd, const char *req, char *buf, size_t cap)
{
	buf[0] = 0;
	return ptd_write_all(fd, req, strlen(req)) >= 0 &&
	       read_response(fd, buf, cap);
}

/* One subscriber: reads its socket to the end, counting lines and bytes. */
struct reader {
	pthread_t th;
	int fd;
	bool binary;		/* frames: records counted from headers */
	uint64_t lines, bytes;
	double end;
};

/* A binary subscriber: the records of its frames, from their headers
 * (as cheap for the reader as counting newlines). */
static void read_frames(struct reader *r)
{
	static __thread uint8_t buf[1 << 16];
	uint8_t hdr[PTD_BIN_HDR];
	size_t have = 0;	/* header bytes gathered */
	uint64_t skip = 0;	/* payload bytes still to pass */
	ssize_t n;

	while ((n = read(r->fd, buf, sizeof(buf))) > 0) {
		size_t i = 0;

		r->bytes += (uint64_t)n;
		while (i < (size_t)n) {
			size_t k;

			if (skip) {
				k = (size_t)n - i < skip ? (size_t)n - i
							 : (size_t)skip;
				i += k;
				skip -= k;
				continue;
			}
			k = PTD_BIN_HDR - have;
			if (k > (size_t)n - i)
				k = (size_t)n - i;
			memcpy(hdr + have, buf + i, k);
			have += k;
			i += k;
			if (have < PTD_BIN_HDR)
				break;
			have = 0;
			skip = ptd_get_u32(hdr + 16);
			if (hdr[5] == PTD_BIN_RECORDS ||
			    hdr[5] == PTD_BIN_ADDRS)
				r->lines += ptd_get_u32(hdr + 8);
		}
	}
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	static __thread char buf[1 << 16];
	ssize_t n;

	if (r->binary) {
		read_frames(r);
		r->end = now();
		return NULL;
	}
	while ((n = read(r->fd, buf, sizeof(buf))) > 0) {
		const char *p = buf, *e = buf + n;

		r->bytes += (uint64_t)n;
		while ((p = memchr(p, '\n', (size_t)(e - p)))) {
			r->lines++;
			p++;
		}
	}
	r->end = now();
	return NULL;
}

/* Replay @cache through ptd to @nsubs subscribers of insn records with
 * @fields; returns the seconds until the last one has its bye, *ret_insns
 * the records all received and *ret_slowest the slowest one's rate
 * (M/s). */
static double through_ptd(const char *cache, unsigned nsubs, uint32_t fields,
			  const char *format, unsigned jobs, uint64_t *ret_insns,
			  uint64_t *ret_bytes, double *ret_slowest,
			  double *ret_cpu)
{
	char req[PATH_MAX + 256], resp[4096], abs[PATH_MAX], jobs_key[32] = "";
	char format_key[32] = "";
	struct reader rd[16];
	const char *sp;
	bool binary = strcmp(format, "json") != 0;
	double t0, tend = 0, cpu0 = ptd_cpu();
	long session;
	int ctl;

	*ret_insns = *ret_bytes = 0;
	*ret_slowest = 0;
	if (!realpath(cache, abs) || (ctl = sock_connect()) < 0)
		return 0;
	if (jobs)
		(void)snprintf(jobs_key, sizeof(jobs_key), ",\"jobs\":%u",
			       jobs);
	if (binary)
		(void)snprintf(format_key, sizeof(format_key),
			       ",\"format\":\"%s\"", format);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\","
		       "\"wait_ms\":10000%s}\n", abs, jobs_key);
	t0 = now();
	if (!call_line(ctl, req, resp, sizeof(resp)) ||
	    !(sp = strstr(resp, "\"session\":"))) {
		fprintf(stderr, "bench: replay refused: %s", resp);
		close(ctl);
		return 0;
	}
	session = strtol(sp + 10, NULL, 10);
	/* Every subscribe is sent before any answer is read, so that they
	 * join together (the replay begins at the first). */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%ld,"
		       "\"kinds\":[\"insn\"]%s%s}\n",
		       session, fields ? ",\"fields\":[\"ip\",\"tid\"]" : "",
		       format_key);
	for (unsigned i = 0; i < nsubs; i++) {
		memset(&rd[i], 0, sizeof(rd[i]));
		rd[i].binary = binary;
		rd[i].fd = sock_connect();
		if (rd[i].fd >= 0 &&
		    ptd_write_all(rd[i].fd, req, strlen(req)) < 0) {
			close(rd[i].fd);
			rd[i].fd = -1;
		}
	}
	for (unsigned i = 0; i < nsubs; i++) {
		resp[0] = 0;
		if (rd[i].fd < 0 ||
		    !read_response(rd[i].fd, resp, sizeof(resp)) ||
		    pthread_create(&rd[i].th, NULL, reader_main, &rd[i])) {
			/* (a ptd before "fields": --ptd OLD for a comparison) */
			fprintf(stderr, "bench: subscribe failed: %s\n", resp);
			for (unsigned j = i; j < nsubs; j++)
				if (rd[j].fd >= 0)
					close(rd[j].fd);
			nsubs = i;
			break;
		}
	}
	if (!nsubs) {
		close(ctl);
		return 0;
	}
	for (unsigned i = 0; i < nsubs; i++) {
		double rate;
		uint64_t insns;

		pthread_join(rd[i].th, NULL);
		close(rd[i].fd);
		/* every line but hello and bye is an insn record (lossless:
		 * no lost records); binary: the records frames' counts */
		insns = binary ? rd[i].lines
			       : rd[i].lines >= 2 ? rd[i].lines - 2 : 0;
		*ret_insns += insns;
		*ret_bytes += rd[i].bytes;
		rate = (double)insns / (rd[i].end - t0) / 1e6;
		if (!i || rate < *ret_slowest)
			*ret_slowest = rate;
		if (rd[i].end > tend)
			tend = rd[i].end;
	}
	close(ctl);
	*ret_cpu = ptd_cpu() - cpu0;
	return tend - t0;
}

static const char *arg_cache;

static void *spin(void *arg)
{
	volatile uint64_t x = 0;

	/* about a second: long enough to meet the machine's other load */
	for (uint64_t i = 0; i < (1u << 30); i++)
		x += i;
	(void)arg;
	return NULL;
}

/* The cores @n threads get here now: @n threads of plain arithmetic
 * against 1, each doing the same work, each the best of 2 (@n: @n free
 * cores; the parallel rows cannot beat this). */
static double threads_cores(unsigned n)
{
	double t1 = 1e30, tn = 1e30;
	pthread_t t[64];

	for (int k = 0; k < 2; k++) {
		unsigned started = 0;
		double t0 = now();

		spin(NULL);
		if (now() - t0 < t1)
			t1 = now() - t0;
		t0 = now();
		while (started < n &&
		       pthread_create(&t[started], NULL, spin, NULL) == 0)
			started++;
		for (unsigned i = 0; i < started; i++)
			(void)pthread_join(t[i], NULL);
		if (started < n)
			return 0;
		if (now() - t0 < tn)
			tn = now() - t0;
	}
	return n * t1 / tn;
}

/* The capture through ptd_input_decode, as ptctl decode --jobs N --path
 * insn decodes it: a capture of many short threads decodes them at once
 * (decode/threadpar.h), beside the insn path row's thread after thread
 * (records counted as it counts them); its time includes reading the
 * capture. */
static double threads_at_once(uint64_t *ret_insns, uint64_t *ret_bytes,
			      double *ret_cpu)
{
	struct ptd_input_opts o;
	struct ptd_input_sink sink = { NULL, count_record, NULL, ret_insns,
				       NULL };
	struct ptd_diag diag = { "" };
	size_t terr = 0;
	double t0, c0;

	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	o.decode.jobs = arg_jobs;
	*ret_insns = 0;
	*ret_bytes = 0;
	c0 = cpu_now();
	t0 = now();
	if (ptd_input_decode(arg_cache, &o, &sink, &terr, &diag) < 0 ||
	    terr) {
		fprintf(stderr, "bench: %s\n", diag.msg);
		exit(2);
	}
	t0 = now() - t0;
	*ret_cpu = cpu_now() - c0;
	return t0;
}

/* Run one measurement over every thread; returns seconds. */
static double measure(const struct ptd_capture *c, enum which w,
		      uint64_t *ret_insns, uint64_t *ret_bytes,
		      double *ret_slowest, double *ret_cpu)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_insncache *icache;
	(void)ptd_insncache_new(0, &icache);
	struct ptd_diag diag = { "" };
	struct ptd_symbols *syms = NULL;
	double t0, t = 0, c0, cpu = 0;
	uint64_t insns = 0, bytes = 0, b;

	/* a fresh one each run: loading the files' symbols is part of
	 * the cost */
	if ((w == PTD_INSN_SYMS || w == PTD_CALLS_SYMS) &&
	    ptd_symbols_new(NULL, &syms) < 0)
		exit(2);
	if (via_ptd(w)) {
		ptd_insncache_free(icache);
		ptd_iscache_free(ic);
		bool packed = w == PTD_D1_PACKED_IPTID;
		bool bin = w == PTD_D1_BIN_IPTID || jobs_of(w) || packed;

		return through_ptd(arg_cache, nsubs_of(w),
				   w == PTD_D1_IPTID || w == PTD_D4_IPTID || bin
					   ? IPTID
					   : 0,
				   packed ? "packed" : bin ? "binary" : "json",
				   jobs_of(w), ret_insns, ret_bytes,
				   ret_slowest, ret_cpu);
	}
	if (w == PTD_THREADS) {
		ptd_insncache_free(icache);
		ptd_iscache_free(ic);
		return threads_at_once(ret_insns, ret_bytes, ret_cpu);
	}
	for (size_t i = 0; i < c->nthreads; i++) {
		struct ptd_capture_stream rs;

		if (ptd_capture_stream_open(c, i, ic, &rs, &diag) < 0) {
			fprintf(stderr, "bench: %s\n", diag.msg);
			exit(2);
		}
		c0 = cpu_now();
		t0 = now();
		switch (w) {
		case BARE_INSN:
			insns += bare_insn(c, &rs);
			break;
		case BARE_BLK:
			insns += bare_blk(c, &rs);
			break;
		case PTD_INSN:
		case PTD_INSN_IPTID:
			insns += ptd_json(c, &rs, PTD_REC_BIT(PTD_REC_INSN),
					  PTD_PATH_BLOCK,
					  w == PTD_INSN_IPTID ? IPTID : 0,
					  icache, NULL, &b);
			bytes += b;
			break;
		case PTD_INSN_SYMS:
			insns += ptd_json(c, &rs, PTD_REC_BIT(PTD_REC_INSN),
					  PTD_PATH_BLOCK, 0, icache, syms, &b);
			bytes += b;
			break;
		case PTD_CALLS_SYMS:
			insns += ptd_json(c, &rs, PTD_REC_BIT(PTD_REC_CALL),
					  PTD_PATH_BLOCK, 0, icache, syms, &b);
			bytes += b;
			break;
		case PTD_INSN_CALLS:
			insns += ptd_json(c, &rs,
					  PTD_REC_BIT(PTD_REC_INSN) |
						  PTD_REC_BIT(PTD_REC_CALL),
					  PTD_PATH_BLOCK, 0, icache, NULL, &b);
			bytes += b;
			break;
		case PTD_FIRSTEXEC:
		case PTD_INSN_FIRSTEXEC:
			insns += ptd_json(c, &rs,
					  PTD_REC_BIT(PTD_REC_FIRST_EXEC) |
						  PTD_REC_BIT(PTD_REC_COUNTERS) |
						  (w == PTD_INSN_FIRSTEXEC
							   ? PTD_REC_BIT(
								     PTD_REC_INSN)
							   : 0),
					  PTD_PATH_BLOCK, 0, icache, NULL, &b);
			bytes += b;
			break;
		case PTD_TRACES:
		case PTD_INSN_TRACES:
			insns += ptd_json(c, &rs,
					  PTD_REC_BIT(PTD_REC_TRACE) |
						  PTD_REC_BIT(
							  PTD_REC_TRACE_WITHDRAWN) |
						  (w == PTD_INSN_TRACES
							   ? PTD_REC_BIT(
								     PTD_REC_INSN)
							   : 0),
					  PTD_PATH_BLOCK, 0, icache, NULL, &b);
			bytes += b;
			break;
		case PTD_INSN_JSON:
		case PTD_INSN_JSON_IPTID:
			insns += ptd_json(c, &rs, PTD_REC_BIT(PTD_REC_INSN),
					  PTD_PATH_INSN,
					  w == PTD_INSN_JSON_IPTID ? IPTID : 0,
					  icache, NULL, &b);
			bytes += b;
			break;
		case PTD_BLOCK:
			insns += ptd_json(c, &rs, PTD_REC_BIT(PTD_REC_BLOCK),
					  PTD_PATH_BLOCK,
					  0, icache, NULL, &b);
			bytes += b;
			break;
		case PTD_INSN_PATH:
			insns += ptd_count(c, &rs, PTD_PATH_INSN, icache, 1,
					   false);
			break;
		case PTD_BLK_PATH:
		case PTD_PAR1:
			insns += ptd_count(c, &rs, PTD_PATH_BLOCK, icache, 1,
					   false);
			break;
		case PTD_PAR2:
			insns += ptd_count(c, &rs, PTD_PATH_BLOCK, icache,
					   arg_jobs, false);
			break;
		case PTD_PAR2_INSN:
			insns += ptd_count(c, &rs, PTD_PATH_INSN, icache,
					   arg_jobs, false);
			break;
		case PTD_IPS_COUNT:
			insns += ptd_count(c, &rs, PTD_PATH_BLOCK, icache, 1,
					   true);
			break;
		case PTD_INSN_BIN_IPTID:
		case PTD_INSN_PACKED_IPTID:
			insns += ptd_bin(c, &rs, IPTID |
					 PTD_FIELD_BIT(PTD_FIELD_TYPE),
					 w == PTD_INSN_PACKED_IPTID, icache,
					 &b);
			bytes += b;
			break;
		case PTD_D1_BIN_IPTID:
		case PTD_D1_PACKED_IPTID:
		case PTD_D1_BIN_J1:
		case PTD_D1_BIN_J2:
		case PTD_D1:
		case PTD_D1_IPTID:
		case PTD_D4:
		case PTD_D4_IPTID:
		case PTD_D16:
		case PTD_THREADS:
		case NWHICH:
			break;
		}
		t += now() - t0;
		cpu += cpu_now() - c0;
		ptd_capture_stream_close(&rs);
	}
	/* The parallel decoder's cost in CPU (all its threads), beside the
	 * serial decode's: what the parts' overhead is where cores are
	 * busy. */
	if (w == PTD_INSN_PATH || w == PTD_PAR1 || w == PTD_PAR2 ||
	    w == PTD_PAR2_INSN)
		*ret_cpu = cpu;
	ptd_insncache_free(icache);
	ptd_symbols_free(syms);
	ptd_iscache_free(ic);
	*ret_insns = insns;
	*ret_bytes = bytes;
	return t;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "cache", required_argument, NULL, 'c' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "only", required_argument, NULL, 'o' },
		{ "ptd", required_argument, NULL, 'p' },
		{ "jobs", required_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	char ptd_exe[PATH_MAX] = "";
	bool have_ptd;
	double slowest[NWHICH], cpu[NWHICH];
	const char *cache = "bench-cache/ls-lR-linux";
	char *default_argv[] = { "/bin/ls", "-lR", "/usr/include/linux", NULL };
	char **prog = default_argv;
	uint64_t repeat = 3, only = NWHICH, jobs = 2;
	static char name_par[2][64], name_j[64];
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	double best[NWHICH];
	uint64_t insns[NWHICH], bytes[NWHICH];
	int opt, r;

	while ((opt = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			cache = optarg;
			break;
		case 'r':
			if (ptd_parse_u64(optarg, 10, &repeat) < 0 ||
			    repeat == 0 || repeat > 100) {
				fprintf(stderr, "bench: --repeat 1..100\n");
				return 1;
			}
			break;
		case 'p':
			(void)snprintf(ptd_exe, sizeof(ptd_exe), "%s", optarg);
			break;
		case 'j':
			if (ptd_parse_u64(optarg, 10, &jobs) < 0 || jobs < 2 ||
			    jobs > 64) {
				fprintf(stderr, "bench: --jobs 2..64\n");
				return 1;
			}
			arg_jobs = (unsigned)jobs;
			break;
		case 'o':
			if (ptd_parse_u64(optarg, 10, &only) < 0 ||
			    only >= NWHICH) {
				fprintf(stderr, "bench: --only 0..%d\n",
					NWHICH - 1);
				return 1;
			}
			break;
		default:
			return 1;
		}
	}
	if (optind < argc)
		prog = argv + optind;
	(void)snprintf(name_par[0], sizeof(name_par[0]),
		       "parallel decoder, %u threads", arg_jobs);
	(void)snprintf(name_par[1], sizeof(name_par[1]),
		       "parallel decoder, %u threads, insn path", arg_jobs);
	(void)snprintf(name_j, sizeof(name_j),
		       "via ptd replay, ip,tid binary, jobs %u", arg_jobs);
	names[PTD_PAR2] = name_par[0];
	names[PTD_PAR2_INSN] = name_par[1];
	names[PTD_D1_BIN_J2] = name_j;

	if (access(cache, F_OK) != 0) {
		struct ptd_swpt_options so;
		struct ptd_swpt_result res;
		double t0 = now();

		/* The cache's parent may not exist yet (e.g. in a new build
		 * directory). */
		char *parent = strdup(cache), *slash = parent ? strrchr(parent, '/') : NULL;

		if (slash && slash != parent) {
			*slash = 0;
			(void)mkdir(parent, 0755);
		}
		free(parent);
		/* Trace beside the cache and rename when complete, so an
		 * interrupted first run leaves no half capture to trust. */
		char partial[4096];

		(void)snprintf(partial, sizeof(partial), "%s.partial", cache);
		(void)ptd_rm_rf(partial);
		memset(&so, 0, sizeof(so));
		so.outdir = partial;
		so.quiet_target = true;
		fprintf(stderr, "bench: tracing '%s' into %s (once; this takes "
				"a while)\n", prog[0], cache);
		r = ptd_swpt_run(prog, &so, &res, &diag);
		if (r < 0) {
			fprintf(stderr, "bench: trace failed: %s\n", diag.msg);
			return 2;
		}
		if (rename(partial, cache) < 0) {
			fprintf(stderr, "bench: cannot rename '%s' to '%s': %s\n",
				partial, cache, strerror(errno));
			return 2;
		}
		fprintf(stderr, "bench: %" PRIu64 " instructions traced in "
				"%.0f s (%.0f k/s)\n", res.insns,
			now() - t0, (double)res.insns / (now() - t0) / 1e3);
	}
	r = ptd_capture_load(cache, &c, &diag);
	if (r < 0) {
		fprintf(stderr, "bench: %s\n", diag.msg);
		return 2;
	}
	arg_cache = cache;
	/* ptd beside this program in the build tree: bench/../daemon/ptd */
	if (!ptd_exe[0]) {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n > 0) {
			self[n] = 0;
			(void)snprintf(ptd_exe, sizeof(ptd_exe),
				       "%s/../daemon/ptd", dirname(self));
		}
	}
	have_ptd = (only == NWHICH || via_ptd((enum which)only)) &&
		   ptd_start(ptd_exe);

	for (int w = 0; w < NWHICH; w++) {
		best[w] = 1e30;
		insns[w] = bytes[w] = 0;
		slowest[w] = cpu[w] = 0;
	}
	/* Interleave the measurements so drift hits them alike. */
	for (uint64_t k = 0; k < repeat; k++)
		for (int w = 0; w < NWHICH; w++) {
			double t;

			double sl = 0, cp = 0;

			if (only < NWHICH && (uint64_t)w != only &&
			    w != (int)BARE_INSN && w != (int)baseline[only] &&
			    w != (int)baseline[baseline[only]])
				continue;
			if (via_ptd((enum which)w) && !have_ptd)
				continue;
			t = measure(&c, (enum which)w, &insns[w], &bytes[w],
				    &sl, &cp);
			if (t > 0 && t < best[w]) {
				best[w] = t;
				slowest[w] = sl;
			}
			/* ptd's CPU time: the least of the runs too */
			if (cp > 0 && (!cpu[w] || cp < cpu[w]))
				cpu[w] = cp;
		}

	printf("trace: %s (%zu thread(s), %" PRIu64
	       " instructions); best of %" PRIu64 "\n",
	       cache, c.nthreads, insns[BARE_INSN], repeat);
	for (int w = 0; w < NWHICH; w++) {
		enum which b = baseline[w];

		if (best[w] == 1e30)
			continue;
		double mips = (double)insns[w] / best[w] / 1e6;
		double base = (double)insns[b] / best[b] / 1e6;

		printf("  %-38s %8.2f M insn/s", names[w], mips);
		/* against its baseline, and against pt_insn_next where
		 * that is another row */
		if (b != (enum which)w)
			printf("  %5.2fx %s", mips / base, short_names[b]);
		if (b != (enum which)w && b != BARE_INSN)
			printf("  %5.2fx bare pt_insn_next",
			       mips / ((double)insns[BARE_INSN] /
				       best[BARE_INSN] / 1e6));
		if (bytes[w])
			printf("  (%.0f MB/s out, %.1f bytes/insn)",
			       (double)bytes[w] / best[w] / 1e6,
			       (double)bytes[w] / (double)insns[w]);
		printf("\n");
		if (cpu[w] > 0)
			printf("  %-38s %8.0f ns of %s CPU a record\n",
			       via_ptd((enum which)w)
				       ? "  ptd CPU (user+sys) per decoded record"
				       : "  CPU (all threads) per record",
			       cpu[w] * 1e9 / (double)insns[w] *
				       nsubs_of((enum which)w),
			       via_ptd((enum which)w) ? "ptd" : "its");
		if (nsubs_of((enum which)w) > 1)
			printf("  %-38s %8.2f M insn/s  %5.2fx bare "
			       "pt_insn_next\n", "  the slowest of them",
			       slowest[w],
			       slowest[w] / ((double)insns[BARE_INSN] /
					     best[BARE_INSN] / 1e6));
		if (nsubs_of((enum which)w) > 1 &&
		    insns[w] < insns[BARE_INSN] * nsubs_of((enum which)w))
			printf("  (%" PRIu64 " records fewer than %u x %" PRIu64
			       ": the later subscribers joined a replay that "
			       "had begun)\n",
			       insns[BARE_INSN] * nsubs_of((enum which)w) -
				       insns[w],
			       nsubs_of((enum which)w), insns[BARE_INSN]);
		else if (insns[w] != insns[BARE_INSN] * nsubs_of((enum which)w))
			printf("  WARNING: %s counted %" PRIu64
			       " instructions, the insn loop %" PRIu64 "\n",
			       names[w], insns[w], insns[BARE_INSN]);
	}
	/* The targets of issue 17, as ratios of rows of this run. */
#define RATE(w) ((double)insns[w] / best[w] / 1e6)
#define HAVE(w) (best[w] < 1e30)
	printf("ratios:\n");
	if (HAVE(PTD_INSN_IPTID) && HAVE(PTD_INSN))
		printf("  ip,tid / full records, JSON to a pipe        %5.2fx\n",
		       RATE(PTD_INSN_IPTID) / RATE(PTD_INSN));
	if (HAVE(PTD_INSN_JSON_IPTID) && HAVE(PTD_INSN_JSON))
		printf("  the same on the insn path                    %5.2fx\n",
		       RATE(PTD_INSN_JSON_IPTID) / RATE(PTD_INSN_JSON));
	if (HAVE(PTD_D1) && HAVE(PTD_INSN))
		printf("  via ptd, 1 sub / offline decoder to a pipe   %5.2fx\n",
		       RATE(PTD_D1) / RATE(PTD_INSN));
	if (HAVE(PTD_D1) && HAVE(PTD_INSN_JSON))
		printf("  via ptd, 1 sub / offline insn path to a pipe %5.2fx\n",
		       RATE(PTD_D1) / RATE(PTD_INSN_JSON));
	if (HAVE(PTD_D1_IPTID) && HAVE(PTD_INSN_JSON_IPTID))
		printf("  the same, ip,tid                             %5.2fx\n",
		       RATE(PTD_D1_IPTID) / RATE(PTD_INSN_JSON_IPTID));
	if (HAVE(PTD_D1_IPTID) && HAVE(PTD_D1))
		printf("  via ptd, 1 sub: ip,tid / full records        %5.2fx\n",
		       RATE(PTD_D1_IPTID) / RATE(PTD_D1));
	if (HAVE(PTD_D1_PACKED_IPTID) && HAVE(PTD_D1_BIN_IPTID))
		printf("  via ptd, 1 sub ip,tid: packed / binary       %5.2fx\n",
		       RATE(PTD_D1_PACKED_IPTID) / RATE(PTD_D1_BIN_IPTID));
	if (HAVE(PTD_D1_PACKED_IPTID) && HAVE(PTD_IPS_COUNT))
		printf("  via ptd, 1 sub ip,tid packed / the decoder alone "
		       "(addresses counted)  %5.2fx\n",
		       RATE(PTD_D1_PACKED_IPTID) / RATE(PTD_IPS_COUNT));
	if (HAVE(PTD_D4) && HAVE(PTD_D1))
		printf("  4 subs: aggregate / 1 sub %5.2fx, slowest / 1 sub "
		       "%5.2fx\n", RATE(PTD_D4) / RATE(PTD_D1),
		       slowest[PTD_D4] / RATE(PTD_D1));
	if (HAVE(PTD_D4_IPTID) && HAVE(PTD_D1_IPTID))
		printf("  4 subs ip,tid: aggregate / 1 sub %5.2fx, slowest / "
		       "1 sub %5.2fx\n",
		       RATE(PTD_D4_IPTID) / RATE(PTD_D1_IPTID),
		       slowest[PTD_D4_IPTID] / RATE(PTD_D1_IPTID));
	if (HAVE(PTD_D1_BIN_IPTID) && HAVE(PTD_D1_IPTID))
		printf("  via ptd, 1 sub ip,tid: binary / JSON         %5.2fx\n",
		       RATE(PTD_D1_BIN_IPTID) / RATE(PTD_D1_IPTID));
	if (HAVE(PTD_INSN_BIN_IPTID) && HAVE(PTD_INSN_IPTID))
		printf("  offline ip,tid to a pipe: binary / JSON      %5.2fx\n",
		       RATE(PTD_INSN_BIN_IPTID) / RATE(PTD_INSN_IPTID));
	if (HAVE(PTD_D16) && HAVE(PTD_D1))
		printf("  16 subs: aggregate / 1 sub %5.2fx, slowest / 1 sub "
		       "%5.2fx\n", RATE(PTD_D16) / RATE(PTD_D1),
		       slowest[PTD_D16] / RATE(PTD_D1));
	if (HAVE(PTD_D1_BIN_J2) && HAVE(PTD_D1_BIN_IPTID))
		printf("  via ptd, 1 sub ip,tid binary: jobs %u / no jobs "
		       "%5.2fx\n", arg_jobs,
		       RATE(PTD_D1_BIN_J2) / RATE(PTD_D1_BIN_IPTID));
	if (HAVE(PTD_D1_BIN_J2) && HAVE(BARE_INSN))
		printf("  via ptd, 1 sub ip,tid binary, jobs %u / bare "
		       "pt_insn_next %5.2fx\n", arg_jobs,
		       RATE(PTD_D1_BIN_J2) / RATE(BARE_INSN));
	if (HAVE(PTD_PAR2) || HAVE(PTD_PAR2_INSN) || HAVE(PTD_D1_BIN_J2) ||
	    HAVE(PTD_D4) || HAVE(PTD_D16)) {
		printf("  %u threads of plain arithmetic vs 1: %.2fx (the "
		       "cores %u threads got in this run; %ld online)\n",
		       arg_jobs, threads_cores(arg_jobs), arg_jobs,
		       sysconf(_SC_NPROCESSORS_ONLN));
	}
	ptd_stop();
	ptd_capture_fini(&c);
	return 0;
}
