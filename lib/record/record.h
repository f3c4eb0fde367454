/* SPDX-License-Identifier: MIT */
/*
 * The records ptd streams.  One struct for every kind; the JSON writer
 * (record/jsonw.h) turns them into lines, the decoder produces them.
 *
 * libipt 2.0's struct pt_insn carries ip, isid, mode, iclass, raw, size,
 * speculative and truncated; the other flags libipt 1.x had on each
 * instruction (enabled, disabled, resumed, interrupted, resynced, stopped,
 * aborted, committed) are events in 2.0.  ptd puts them back on the
 * instruction they bind to, with libipt 1.x's meaning:
 *   enabled      tracing was enabled at this instruction
 *   resumed      ...and resumed where it had been disabled
 *   resynced     tracing resumed at this instruction after an overflow
 *   disabled     tracing was disabled after this instruction
 *   interrupted  normal flow was interrupted after this instruction
 *                (an asynchronous branch or disable)
 *   stopped      tracing was stopped after this instruction
 *   aborted      a transaction was aborted after this instruction
 *   committed    a transaction was committed after this instruction
 * The events themselves are also streamed as event records, in order.
 */
#ifndef PTD_RECORD_RECORD_H
#define PTD_RECORD_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <intel-pt.h>

enum ptd_rec_type {
	PTD_REC_INSN,
	PTD_REC_BLOCK,
	PTD_REC_EVENT,
	PTD_REC_ERROR,
	/* call, return and stack_reset lines (decode/calls.h): asked for
	 * as "call" */
	PTD_REC_CALL,
	/* the first execution of an instruction in a decode, per mode and
	 * per code at its address (decode/counters.h) */
	PTD_REC_FIRST_EXEC,
	/* exact execution counts: the top instructions, blocks and
	 * functions (decode/counters.h) */
	PTD_REC_COUNTERS,
	/* a hot trace formed, and one withdrawn because its code changed
	 * (decode/traces.h); both asked for as "trace" */
	PTD_REC_TRACE,
	PTD_REC_TRACE_WITHDRAWN,
	PTD_REC_NTYPES,
	/* Internal, never streamed (not in PTD_REC_ALL, no name, no line):
	 * code the thread's image held went away, as its decode applied an
	 * unmap or an exec of the timeline (aspace/timeline.h), in order with
	 * the thread's records.  The counter table's trace builder withdraws
	 * the thread's traces over it (decode/traces.h).  Given only by a
	 * decode asked for it (ptd_decode_opts.image_records, or one that
	 * builds traces itself). */
	PTD_REC_IMAGE,
};

#define PTD_REC_BIT(t) (1u << (t))
#define PTD_REC_ALL ((1u << PTD_REC_NTYPES) - 1)
/* The record kinds counted through a counter table (decode/counters.h):
 * a decode asked for any of them keeps one; a live session or replay
 * gives them only when it counts. */
#define PTD_COUNTERS_KINDS                                                    \
	(PTD_REC_BIT(PTD_REC_FIRST_EXEC) | PTD_REC_BIT(PTD_REC_COUNTERS) |    \
	 PTD_REC_BIT(PTD_REC_TRACE) | PTD_REC_BIT(PTD_REC_TRACE_WITHDRAWN))

/* "insn", "block", "event", "error", "call", "first_exec", "counters",
 * "trace", "trace_withdrawn";
 * NULL for an unknown value. */
const char *ptd_rec_type_name(enum ptd_rec_type t);
/* Inverse; returns -1 if @name is not a record type. */
int ptd_rec_type_parse(const char *name);

enum ptd_insn_flag {
	PTD_F_SPECULATIVE = 1u << 0,
	PTD_F_TRUNCATED = 1u << 1,
	PTD_F_ENABLED = 1u << 2,
	PTD_F_DISABLED = 1u << 3,
	PTD_F_RESUMED = 1u << 4,
	PTD_F_INTERRUPTED = 1u << 5,
	PTD_F_RESYNCED = 1u << 6,
	PTD_F_STOPPED = 1u << 7,
	PTD_F_ABORTED = 1u << 8,
	PTD_F_COMMITTED = 1u << 9,
	PTD_F_NFLAGS = 10,
};

/* Name of flag bit @bit (0..PTD_F_NFLAGS-1): "speculative", "truncated",
 * "enabled", ... */
const char *ptd_flag_name(unsigned bit);

