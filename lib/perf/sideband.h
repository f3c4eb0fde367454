/* SPDX-License-Identifier: MIT */
/*
 * perf sideband: the records of a perf DATA ring (or of a perf.data file)
 * that say what a traced process did besides executing instructions:
 * mmap, comm/exec, fork, exit, context switches, AUX and loss records.
 *
 *  - A strict parser for the kernel records ptd uses (untrusted bytes).
 *  - Two ptd-private records that only ptd's software PT source writes
 *    (PTD_PERF_RECORD_CODE, PTD_PERF_RECORD_UNMAP), and encoders for them
 *    and for the kernel records the software source synthesizes, byte for
 *    byte as the kernel writes them.
 *  - The step from a record to a change of the image model (timeline.h).
 *  - Opening the real dummy software event perf uses for sideband.
 *
 * All records are in host byte order, as the kernel writes them.
 */
#ifndef PTD_PERF_SIDEBAND_H
#define PTD_PERF_SIDEBAND_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/timeline.h"
#include "common/diag.h"

/*
 * ptd-private record types.  The kernel numbers its records from 1 up
 * (PERF_RECORD_MAX is about 21) and perf's own user records start at 64
 * (PERF_RECORD_USER_TYPE_START) and stay below 128; 0x7074 ("pt") and
 * 0x7075 are far from both, so a ptd record is never mistaken for either.
 *
 * PTD_PERF_RECORD_CODE: bytes of non-file code (vDSO, anonymous/JIT, a
 * deleted file) as they were when first executed.  A mapping larger than
 * one record (header.size is 16 bits) is split into chunks, each naming
 * where it goes:
 *	struct perf_event_header header;	misc 0
 *	u32 pid, tid;
 *	u64 vaddr;		start of the mapping
 *	u64 len;		total length of the mapping (all chunks)
 *	u64 offset;		offset of this chunk from vaddr
 *	u32 size;		bytes in this chunk (> 0, offset+size <= len)
 *	u32 name_size;		bytes of name[], a multiple of 8 (> 0)
 *	char name[name_size];	NUL-terminated, zero padded ("[vdso]")
 *	u8 bytes[size];		zero padded to a multiple of 8
 *	struct sample_id sample_id;	as for kernel records
 *
 * PTD_PERF_RECORD_UNMAP: [start, end) is no longer executable code
 * (munmap, or mprotect removing PROT_EXEC; the kernel has no record):
 *	struct perf_event_header header;	misc 0
 *	u32 pid, tid;
 *	u64 start, end;		start < end
 *	struct sample_id sample_id;
 */
#define PTD_PERF_RECORD_CODE 0x7074u
#define PTD_PERF_RECORD_UNMAP 0x7075u

/* The largest record: header.size is a u16. */
#define PTD_PERF_RECORD_MAX_SIZE 0xfff8u

/* Which sample_id fields a record carried (ptd_perf_sample_id.mask). */
#define PTD_PERF_SID_TID	 0x01u
#define PTD_PERF_SID_TIME	 0x02u
#define PTD_PERF_SID_ID		 0x04u
#define PTD_PERF_SID_STREAM_ID	 0x08u
#define PTD_PERF_SID_CPU	 0x10u
#define PTD_PERF_SID_IDENTIFIER	 0x20u

/* The sample_type bits that shape the sample_id trailer. */
#define PTD_PERF_SID_SAMPLE_TYPES                                              \
	(PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |                 \
	 PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)

/* The sample_id trailer of a non-sample record (attr.sample_id_all). */
struct ptd_perf_sample_id {
	uint32_t mask;		/* PTD_PERF_SID_*: fields present */
	uint32_t pid, tid;
	uint64_t time;
	uint64_t id;		/* PERF_SAMPLE_ID */
	uint64_t stream_id;
	uint32_t cpu;
	uint64_t identifier;	/* PERF_SAMPLE_IDENTIFIER */
};

/* PERF_RECORD_MMAP and PERF_RECORD_MMAP2. */
struct ptd_perf_mmap {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	/* MMAP2 only (zero for MMAP): */
	bool has_build_id;	/* misc & PERF_RECORD_MISC_MMAP_BUILD_ID:
				 * build_id is valid, maj..ino_generation 0 */
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint8_t build_id_size;	/* <= 20 */
	uint8_t build_id[20];
	uint32_t prot, flags;	/* PROT_*, MAP_* */
	/* For MMAP (no prot): executable unless misc has
	 * PERF_RECORD_MISC_MMAP_DATA.  Set for both forms. */
	bool exec;
	/* NUL-terminated; points into the record (see ptd_perf_event). */
	const char *filename;
};

