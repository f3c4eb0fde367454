/* SPDX-License-Identifier: MIT */
/*
 * Reading a perf.data file or pipe-mode stream (layouts: perfdata/format.h).
 *
 * The whole input is read into memory (a file or a pipe, at most
 * PTD_PERFDATA_PIPE_MAX bytes) and checked once, up front: every
 * section, attr, feature, record and AUXTRACE payload must lie inside the
 * input, every count is bounded (PTD_PERFDATA_MAX_*), and every kernel
 * record ptd uses (MMAP/MMAP2/COMM/FORK/EXIT/SWITCH/ITRACE_START/AUX/LOST)
 * is parsed with its event's sample_id layout (perf/sideband.h).  A refused
 * input is a negative return with "FILE: offset 0xN: what" in @diag:
 *   -PTD_EFORMAT       bad magic, header size, attr_size, a record size
 *                      below 8 (a kernel record's, or an AUXTRACE
 *                      payload's, not a multiple of 8), a malformed record or
 *                      feature, a sample id no attr owns, a section or
 *                      AUXTRACE index entry pointing outside the file;
 *   -PTD_ETRUNC        the input ends inside a header, section, record or
 *                      AUXTRACE payload;
 *   -PTD_ELIMIT        more attrs/ids/records/AUXTRACE/build-ids than the
 *                      limits, a pipe longer than PTD_PERFDATA_PIPE_MAX;
 *   -PTD_EUNSUPPORTED  a big-endian file, compressed records
 *                      (PERF_RECORD_COMPRESSED), attrs with sample_id
 *                      layouts that cannot be told apart (features perf 6.1
 *                      does not define are skipped and counted);
 *   -errno             open/read failures; -ENOMEM.
 *
 * File layout rule kept from perf: the data section starts 8-aligned.
 * Records are kept in input order (perf's FINISHED_ROUND reordering by time
 * is not applied: decode.h states the rule it uses instead).
 */
#ifndef PTD_PERFDATA_READ_H
#define PTD_PERFDATA_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <intel-pt.h>
#include <linux/perf_event.h>

#include "common/diag.h"
#include "perf/sideband.h"
#include "perf/time.h"
#include "perfdata/format.h"

#define PTD_PERFDATA_MAX_ATTRS 256u
#define PTD_PERFDATA_MAX_IDS (1u << 20)		/* all attrs together */
#define PTD_PERFDATA_MAX_RECORDS (1u << 24)
#define PTD_PERFDATA_MAX_AUXTRACE (1u << 20)
#define PTD_PERFDATA_MAX_BUILD_IDS 65536u
#define PTD_PERFDATA_PIPE_MAX (1ull << 32)

/* One event of the file: its attr (zero-extended from what the file holds)
 * and its sample ids. */
struct ptd_perfdata_evattr {
	struct perf_event_attr attr;
	uint64_t *ids;
	size_t nids;
};

/* One build-id (HEADER_BUILD_ID feature or PERF_RECORD_HEADER_BUILD_ID). */
struct ptd_perfdata_buildid {
	int32_t pid;
	uint8_t size;		/* bytes of id used (20 when not given) */
	uint8_t id[PTD_PERFDATA_BUILD_ID_MAX];
	const char *filename;	/* points into the input */
};

/* AUXTRACE_INFO, with the Intel PT words decoded (present: one was read). */
struct ptd_perfdata_ptinfo {
	bool present;
	uint32_t type;		/* PTD_PERFDATA_AUXTRACE_* */
	size_t npriv;		/* priv words the record held */
	uint64_t pmu_type;
	struct ptd_perf_clock clock;	/* time_shift/mult/zero */
	bool cap_user_time_zero;
	uint64_t tsc_bit, noretcomp_bit, mtc_bit, mtc_freq_bits, cyc_bit;
	bool have_sched_switch, snapshot_mode, per_cpu_mmaps;
	uint64_t tsc_ctc_n, tsc_ctc_d, max_nonturbo_ratio;
	const char *filter;	/* NUL-terminated in the input, or NULL */
};

/* One PERF_RECORD_AUXTRACE. */
struct ptd_perfdata_auxtrace_rec {
	uint64_t rec_offset;	/* of the record in the input */
	const uint8_t *data;	/* its @size trace bytes, in the input */
	uint64_t size, offset, reference;
	uint32_t idx, tid, cpu;	/* tid/cpu (u32)-1: none */
};