struct ptd_rec_insn {
	uint64_t ip;
	uint64_t modoff;	/* offset of ip in module's file */
	const char *module;	/* path or "[vdso]"...; never NULL */
	int isid;
	/* Which mapping of section isid ran it (aspace/image.h,
	 * ptd_image_gen): a library mapped again where it was has the same
	 * isid and another gen.  Not written in any format: the counter
	 * table (decode/counters.h) tells code apart by it. */
	uint32_t gen;
	enum pt_exec_mode mode;
	enum pt_insn_class iclass;
	uint32_t flags;		/* PTD_F_* */
	uint8_t size;
	uint8_t raw[pt_max_insn_size];
	/* The function holding ip ("sym":"name+0xOFF"), when the decoder
	 * was asked for symbols and one covers ip (sym/symbols.h); else
	 * NULL.  Resolved once per cached instruction. */
	const char *sym;
	uint64_t symoff;
	/* The fields above that depend only on the instruction (all but
	 * flags), already rendered by ptd_json_insn_body -- once per distinct
	 * instruction, by the instruction cache -- or NULL, and the writer
	 * renders them.  Both give the same bytes. */
	const char *json_body;
	uint32_t json_body_len;
	/* The length of its part before "sym" (the body of the same
	 * instruction without a symbol: sym comes last), so that a renderer
	 * without sym copies that much; 0: unknown, it renders the fields. */
	uint32_t json_body_nosym_len;
	/* The instruction's slot in the decode's counter table
	 * (decode/counters.h), resolved once per cached instruction by the
	 * instruction cache; 0: not known here, the table looks it up. */
	uint32_t cslot;
};

struct ptd_rec_block {
	uint64_t ip;		/* first instruction */
	uint64_t end_ip;	/* last instruction */
	uint64_t modoff;	/* of ip */
	const char *module;
	int isid;
	enum pt_exec_mode mode;
	enum pt_insn_class iclass;	/* of the last instruction */
	uint32_t ninsn;
	uint32_t flags;		/* PTD_F_SPECULATIVE, PTD_F_TRUNCATED, and the
				 * event flags of its first (enabled...)
				 * and last (disabled...) instruction */
	uint8_t size;		/* last instruction, if truncated */
	uint8_t raw[pt_max_insn_size];
	const char *sym;	/* of ip, as ptd_rec_insn's */
	uint64_t symoff;
};

struct ptd_rec_event {
	struct pt_event ev;	/* as libipt gave it */
	uint64_t offset;	/* trace offset where it was decoded */
};

struct ptd_rec_error {
	int code;		/* negative libipt error code (pte_*), or a
				 * negative ptd/errno code if @ptd_code */
	bool ptd_code;
	uint64_t offset;	/* trace offset */
	uint64_t ip;
	bool ip_valid;
	const char *context;	/* what was being done: "sync", "decode",
				 * "image", ...; never NULL */
	uint64_t skipped;	/* trace bytes skipped to resync (if known) */
	/* What exactly went wrong, naming the input (for context "image":
	 * the file and the mapping), or NULL.  Must outlive the record's
	 * delivery (the decoder keeps its strings in the iscache). */
	const char *detail;
};

enum ptd_call_kind {
	PTD_CALL_CALL,		/* "call": from = site, to = target */
	PTD_CALL_RETURN,	/* "return": from = the ret (or jmp), to */
	PTD_CALL_RESET,		/* "stack_reset": reason */
};

enum ptd_call_flag {
	PTD_CALL_F_TAIL = 1u << 0,	/* call: a jump to a function start */
	PTD_CALL_F_ASYNC = 1u << 1,	/* call: a signal handler entered */
	PTD_CALL_F_SIGRETURN = 1u << 2,	/* return: a signal frame's end */
	PTD_CALL_F_UNWIND = 1u << 3,	/* return: to a caller's function,
					 * not a return address */
	PTD_CALL_F_UNMATCHED = 1u << 4,	/* return: to no frame on the stack */
};

/* decode/calls.h says when each is made. */
struct ptd_rec_call {
	enum ptd_call_kind kind;
	/* call: the depth of the new frame (1 for a call from where the
	 * trace began); return: of the frame left; reset: the depth lost */
	uint32_t depth;
	uint32_t frames;	/* return: frames popped (0 or more) */
	uint32_t flags;		/* PTD_CALL_F_* */
	uint64_t from, to;
	const char *sym;	/* of @to, as ptd_rec_insn's; or NULL */
	uint64_t symoff;
	const char *reason;	/* reset: "overflow" or the error's context */
};

/* What a counters record counts (decode/counters.h). */
enum ptd_counters_of {
	PTD_COUNTERS_TOTAL,	/* the whole table: count = executions,
				 * ninsn = distinct instructions */
	PTD_COUNTERS_INSN,	/* one instruction: ip, size, raw ... */
	PTD_COUNTERS_BLOCK,	/* a straight run of instructions executed
				 * as many times: ip .. end_ip, ninsn */
	PTD_COUNTERS_FUNC,	/* a function (sym, module; without a symbol:
				 * a module): count = its instructions'
				 * executions, ninsn = distinct ones */
};

struct ptd_rec_counters {
	enum ptd_counters_of of;
	uint32_t rank;		/* 1: the most executed */
	uint64_t count;
	uint32_t ninsn;
	uint64_t uncounted;	/* total: executions the full table could
				 * not count */
	/* The instruction (insn), the first one (block): ip, isid, mode,
	 * size, raw, iclass, module, modoff, sym; block: end_ip too. */
	struct ptd_rec_insn insn;
	uint64_t end_ip;
};

