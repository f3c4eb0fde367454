/* SPDX-License-Identifier: MIT */
/*
 * What the libFuzzer harnesses of tests/fuzz share (header-only):
 *
 *  - fuzz_fail(): report a broken invariant and abort, so libFuzzer saves
 *    the input as a crash.
 *  - fuzz_check_refusal(): a refused input must say why in its diag.
 *  - fuzz_sink: an input sink (input/input.h) that renders every record
 *    as its JSON line, as ptctl and the daemon do, and checks that the
 *    line fits and (for the first records of an input) parses as JSON.
 *  - fuzz_tmpdir(): one private temporary directory per process, removed
 *    at exit; fuzz_files_write() unpacks an input that holds several files
 *    (a capture, a bundle, an LLDB bundle) into a fresh directory there.
 *  - The fixed code the PT decoder harnesses decode against
 *    (fuzz_code_*), so that PT bytes reach instruction decoding, not only
 *    packet decoding.
 */
#ifndef PTD_TESTS_FUZZ_COMMON_H
#define PTD_TESTS_FUZZ_COMMON_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "input/input.h"
#include "record/jsonw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void fuzz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz invariant broken: %s%s%s\n", what,
		detail ? ": " : "", detail ? detail : "");
	abort();
}

/* A negative return other than -ENOMEM must come with a message. */
static inline void fuzz_check_refusal(int r, const struct ptd_diag *d,
				      const char *fn)
{
	if (r < 0 && r != -ENOMEM && (!d || d->msg[0] == '\0'))
		fuzz_fail(fn, "refused the input without a message");
}

/* No file may stay open after an input: every descriptor open now that
 * was not open after the first input and names a file (a path, a memfd)
 * is a leak.  Pipes are not files: the sanitizers' symbolizer keeps
 * some. */
#define FUZZ_FD_MAX 4096
static inline void fuzz_check_fds(void)
{
	static bool seen[FUZZ_FD_MAX], have_seen;
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char link[64], target[512];
		int fd = atoi(de->d_name);
		ssize_t n;

		if (de->d_name[0] == '.' || fd == dirfd(dir) || fd < 0 ||
		    fd >= FUZZ_FD_MAX)
			continue;
		if (!have_seen) {
			seen[fd] = true;
			continue;
		}
		if (seen[fd])
			continue;
		(void)snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		if (target[0] == '/')	/* a path, "/memfd:..." */
			fuzz_fail("a file was left open", target);
	}
	closedir(dir);
	have_seen = true;
}

/* ---- records ------------------------------------------------------------ */

/* JSON lines checked per input: enough to cover every record kind of a
 * small input, few enough that big inputs stay fast.  Records past
 * FUZZ_RENDER_MAX are only counted: a few trace bytes can stand for
 * millions of instructions (up to the decoder's loop guard), and
 * rendering each would make such inputs slow to mutate. */
#define FUZZ_JSON_CHECKS 256u
#define FUZZ_RENDER_MAX 65536u

struct fuzz_sink_ctx {
	size_t records;
	size_t checked;
	size_t notices;
	size_t threads;
	char line[PTD_JSON_MAX_RECORD];
};

static inline int fuzz_record(void *ctx, const struct ptd_record *r)
{
	struct fuzz_sink_ctx *c = ctx;
	size_t n;

	if (c->records++ >= FUZZ_RENDER_MAX)
		return 0;
	n = ptd_json_record(c->line, sizeof(c->line), r);
	if (n == 0 || n > sizeof(c->line) || c->line[n - 1] != '\n')
		fuzz_fail("ptd_json_record", "a record did not render");
	if (c->checked < FUZZ_JSON_CHECKS) {
		cJSON *j = cJSON_ParseWithLength(c->line, n - 1);

		c->checked++;
		if (!j) {
			fprintf(stderr, "line: %.*s\n", (int)n, c->line);
			fuzz_fail("ptd_json_record", "a record is not JSON");
		}
		cJSON_Delete(j);
	}
	return 0;
}

static inline int fuzz_info(void *ctx, const struct ptd_input_info *info)
{
	(void)ctx;
	if (!info || !info->source)
		fuzz_fail("input info", "no source named");
	return 0;
}

