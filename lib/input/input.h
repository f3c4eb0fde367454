/* SPDX-License-Identifier: MIT */
/*
 * Saved traces of every kind, decoded through one interface.
 *
 * An input is a path: a software-source capture directory (capture.json),
 * a ptd bundle (a directory with ptd-bundle.json), a perf.data file (or
 * pipe-mode stream: "-" is stdin; or the directory `perf record --kcore`
 * writes, its perf.data in "data" and a copy of the kernel's code in
 * "kcore_dir/kcore"), or an LLDB trace bundle (a directory with
 * trace.json, or the trace.json itself).  Each kind's reader has a
 * decode function of the one shape ptd_input_decode_fn; ptd_input_decode
 * detects the kind and calls it, so `ptctl decode` and the daemon's
 * `replay` treat all of them alike.
 *
 * A decode delivers, per thread, the thread's records in trace order
 * (threads one after another, in the order the input lists them), then
 * returns.  Errors inside a trace are error records; a refused input
 * (missing, truncated, tampered, of another format) is a negative return
 * with a message naming the file and what was wrong in @diag.  Everything
 * read is untrusted.
 */
#ifndef PTD_INPUT_INPUT_H
#define PTD_INPUT_INPUT_H

#include <stdbool.h>
#include <sys/types.h>

#include "aspace/iscache.h"
#include "common/cancel.h"
#include "common/diag.h"
#include "decode/decoder.h"

struct ptd_capture;

enum ptd_input_kind {
	PTD_INPUT_NONE = 0,
	PTD_INPUT_CAPTURE,	/* software-source capture directory */
	PTD_INPUT_BUNDLE,	/* ptd bundle (checked) */
	PTD_INPUT_PERFDATA,	/* perf.data, file or pipe mode */
	PTD_INPUT_LLDB,		/* LLDB trace bundle */
};

struct ptd_input_opts {
	/* How to decode.  decode.cpu: used when cpu_given, else the input's
	 * own CPU (if it names one). */
	struct ptd_decode_opts decode;
	bool cpu_given;
	/* Only this thread (have_tid). */
	bool have_tid;
	pid_t tid;
	/* Where the traced files are: looked up under @sysroot first (the
	 * traced path appended), then by build-id in @buildid_dir (NULL:
	 * $HOME/.debug, then /usr/lib/debug/.build-id), then as they are.
	 * Readers whose inputs carry their files (bundles) ignore these. */
	const char *sysroot;
	const char *buildid_dir;
	/* The kernel's code, for traces of kernel code (perf.data): a kcore
	 * copy or a vmlinux (any ELF whose program headers place the code at
	 * its addresses).  NULL: the perf.data directory's kcore_dir/kcore,
	 * then by build-id, then the usual vmlinux places (perfdata/decode.h).
	 * Readers of inputs without kernel code ignore it. */
	const char *kernel;
	/* Asked during long reads before the first record (a bundle's
	 * verification): the decode then returns -ECANCELED.  Zeroed: never.
	 * Once records flow, the sink's non-zero return stops a decode. */
	struct ptd_cancel cancel;
	/* A perf.data named as a FIFO, a device or "-" (stdin) is read as a
	 * pipe-mode stream: for a tool the user runs.  False (a daemon
	 * reading for a client): every file must be a regular file, refused
	 * by name before it could block (common/fileio.h). */
	bool streams;
};

/* What an input says about itself before its records (for the stream's
 * hello).  Filled by the decode function through @info_fn before the first
 * record; strings live until the decode returns. */
struct ptd_input_info {
	enum ptd_input_kind kind;
	const char *source;	/* "swpt-capture", "ptd-bundle", "perf.data",
				 * "lldb-bundle" */
	long pid;		/* the traced process, 0 if unknown/several */
	size_t nthreads;	/* threads that will be decoded */
};

struct ptd_input_sink {
	/* Called once, before any record (may be NULL).  Non-zero stops. */
	int (*info)(void *ctx, const struct ptd_input_info *info);
	/* Each record. */
	ptd_record_fn record;
	/* Called after each thread's records with that thread's statistics
	 * (may be NULL); @err is 0 or the negative error that ended the
	 * thread early (its message in @diag: the decode goes on with the
	 * next thread). */
	void (*thread_done)(void *ctx, pid_t tid,
			    const struct ptd_decode_stats *st, int err,
			    const struct ptd_diag *diag);
	void *ctx;
	/* Something about the input as a whole that no record shows (trace
	 * bytes no thread could be given, ...), in @diag (may be NULL). */
	void (*notice)(void *ctx, const struct ptd_diag *diag);
};

/* Every reader's decode function.  Returns 0 when every selected thread was
 * decoded (some may have ended early: see thread_done; *@ret_thread_errors
 * counts them), the sink's non-zero value if it stopped the decode, or a
 * negative error if the input was refused (nothing, or only the threads
 * before the problem, was delivered), with the message in @diag.  A
 * have_tid for a thread the input does not have is -ENOENT naming it. */
typedef int (*ptd_input_decode_fn)(const char *path,
				   const struct ptd_input_opts *o,
				   const struct ptd_input_sink *sink,
				   size_t *ret_thread_errors,
				   struct ptd_diag *diag);

/* Which kind @path is, by its content (never its name): -ENOENT if it does
 * not exist, -PTD_EFORMAT naming the path if it is no kind ptd reads. */
int ptd_input_detect(const char *path, enum ptd_input_kind *ret,
		     struct ptd_diag *diag);

/* The kind's name in messages and hello records ("perf.data"...). */
const char *ptd_input_kind_name(enum ptd_input_kind k);

/* Detect and decode. */
int ptd_input_decode(const char *path, const struct ptd_input_opts *o,
		     const struct ptd_input_sink *sink,
		     size_t *ret_thread_errors, struct ptd_diag *diag);

/* The software-source capture reader, in this interface. */
int ptd_capture_decode(const char *path, const struct ptd_input_opts *o,
		       const struct ptd_input_sink *sink,
		       size_t *ret_thread_errors, struct ptd_diag *diag);

/* The capture reader's decode of a capture @c the caller has loaded (and
 * still owns), for readers that wrap a capture (bundles): traced paths are
 * resolved through @resolve with @resolve_ctx (NULL: opened as they are),
 * and the hello names @kind and @source.  Returns as ptd_input_decode_fn
 * (-ENOENT naming @origin for a have_tid the capture does not have). */
int ptd_capture_decode_loaded(const struct ptd_capture *c, const char *origin,
			      enum ptd_input_kind kind, const char *source,
			      ptd_iscache_resolve_fn resolve, void *resolve_ctx,
			      const struct ptd_input_opts *o,
			      const struct ptd_input_sink *sink,
			      size_t *ret_thread_errors,
			      struct ptd_diag *diag);

#endif
