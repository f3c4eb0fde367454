/* SPDX-License-Identifier: MIT */
/*
 * A capture of the software PT source on disk: one directory holding
 *
 *   capture.json    manifest (below)
 *   pt-TID.bin      raw PT of thread TID
 *   truth-TID.bin   ground truth: every IP thread TID executed, in order,
 *                   as zigzag-varint deltas from the previous IP (first
 *                   from 0) -- about 2 bytes an instruction
 *   pt-TID.N.bin,   the same for the Nth thread (N >= 2) the kernel gave
 *   truth-TID.N.bin id TID in one capture (ids are reused once freed)
 *   timeline.jsonl  memory-map timeline (aspace/timeline.h)
 *   snap-SEQ.bin    bytes of non-file code (vDSO, anonymous) as first
 *                   executed
 *
 * capture.json:
 *   {"format":"ptd-swpt-capture","version":1,"pid":123,
 *    "argv":["/bin/ls","/usr"],
 *    "cpu":{"vendor":"intel","family":6,"model":85,"stepping":4},
 *    "config":{"psb_period":4096,"noretcomp":false,"tsc":false},
 *    "threads":[{"tid":123,"first_seq":0,"end_seq":4,"pt":"pt-123.bin",
 *                "truth":"truth-123.bin","insns":117000,"pt_bytes":31337}],
 *    "exit":{"code":0}}            or {"signal":9}, or {"detached":true}
 *
 * end_seq (optional; captures before it have none): timeline events from
 * this seq on came after the thread's stream ended.  A tid may be listed
 * more than once -- a thread id the kernel gave again after the first
 * thread was gone -- only in order of their lives, each earlier one with
 * an end_seq no later than the next one's first_seq.  No file is named
 * twice.
 *
 * Optional (still version 1): the address filter the trace was made with,
 * resolved to addresses (what a decoder's pt_config.addr_filter needs),
 * and the text it was given as:
 *    "filter":{"text":"filter 0x1130/0x40@/usr/bin/prog",
 *              "ranges":[{"action":"filter","a":4198704,"b":4198767}]}
 * ranges: 1 to 4, action "filter" or "tracestop", a <= b (inclusive) below
 * 2^53; text may be absent.  Ranges are saved in slot order, unused slots
 * left out, and loaded into slots 0, 1, ...
 *
 * Optional (still version 1): the clock the source published to its
 * readers (TSC -> perf time, CLOCK_MONOTONIC ns; perf/time.h) and the
 * wall-clock reference the session paired with it, so that a decode of the
 * capture gives records the live stream's "time" and "wall":
 *    "clock":{"time_zero":"0x1a2b...","time_mult":1234567,"time_shift":31},
 *    "wallref":{"perf_ns":"0x...","wall_ns":"0x..."}
 * (64-bit values as hex strings; time_mult > 0, time_shift < 32; wallref
 * only with a clock).
 *
 * Everything read from a capture is untrusted: names must be plain file
 * names inside the directory, sizes are bounded, and a mismatch (a truth file
 * that does not hold "insns" IPs, a PT file of another size) is refused with
 * a message naming the file.
 */
#ifndef PTD_SWPT_CAPTURE_H
#define PTD_SWPT_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <intel-pt.h>

#include "aspace/timeline.h"
#include "common/diag.h"
#include "perf/time.h"
#include "swpt/ptgen.h"

#define PTD_CAPTURE_FORMAT "ptd-swpt-capture"
#define PTD_CAPTURE_VERSION 1
#define PTD_CAPTURE_MAX_THREADS 4096u
#define PTD_CAPTURE_MAX_MANIFEST (16u << 20)
#define PTD_CAPTURE_MAX_PT (4ull << 30)

struct ptd_capture_thread {
	pid_t tid;
	uint64_t first_seq;	/* timeline events with seq < this were in
				 * effect when the thread started */
	char *pt;		/* file names, relative to dir */
	char *truth;
	uint64_t insns;		/* IPs in the truth file */
	uint64_t pt_bytes;
	bool has_end;		/* end_seq known (a capture before it: not) */
	uint64_t end_seq;	/* events from this seq on came after the
				 * thread's stream ended */
};

struct ptd_capture {
	char *dir;
	pid_t pid;
	char **argv;		/* NULL-terminated */
	struct pt_cpu cpu;
	struct ptd_ptgen_config config;	/* sink unused */
	/* Address filter (all zero: none) and its text (NULL: none). */
	struct pt_conf_addr_filter addr_filter;
	char *filter;
	/* The perf clock and wall-clock reference (see above). */
	bool has_clock;
	struct ptd_perf_clock clock;
	bool has_wallref;
	struct ptd_perf_wallref wallref;
	struct ptd_capture_thread *threads;
	size_t nthreads;
	struct ptd_timeline tl;
	/* how the target ended */
	bool exited;
	int exit_code;
	int exit_signal;	/* 0 if none */
	bool detached;
};

void ptd_capture_fini(struct ptd_capture *c);

/* Load and check the manifest and timeline of the capture in @dir.
 * Returns 0, or -PTD_EFORMAT/-PTD_EVERSION/-PTD_ELIMIT/-errno with a message
 * naming the file and field in @diag. */
int ptd_capture_load(const char *dir, struct ptd_capture *ret,
		     struct ptd_diag *diag);

/* Write capture.json and timeline.jsonl (atomically) from @c. */
int ptd_capture_save(const struct ptd_capture *c, struct ptd_diag *diag);

/* Read thread @idx's PT (malloc'd).  Checks the size against the manifest:
 * -PTD_ECHECKSUM (naming the file) if the file changed since loading. */
int ptd_capture_read_pt(const struct ptd_capture *c, size_t idx,
			uint8_t **ret_data, size_t *ret_len,
			struct ptd_diag *diag);

/* Open thread @idx's PT file for reading pieces of it (pread) into
 * *@ret_fd, checked as ptd_capture_read_pt checks it (its size the
 * manifest's pt_bytes), without reading it whole.  Returns 0 or what
 * ptd_capture_read_pt returns. */
int ptd_capture_open_pt(const struct ptd_capture *c, size_t idx, int *ret_fd,
			struct ptd_diag *diag);

/* Read thread @idx's ground truth into a malloc'd array of *ret_n IPs.
 * Checks the count against the manifest: -PTD_ECHECKSUM if it differs,
 * -PTD_EFORMAT for a bad varint (with its byte offset). */
int ptd_capture_read_truth(const struct ptd_capture *c, size_t idx,
			   uint64_t **ret_ips, size_t *ret_n,
			   struct ptd_diag *diag);

/* Index of the first thread @tid (a tid reused in the capture: the earliest
 * of its threads), or -1. */
ssize_t ptd_capture_find_thread(const struct ptd_capture *c, pid_t tid);

/* Ground-truth writer: buffered, zigzag-varint deltas. */
struct ptd_truth_writer {
	FILE *f;
	uint64_t last;
	uint64_t count;
};
int ptd_truth_writer_open(struct ptd_truth_writer *w, const char *path);
int ptd_truth_writer_add(struct ptd_truth_writer *w, uint64_t ip);
int ptd_truth_writer_close(struct ptd_truth_writer *w);

/* Decode a truth file's bytes.  Returns 0 or -PTD_EFORMAT (a varint runs
 * past the end or over 10 bytes) with the byte offset in @diag. */
int ptd_truth_decode(const uint8_t *data, size_t len, const char *origin,
		     uint64_t **ret_ips, size_t *ret_n, struct ptd_diag *diag);

#endif