static inline void fuzz_thread_done(void *ctx, pid_t tid,
				    const struct ptd_decode_stats *st, int err,
				    const struct ptd_diag *diag)
{
	struct fuzz_sink_ctx *c = ctx;

	(void)tid;
	(void)st;
	c->threads++;
	fuzz_check_refusal(err, diag, "thread_done");
}

static inline void fuzz_notice(void *ctx, const struct ptd_diag *diag)
{
	struct fuzz_sink_ctx *c = ctx;

	c->notices++;
	if (!diag || !diag->msg[0])
		fuzz_fail("notice", "an empty notice");
}

static inline struct ptd_input_sink fuzz_sink(struct fuzz_sink_ctx *c)
{
	struct ptd_input_sink s;

	memset(c, 0, offsetof(struct fuzz_sink_ctx, line));
	memset(&s, 0, sizeof(s));
	s.info = fuzz_info;
	s.record = fuzz_record;
	s.thread_done = fuzz_thread_done;
	s.notice = fuzz_notice;
	s.ctx = c;
	return s;
}

/* With PTD_FUZZ_VERBOSE set (running seeds by hand): what an input gave. */
static inline void fuzz_report(const char *what, int r,
			       const struct ptd_diag *d,
			       const struct fuzz_sink_ctx *c)
{
	static int verbose = -1;

	if (verbose < 0)
		verbose = getenv("PTD_FUZZ_VERBOSE") != NULL;
	if (!verbose)
		return;
	fprintf(stderr, "%s: %d (%s): %zu threads, %zu records, %zu notices\n",
		what, r, r < 0 && d ? d->msg : "ok", c ? c->threads : 0,
		c ? c->records : 0, c ? c->notices : 0);
}

/* ---- a private temporary directory -------------------------------------- */

static char fuzz_tmp_[256];

static inline void fuzz_tmp_cleanup_(void)
{
	if (fuzz_tmp_[0])
		(void)ptd_rm_rf(fuzz_tmp_);
}

/* The process's temporary directory (under $TMPDIR, else /tmp), created on
 * first use and removed at exit. */
static inline const char *fuzz_tmpdir(void)
{
	const char *base;

	if (fuzz_tmp_[0])
		return fuzz_tmp_;
	base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	(void)snprintf(fuzz_tmp_, sizeof(fuzz_tmp_), "%s/ptd-fuzz-XXXXXX",
		       base);
	if (!mkdtemp(fuzz_tmp_)) {
		perror("mkdtemp");
		abort();
	}
	atexit(fuzz_tmp_cleanup_);
	return fuzz_tmp_;
}

/* Write @n bytes to @path (create or truncate); aborts on failure (the
 * harness's own files, not the input). */
static inline void fuzz_write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
		perror(path);
		abort();
	}
}

/* ---- inputs made of several files ---------------------------------------- */

/*
 * The input is a list of files, each introduced by a line
 *
 *	"@@@ NAME\n"
 *
 * and running to the next "\n@@@ " or the end (the newline before "@@@ "
 * is the separator, not part of the file).  NAME is a relative path of
 * [A-Za-z0-9._-] components separated by '/', without "." or ".."
 * components; at most FUZZ_FILES_MAX files.  Anything before the first
 * "@@@ " line, and entries with a bad name, are ignored, so every input is
 * some directory.  `gen-seeds --pack DIR FILE` (gen-seeds.c) writes this
 * form from a directory.
 */
#define FUZZ_FILES_MAX 32u
#define FUZZ_FILES_SEP "\n@@@ "

static inline bool fuzz_name_ok_(const char *name, size_t n)
{
	size_t comp = 0;

	if (n == 0 || n > 200 || name[0] == '/')
		return false;
	for (size_t i = 0; i <= n; i++) {
		char ch = i < n ? name[i] : '/';

		if (ch == '/') {
			if (comp == 0 || name[i - comp] == '.')
				return false;	/* "", ".", "..", ".x" */
			comp = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
		      ch == '-'))
			return false;
		comp++;
	}
	return true;
}