/* PERF_RECORD_COMM. */
struct ptd_perf_comm {
	uint32_t pid, tid;
	bool exec;		/* misc & PERF_RECORD_MISC_COMM_EXEC */
	const char *comm;	/* points into the record */
};

/* PERF_RECORD_FORK and PERF_RECORD_EXIT. */
struct ptd_perf_task {
	uint32_t pid, ppid;
	uint32_t tid, ptid;
	uint64_t time;
};

/* PERF_RECORD_SWITCH and PERF_RECORD_SWITCH_CPU_WIDE. */
struct ptd_perf_switch {
	bool out;		/* misc & PERF_RECORD_MISC_SWITCH_OUT */
	bool preempt;		/* misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT */
	bool cpu_wide;		/* SWITCH_CPU_WIDE: next_prev_* are valid */
	uint32_t next_prev_pid, next_prev_tid;
};

/* PERF_RECORD_ITRACE_START. */
struct ptd_perf_itrace_start {
	uint32_t pid, tid;
};

/* PERF_RECORD_AUX. */
struct ptd_perf_aux {
	uint64_t aux_offset, aux_size;
	uint64_t flags;		/* PERF_AUX_FLAG_* */
};

/* PERF_RECORD_LOST (id, lost) and PERF_RECORD_LOST_SAMPLES (lost). */
struct ptd_perf_lost {
	uint64_t id;		/* 0 for LOST_SAMPLES */
	uint64_t lost;
};

/* PTD_PERF_RECORD_CODE. */
struct ptd_perf_code {
	uint32_t pid, tid;
	uint64_t vaddr, len, offset;
	uint32_t size;
	const char *name;	/* points into the record */
	const uint8_t *bytes;	/* @size bytes, point into the record */
};

/* PERF_RECORD_TEXT_POKE: the kernel changed its own code at @addr
 * (ftrace, static keys, BPF trampolines) from @old_len bytes to @new_len
 * bytes. */
struct ptd_perf_text_poke {
	uint64_t addr;
	uint16_t old_len, new_len;
	const uint8_t *old_bytes;	/* point into the record */
	const uint8_t *new_bytes;
};

/* PTD_PERF_RECORD_UNMAP. */
struct ptd_perf_unmap {
	uint32_t pid, tid;
	uint64_t start, end;
};

/*
 * One parsed record.  The pointers in it (filename, comm, name, bytes) point
 * into the record buffer that was parsed: they are valid as long as that
 * buffer is, and must not be freed.
 */
struct ptd_perf_event {
	uint32_t type;		/* PERF_RECORD_* or PTD_PERF_RECORD_* */
	uint16_t misc;
	uint16_t size;		/* header.size */
	/* Any type this parser does not know: only type/misc/size are set
	 * (and no sample_id: its place in an unknown record is not known). */
	bool other;
	union {
		struct ptd_perf_mmap mmap;		/* MMAP, MMAP2 */
		struct ptd_perf_comm comm;
		struct ptd_perf_task task;		/* FORK, EXIT */
		struct ptd_perf_switch sw;		/* SWITCH(_CPU_WIDE) */
		struct ptd_perf_itrace_start itrace;
		struct ptd_perf_aux aux;
		struct ptd_perf_lost lost;		/* LOST(_SAMPLES) */
		struct ptd_perf_code code;
		struct ptd_perf_unmap unmap;
		struct ptd_perf_text_poke poke;
	} u;
	struct ptd_perf_sample_id sid;
};

/* Size in bytes of the sample_id trailer for @sample_type (0 if no
 * trailer bit is set). */
size_t ptd_perf_sample_id_size(uint64_t sample_type);

/* Name of a record type for messages ("MMAP2", "ptd CODE"); "unknown" for
 * a type this module does not parse.  Never NULL. */
const char *ptd_perf_record_name(uint32_t type);

/*
 * Parse the record at @hdr, which must be readable for hdr->size bytes
 * (the ring reader copies each record contiguous).  @sample_type and
 * @sample_id_all are those of the event that wrote it: with
 * @sample_id_all the record ends with a sample_id trailer laid out by the
 * PTD_PERF_SID_SAMPLE_TYPES bits of @sample_type in the kernel's order
 * (TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER).
 * Types other than those documented above are returned with ->other set:
 * not an error.  Every field must lie inside hdr->size (and before the
 * trailer), every string must be NUL-terminated inside its space.
 * Returns 0 and fills *ret.
 * Returns -EINVAL if @hdr or @ret is NULL.
 * Returns -PTD_EFORMAT with "perf record TYPE (type N, S bytes): what" in
 * @diag for a record too short for its fields or its trailer, a header size
 * below 8, an unterminated string, a bad ptd CODE/UNMAP layout or range.
 */