/* One record of the data section (or stream), in input order. */
struct ptd_perfdata_rec {
	uint64_t offset;	/* in the input */
	uint32_t type;		/* header.type */
	/* The record, hdr->size bytes.  Kernel records are 8-aligned in
	 * memory (copied if the input had them elsewhere); perf's own records
	 * (type >= 64) may not be: read them with memcpy. */
	const struct perf_event_header *hdr;
	uint32_t aux;		/* AUXTRACE: index in auxtrace[], else -1 */
	int attr;		/* kernel record: attr index of its sample_id
				 * layout, -1 if none applies */
};

struct ptd_perfdata {
	char *name;		/* the path as given ("-": stdin) */
	bool pipe;		/* pipe-mode layout */
	const uint8_t *data;	/* the whole input */
	size_t size;

	struct ptd_perfdata_evattr *attrs;
	size_t nattrs;
	uint64_t features[PTD_PERFDATA_FEAT_BITS / 64];

	const char *osrelease;	/* OSRELEASE feature (uname -r of the
				 * recording machine), or NULL */
	bool have_cpu;		/* CPUID feature naming an Intel CPU */
	struct pt_cpu cpu;
	bool have_nrcpus;
	struct ptd_perfdata_nrcpus nrcpus;
	bool have_clock_data;
	struct ptd_perfdata_clock_data clock_data;
	bool have_time_conv;
	struct ptd_perf_clock time_conv;
	struct ptd_perfdata_auxtrace_index_entry *index;	/* AUXTRACE
								 * feature */
	size_t nindex;
	struct ptd_perfdata_buildid *buildids;
	size_t nbuildids;
	struct ptd_perfdata_ptinfo pt;

	struct ptd_perfdata_rec *recs;
	size_t nrecs;
	struct ptd_perfdata_auxtrace_rec *auxtrace;
	size_t nauxtrace;
	/* counts of what was read but not used */
	uint64_t samples, other_records, lost_records;
	uint64_t unknown_features;	/* feature ids past perf 6.1's, skipped */

	/* private */
	uint8_t *buf_;
	uint8_t *shadow_;
};

/* Read @path: a file (either layout; read into memory, never mapped, so
 * that a writer truncating it cannot fault the reader; at most
 * PTD_PERFDATA_PIPE_MAX bytes) or, for "-" (stdin) or a
 * FIFO, a pipe-mode stream read to its end.  Returns 0 and *ret (free with
 * ptd_perfdata_free), or a negative error as listed above. */
int ptd_perfdata_open(const char *path, struct ptd_perfdata **ret,
		      struct ptd_diag *diag);

/* The same for a regular file only (a daemon reading a client's file):
 * anything else -- a FIFO, a device, "-" -- is refused before it could
 * block (ptd_file_open_regular: -PTD_ENOTREG, -EISDIR, naming @path). */
int ptd_perfdata_open_file(const char *path, struct ptd_perfdata **ret,
			   struct ptd_diag *diag);

/* Read a stream from @fd to its end (at most PTD_PERFDATA_PIPE_MAX bytes)
 * and parse it; @name names it in messages.  @fd stays open. */
int ptd_perfdata_read_fd(int fd, const char *name, struct ptd_perfdata **ret,
			 struct ptd_diag *diag);

/* Parse @len bytes at @data (either layout); the bytes are copied.
 * @name names the input in messages. */
int ptd_perfdata_parse(const void *data, size_t len, const char *name,
		       struct ptd_perfdata **ret, struct ptd_diag *diag);

/* NULL is fine. */
void ptd_perfdata_free(struct ptd_perfdata *pd);

/* Parse kernel record @i with its event's sample_id layout.  Returns 0,
 * -EINVAL (NULL, @i out of range, not a kernel record), or -PTD_EFORMAT
 * with "FILE: offset 0xN: ..." in @diag (cannot happen for records the
 * reader accepted). */
int ptd_perfdata_event(const struct ptd_perfdata *pd, size_t i,
		       struct ptd_perf_event *ret, struct ptd_diag *diag);

/* The build-id the input gives for @filename (HEADER_BUILD_ID entries), or
 * NULL. */
const struct ptd_perfdata_buildid *
ptd_perfdata_find_buildid(const struct ptd_perfdata *pd, const char *filename);

/* "GenuineIntel,6,85,4" -> @ret.  Returns 0, -PTD_EFORMAT (not of that
 * form), -PTD_EUNSUPPORTED (another vendor). */
int ptd_perfdata_parse_cpuid(const char *s, struct pt_cpu *ret);

#endif