static inline const uint8_t *fuzz_find_(const uint8_t *p, const uint8_t *end,
					const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(end - p) < n)
		return NULL;
	return memmem(p, (size_t)(end - p), s, n);
}

/* Make every parent directory of @path below @dir; false if one of them
 * is a file already (the input named both "a" and "a/b"). */
static inline bool fuzz_mkparents_(const char *dir, char *path)
{
	for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		struct stat st;
		bool ok;

		*s = '\0';
		ok = mkdir(path, 0700) == 0 ||
		     (errno == EEXIST && lstat(path, &st) == 0 &&
		      S_ISDIR(st.st_mode));
		*s = '/';
		if (!ok)
			return false;
	}
	return true;
}

/* Unpack @data into a fresh directory "in" under fuzz_tmpdir() and return
 * its path (static storage); remove it with fuzz_files_remove(). */
static inline const char *fuzz_files_write(const uint8_t *data, size_t size)
{
	static char dir[300];
	const uint8_t *end = data + size, *p;
	unsigned nfiles = 0;

	(void)snprintf(dir, sizeof(dir), "%s/in", fuzz_tmpdir());
	(void)ptd_rm_rf(dir);
	if (mkdir(dir, 0700) < 0) {
		perror(dir);
		abort();
	}
	/* The first entry may start the input without a newline. */
	if (size >= 4 && !memcmp(data, "@@@ ", 4))
		p = data;
	else if ((p = fuzz_find_(data, end, FUZZ_FILES_SEP)))
		p++;
	while (p && nfiles < FUZZ_FILES_MAX) {
		const uint8_t *name = p + 4, *nl, *body, *sep;
		size_t nlen;
		char path[512];
		struct stat st;

		nl = memchr(name, '\n', (size_t)(end - name));
		if (!nl)
			break;
		body = nl + 1;
		/* From the name's newline: "@@@ a\n@@@ b\n" is an empty a. */
		sep = fuzz_find_(nl, end, FUZZ_FILES_SEP);
		p = sep ? sep + 1 : NULL;
		nlen = (size_t)(nl - name);
		if (!fuzz_name_ok_((const char *)name, nlen))
			continue;
		(void)snprintf(path, sizeof(path), "%s/%.*s", dir, (int)nlen,
			       (const char *)name);
		/* A name that is already a directory stays one. */
		if (!fuzz_mkparents_(dir, path) ||
		    (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)))
			continue;
		fuzz_write_file(path, body,
				sep > body ? (size_t)(sep - body) :
				sep ? 0 : (size_t)(end - body));
		nfiles++;
	}
	return dir;
}

static inline void fuzz_files_remove(const char *dir)
{
	(void)ptd_rm_rf(dir);
}

/* Decode the unpacked directory @dir with the reader @fn (named @what) on
 * both decoder paths: the block path as ptctl and the daemon decode by
 * default (insn and block records, JSON bodies), then the insn path.  Its
 * refusal must say why; its records must render. */
static inline void fuzz_decode_dir(ptd_input_decode_fn fn, const char *what,
				   const char *dir)
{
	for (int path = 0; path < 2; path++) {
		struct ptd_diag d = { "" };
		struct ptd_input_opts o;
		struct fuzz_sink_ctx sc;
		struct ptd_input_sink sink = fuzz_sink(&sc);
		int r;

		memset(&o, 0, sizeof(o));
		o.decode.path = path ? PTD_PATH_INSN : PTD_PATH_BLOCK;
		o.decode.want = PTD_REC_ALL;
		if (path)
			o.decode.want &= ~PTD_REC_BIT(PTD_REC_BLOCK);
		o.decode.json_bodies = !path;
		r = fn(dir, &o, &sink, NULL, &d);
		fuzz_check_refusal(r, &d, what);
		fuzz_report(what, r, &d, &sc);
	}
}

/* ---- a fixed image ----------------------------------------------------- */