int ptd_perf_event_parse(const struct perf_event_header *hdr,
			 uint64_t sample_type, bool sample_id_all,
			 struct ptd_perf_event *ret, struct ptd_diag *diag);

/*
 * Encoders.  Each writes one record into @buf (@cap bytes) exactly as the
 * kernel writes it (misc, field order, strings NUL-padded to 8 bytes with
 * zeros) and, for the PTD_PERF_SID_SAMPLE_TYPES bits of @sample_type, the
 * sample_id trailer from @sid (NULL: all zero; the mask is not consulted).
 * Pass sample_type 0 for an event without sample_id_all.
 * Return the record size, or 0 if it does not fit in @cap or in a u16 size
 * (or an argument is NULL / out of range as noted).
 */

/* MMAP2; misc = PERF_RECORD_MISC_USER, | MMAP_DATA without PROT_EXEC in
 * m->prot, | MMAP_BUILD_ID with m->has_build_id (then the build_id form is
 * written, build_id_size <= 20, else 0).  m->exec is ignored. */
size_t ptd_perf_encode_mmap2(void *buf, size_t cap,
			     const struct ptd_perf_mmap *m,
			     uint64_t sample_type,
			     const struct ptd_perf_sample_id *sid);
/* COMM; misc COMM_EXEC if c->exec.  As the kernel (TASK_COMM_LEN 16), the
 * name is cut to 15 bytes. */
size_t ptd_perf_encode_comm(void *buf, size_t cap,
			    const struct ptd_perf_comm *c,
			    uint64_t sample_type,
			    const struct ptd_perf_sample_id *sid);
/* FORK (@exit false) or EXIT (@exit true); misc 0. */
size_t ptd_perf_encode_task(void *buf, size_t cap, bool exit,
			    const struct ptd_perf_task *t,
			    uint64_t sample_type,
			    const struct ptd_perf_sample_id *sid);
/* ITRACE_START; misc 0. */
size_t ptd_perf_encode_itrace_start(void *buf, size_t cap,
				    const struct ptd_perf_itrace_start *it,
				    uint64_t sample_type,
				    const struct ptd_perf_sample_id *sid);
/* SWITCH (sw->cpu_wide false) or SWITCH_CPU_WIDE (true: next_prev_pid/tid
 * are written); misc = PERF_RECORD_MISC_SWITCH_OUT if sw->out, with
 * PERF_RECORD_MISC_SWITCH_OUT_PREEMPT too if sw->preempt. */
size_t ptd_perf_encode_switch(void *buf, size_t cap,
			      const struct ptd_perf_switch *sw,
			      uint64_t sample_type,
			      const struct ptd_perf_sample_id *sid);
/* PTD CODE for one chunk: c->size bytes from c->bytes; 0 if c->size is 0,
 * c->offset + c->size > c->len, or a name/bytes pointer is NULL. */
size_t ptd_perf_encode_code(void *buf, size_t cap,
			    const struct ptd_perf_code *c,
			    uint64_t sample_type,
			    const struct ptd_perf_sample_id *sid);
/* The largest chunk size for which one CODE record named @name still fits
 * in PTD_PERF_RECORD_MAX_SIZE with that trailer (a multiple of 8). */
uint32_t ptd_perf_code_chunk_max(const char *name, uint64_t sample_type);
/* PTD UNMAP; 0 if u->start >= u->end. */
size_t ptd_perf_encode_unmap(void *buf, size_t cap,
			     const struct ptd_perf_unmap *u,
			     uint64_t sample_type,
			     const struct ptd_perf_sample_id *sid);

/* ptd_perf_event_to_tl() returns this when the record maps executable code
 * that is not a file (see there). */
#define PTD_PERF_TL_NONFILE 2