/* The most blocks a trace record writes (decode/traces.h's
 * PTD_TRACES_MAX_BBS; more are left out of its "blocks"). */
#define PTD_TRACES_JSON_MAX_BLOCKS 128u

/* A hot trace (decode/traces.h): formed (trace) or withdrawn
 * (trace_withdrawn: id, head, reason, at; the rest as when formed). */
struct ptd_rec_trace {
	uint32_t id;		/* 1, 2, ... in the order traces form */
	uint64_t head;		/* first address of its first block */
	uint32_t nblocks;
	uint32_t ninsn;		/* instructions of its blocks, as executed */
	const uint64_t *blocks;	/* @nblocks first addresses, in order; valid
				 * during the record's delivery */
	/* the head's module, offset, section, mode and symbol */
	const char *module;
	uint64_t modoff;
	int isid;
	enum pt_exec_mode mode;
	const char *sym;
	uint64_t symoff;
	/* trace: why it ended: "backward_branch", "trace_head", "max_bbs" */
	const char *end;
	/* trace_withdrawn: why ("code_changed") and the first address of the
	 * new code that overlapped one of its blocks */
	const char *reason;
	uint64_t at;
};

/* PTD_REC_IMAGE: [start, end) no longer holds the code it held (exec:
 * the whole address space). */
struct ptd_rec_image {
	uint64_t start, end;
	bool exec;
};

struct ptd_record {
	enum ptd_rec_type type;
	pid_t pid;
	pid_t tid;
	bool has_tsc;
	uint64_t tsc;
	/* Set by the decoder from @tsc when it knows the clock
	 * (ptd_decode_opts.has_clock / has_wallref): perf time in ns (the
	 * clock sideband records use) and wall-clock time (CLOCK_REALTIME ns
	 * since the epoch).  Never set without has_tsc. */
	bool has_time;
	bool has_wall;
	uint64_t time;
	uint64_t wall;
	union {
		/* insn, and first_exec: the instruction as its insn record
		 * has it (flags 0) */
		struct ptd_rec_insn insn;
		struct ptd_rec_block block;
		struct ptd_rec_event event;
		struct ptd_rec_error error;
		struct ptd_rec_call call;
		struct ptd_rec_counters counters;
		struct ptd_rec_trace trace;
		struct ptd_rec_image image;
	} u;
};

/*
 * The fields a subscriber may choose (doc/protocol.md, "fields"): the keys
 * of insn and block records.  A projection applies to those two kinds only
 * -- one of them per executed instruction or block, the bulk of a stream --
 * and keeps their order; "type" is always written (a line says what it
 * is).  Event and error records are rare and mean nothing without their
 * other fields: they are always written whole, as are the stream's own
 * records (hello, lost, bye, snapshot).  A field a record does not have
 * (end_ip on an insn, tsc without a TSC) is left out as in a full record.
 */
enum ptd_field {
	PTD_FIELD_TYPE,		/* always set */
	PTD_FIELD_PID,
	PTD_FIELD_TID,
	PTD_FIELD_IP,
	PTD_FIELD_END_IP,	/* block */
	PTD_FIELD_NINSN,	/* block */
	PTD_FIELD_SIZE,
	PTD_FIELD_RAW,
	PTD_FIELD_ICLASS,
	PTD_FIELD_MODE,
	PTD_FIELD_ISID,
	PTD_FIELD_MODULE,
	PTD_FIELD_OFFSET,
	PTD_FIELD_SYM,		/* with symbols on (ptctl decode --symbols) */
	PTD_FIELD_FLAGS,
	PTD_FIELD_TSC,
	PTD_FIELD_TIME,
	PTD_FIELD_WALL,
	PTD_FIELD_N,
};

#define PTD_FIELD_BIT(f) (1u << (f))
#define PTD_FIELDS_ALL ((1u << PTD_FIELD_N) - 1)
/* The longest field name, without the NUL. */
#define PTD_FIELD_NAME_MAX 6u

/* "type", "pid", ... "wall"; NULL for an unknown value. */
const char *ptd_field_name(enum ptd_field f);
/* Inverse; -1 if @name is not a field. */
int ptd_field_parse(const char *name);
/* The field names, comma-separated, in record order (for messages). */
const char *ptd_field_list(void);

/* libipt names used in records: event types ("enabled", "disabled",
 * "async_disabled", ...), exec modes ("64bit", "32bit", "16bit",
 * "unknown").  Never NULL. */
const char *ptd_event_name(enum pt_event_type t);
const char *ptd_mode_name(enum pt_exec_mode m);
/* libipt's error name for a pte_* code ("nomap", "bad_opc", ...). */
const char *ptd_pterr_name(int code);

#endif