/*
 * Code the PT harnesses decode against, at FUZZ_CODE_BASE (and the same
 * bytes are the "program" of the multi-file seeds).  The first 0x50 bytes
 * are those of the decoder's unit test (calls, conditional, direct,
 * indirect jumps, returns, a syscall); the rest is a spread of other
 * instruction classes (far branches, interrupts, ptwrite, string ops,
 * VEX/EVEX prefixes) so the block path's instruction cache meets them.
 */
#define FUZZ_CODE_BASE 0x400000ull

static const uint8_t fuzz_code[] = {
	/* 0x00 */ 0x48, 0x89, 0xe5,		/* mov %rsp,%rbp */
	/* 0x03 */ 0xe8, 0x08, 0x00, 0x00, 0x00,	/* call 0x10 */
	/* 0x08 */ 0x90,
	/* 0x09 */ 0x74, 0xf5,			/* je 0x00 */
	/* 0x0b */ 0xff, 0xe0,			/* jmp *%rax */
	/* 0x0d */ 0x90, 0x90, 0x90,
	/* 0x10 */ 0x90,
	/* 0x11 */ 0x31, 0xc0,			/* xor %eax,%eax */
	/* 0x13 */ 0xeb, 0x01,			/* jmp 0x16 */
	/* 0x15 */ 0x90,
	/* 0x16 */ 0xc3,				/* ret */
	/* 0x17 */ 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	/* 0x20 */ 0x90, 0x90,
	/* 0x22 */ 0x0f, 0x05,			/* syscall */
	/* 0x24 */ 0x90, 0x90, 0x90,
	/* 0x27 */ 0xff, 0xe0,			/* jmp *%rax */
	/* 0x29 */ 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	/* 0x30 */ 0x90, 0x90, 0x90,
	/* 0x33 */ 0xc3,				/* ret */
	/* 0x34 */ 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	/* 0x3d */ 0x90, 0x90, 0x90, 0x90, 0x90,
	/* 0x42 */ 0xff, 0xe0,			/* jmp *%rax */
	/* 0x44 */ 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	/* 0x4d */ 0x90, 0x90, 0x90,
	/* 0x50 */ 0xff, 0x15, 0x00, 0x00, 0x00, 0x00,	/* call *0(%rip) */
	/* 0x56 */ 0xff, 0xd0,			/* call *%rax */
	/* 0x58 */ 0x75, 0x02,			/* jne 0x5c */
	/* 0x5a */ 0xcd, 0x80,			/* int $0x80 */
	/* 0x5c */ 0xcc,				/* int3 */
	/* 0x5d */ 0x0f, 0x34,			/* sysenter */
	/* 0x5f */ 0x0f, 0x07,			/* sysret */
	/* 0x61 */ 0x48, 0xcf,			/* iretq */
	/* 0x63 */ 0xf3, 0x48, 0xa5,		/* rep movsq */
	/* 0x66 */ 0xf3, 0x0f, 0xae, 0xe0,	/* ptwrite %eax */
	/* 0x6a */ 0xc5, 0xfd, 0x6f, 0xc1,	/* vmovdqa %ymm1,%ymm0 */
	/* 0x6e */ 0x62, 0xf1, 0xfd, 0x48, 0x6f, 0xc1, /* vmovdqa64 zmm */
	/* 0x74 */ 0xe2, 0xfe,			/* loop 0x74 */
	/* 0x76 */ 0xe3, 0x02,			/* jrcxz 0x7a */
	/* 0x78 */ 0xff, 0x28,			/* ljmp *(%rax) */
	/* 0x7a */ 0xca, 0x08, 0x00,		/* lret $8 */
	/* 0x7d */ 0xc2, 0x10, 0x00,		/* ret $0x10 */
	/* 0x80 */ 0x0f, 0x01, 0xc1,		/* vmcall */
	/* 0x83 */ 0x0f, 0x01, 0xd5,		/* xend */
	/* 0x86 */ 0xc7, 0xf8, 0x01, 0x00, 0x00, 0x00, /* xbegin */
	/* 0x8c */ 0xf4,				/* hlt */
	/* 0x8d */ 0x0f, 0x0b,			/* ud2 */
	/* 0x8f */ 0xe9, 0x6c, 0xff, 0xff, 0xff,	/* jmp 0x00 */
};

#endif