/*
 * The change of the image model a record means, as a timeline event with
 * seq 0 and no positions (the caller places it).
 *  - MMAP/MMAP2 of executable file code -> PTD_TL_MAP (start, end, pgoff,
 *    path); returns 1.
 *  - MMAP/MMAP2 of executable code that is not a file ("[vdso]", "//anon",
 *    "[heap]", any "[...]", a "... (deleted)" file, "/memfd:...", a name
 *    that is not an absolute path) -> op PTD_TL_SNAPSHOT with start, end
 *    and name set, file NULL; returns PTD_PERF_TL_NONFILE.  The caller
 *    must get the bytes another way (ptd CODE records, the live process)
 *    and set file before applying it; with no bytes, apply an UNMAP of the
 *    range so stale code is not decoded.
 *  - COMM with COMM_EXEC -> PTD_TL_EXEC with path set to the new comm (the
 *    kernel record carries only the task name: the MMAP2 of the program
 *    follows it); returns 1.
 *  - PTD UNMAP -> PTD_TL_UNMAP; returns 1.
 *  - Anything else, and non-executable mappings: returns 0, *ret untouched.
 * The strings in *ret point into the record @e was parsed from (const cast
 * away for the struct's sake: never modify or free them);
 * ptd_timeline_add() copies them.
 * Returns -EINVAL if @e or @ret is NULL, -PTD_EFORMAT (message in @diag)
 * if a mapping's addr + len overflows or len is 0.
 */
int ptd_perf_event_to_tl(const struct ptd_perf_event *e,
			 struct ptd_tl_event *ret, struct ptd_diag *diag);

/* The data ring wakes its reader once this many bytes are ready. */
#define PTD_SIDEBAND_WAKEUP_BYTES 4096u

/*
 * Fill @ret with the attributes of the dummy software event for sideband:
 * PERF_TYPE_SOFTWARE/PERF_COUNT_SW_DUMMY, mmap, mmap2, comm, comm_exec,
 * task, context_switch, sample_id_all with sample_type
 * TID|TIME|CPU|IDENTIFIER, exclude_kernel, exclude_hv, disabled (enable it
 * after mapping its ring), watermark with PTD_SIDEBAND_WAKEUP_BYTES.
 * @cpu_wide: the event will be opened per CPU (cpu >= 0), where the kernel
 * lets a ring be mapped for an inherited event, so inherit is set (it
 * follows threads and children created later); false: a per-thread event
 * (cpu == -1), inherit 0.
 * Returns 0, or -EINVAL if @ret is NULL.
 */
int ptd_sideband_attr(struct perf_event_attr *ret, bool cpu_wide);

/* The sample_type ptd_sideband_attr() sets, for ptd_perf_event_parse(). */
#define PTD_SIDEBAND_SAMPLE_TYPE                                               \
	(PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |                \
	 PERF_SAMPLE_IDENTIFIER)

/*
 * Open the sideband dummy event for @pid (a process or thread; -1: every
 * task, needs a CPU) on @cpu (-1: any CPU), @inherit as asked, CLOEXEC,
 * disabled.  Returns 0 and sets *ret_fd, or a negative error with @diag:
 * -EINVAL if @inherit with @cpu == -1: the kernel refuses to mmap the ring
 *  of an inherited per-thread event (open one per CPU instead), or if @pid
 *  and @cpu are both -1, or @ret_fd is NULL;
 * -EACCES/-EPERM: not allowed (names /proc/sys/kernel/perf_event_paranoid
 *  and CAP_PERFMON);
 * -ESRCH: no such process;
 * -ENODEV/-ENOENT/-EOPNOTSUPP: no perf events for that CPU/kernel;
 * -errno otherwise.
 */
int ptd_sideband_open(pid_t pid, int cpu, bool inherit, int *ret_fd,
		      struct ptd_diag *diag);

/* Hard limit on CPU numbers in a cpu list. */
#define PTD_SIDEBAND_MAX_CPUS 8192u

/*
 * Parse a kernel cpu list ("0-3,8,10-11\n"): ascending, non-overlapping
 * decimal numbers and ranges, one optional trailing newline, nothing else.
 * @origin names the input in messages.  Returns 0 and a malloc'd ascending
 * array in *ret_cpus (free it) with *ret_n > 0 entries, -PTD_EFORMAT with
 * "origin: what at column N" in @diag, -PTD_ELIMIT for a CPU number >=
 * PTD_SIDEBAND_MAX_CPUS, -ENOMEM.
 */
int ptd_cpulist_parse(const char *text, size_t len, const char *origin,
		      int **ret_cpus, size_t *ret_n, struct ptd_diag *diag);

/*
 * The online CPUs: read and parse @path (NULL:
 * /sys/devices/system/cpu/online).  Returns what ptd_cpulist_parse()
 * returns, or -errno from reading it (message in @diag).
 */
int ptd_sideband_online_cpus(const char *path, int **ret_cpus, size_t *ret_n,
			     struct ptd_diag *diag);

#endif
