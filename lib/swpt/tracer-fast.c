/* SPDX-License-Identifier: MIT */
/*
 * The software PT source's branch mode (swpt/tracer.h, opt->step): a
 * thread runs at full speed through the straight-line code (and direct
 * jumps and calls) in front of it, and stops only at the next instruction
 * the trace must observe.  The instructions it ran on the way are implied
 * by the code and recorded exactly as single-stepping them would have
 * (tr_completed, one by one), so the packets and the truth are the same.
 *
 *  - Runs: from a block start, the plain instructions are decoded once and
 *    cached (struct tr_block, dropped with the instruction cache when the
 *    executable mappings change).  A run ends at
 *      a conditional branch, a near RET, or an indirect JMP/CALL through
 *        a register or memory (64-bit forms): an INT3 is written over its
 *        first byte and stays there; at the trap the tracer computes the
 *        branch's outcome from the registers (and the return address or
 *        pointer from memory), sets rip (rsp, the pushed return address)
 *        as the instruction would have, and runs on -- the instruction is
 *        never executed by the thread, so a breakpoint never has to be
 *        lifted while another thread may run into it;
 *      a SYSCALL: no breakpoint, the run is a PTRACE_SYSCALL and stops at
 *        the syscall's entry, from where the syscall is single-stepped as
 *        in single-step mode.
 *    Anything else (REP string instructions, INT, far transfers, PTWRITE,
 *    other branch forms, code that does not decode, a run longer than
 *    BLK_MAX or one that loops back on itself) is single-stepped.
 *  - Breakpoints are written only into private, non-writable executable
 *    file mappings and the vDSO, through /proc/PID/mem; code in writable
 *    or anonymous memory (JIT code) is single-stepped.  Reads of code for
 *    the decoder and snapshots see the original bytes (tr_fast_unpatch).
 *  - Any stop inside a run (a signal, an interrupt, an exit) says with its
 *    rip how far the run went; the instructions up to there are recorded.
 *  - fork, vfork, clone of a process: before the syscall runs, every
 *    breakpoint is removed (once no thread is in a run that relies on
 *    one), and none is set again until the syscall has returned in the
 *    parent, so no child ever holds one.  A child that shares the memory
 *    without being a thread or a vfork child turns branch mode off for
 *    good (single-step from there).  A process attached while it shares
 *    its parent's memory (a vfork child: kcmp says so) is single-stepped
 *    until its exec, as that memory is its parent's tracer's to patch.
 *  - Detach: every breakpoint is removed before the first thread goes.
 *  - exec: the old memory is gone with its breakpoints.
 * Limits: code that reads its own instructions as data (a checksum of its
 * text) sees the INT3s; code changed in place without a change of its
 * mapping (by another process, or a file mapped privately whose pages
 * were never written and whose file is rewritten) is not re-decoded.
 */
#include "swpt/tracer-int.h"

#include <sched.h>

#define BLK_MAX 256u		/* plain instructions in one run */
#define BLK_CACHE_MAX (1u << 16)
#define INT3 0xcc

enum blk_end {
	BLK_END_STEP,		/* no run: single-step from the start */
	BLK_END_BP,		/* a breakpoint at term */
	BLK_END_SYSCALL,	/* the SYSCALL at term */
};

struct tr_block {
	uint64_t start;
	unsigned refs;		/* the cache's and each run's */
	enum blk_end end;
	uint64_t term;
	struct ptd_x86_flow flow;	/* BLK_END_BP: term's */
	uint32_t n;
	struct ptd_x86_insn v[];	/* the plain instructions from start */
};

static void blk_unref(struct tr_block *b)
{
	if (b && --b->refs == 0)
		free(b);
}

bool tr_fast_enabled(const struct tracer *tr)
{
	return tr->branch && !tr->fast_dead && !tr->vm_shared;
}

/* ---- breakpoints ----------------------------------------------------- */

static size_t hash_u64(uint64_t v, size_t cap)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	return (size_t)v & (cap - 1);
}

static struct tr_bp *patch_find(const struct ptd_swpt_patches *p,
				uint64_t addr)
{
	if (!p->nbps)
		return NULL;
	for (size_t i = hash_u64(addr, p->cap);; i = (i + 1) & (p->cap - 1)) {
		if (p->bps[i].addr == addr)
			return &p->bps[i];
		if (!p->bps[i].addr)
			return NULL;
	}
}

static struct tr_bp *bp_find(const struct tracer *tr, uint64_t addr)
{
	return patch_find(tr->pa, addr);
}

static int bp_add(struct tracer *tr, uint64_t addr, uint8_t orig)
{
	if ((tr->pa->nbps + 1) * 2 > tr->pa->cap) {
		size_t cap = tr->pa->cap ? tr->pa->cap * 2 : 256;
		struct tr_bp *v = calloc(cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < tr->pa->cap; i++) {
			size_t j;

			if (!tr->pa->bps[i].addr)
				continue;
			for (j = hash_u64(tr->pa->bps[i].addr, cap); v[j].addr;
			     j = (j + 1) & (cap - 1))
				;
			v[j] = tr->pa->bps[i];
		}
		free(tr->pa->bps);
		tr->pa->bps = v;
		tr->pa->cap = cap;
	}
	for (size_t i = hash_u64(addr, tr->pa->cap);; i = (i + 1) & (tr->pa->cap - 1))
		if (!tr->pa->bps[i].addr) {
			tr->pa->bps[i] = (struct tr_bp){ addr, orig };
			tr->pa->nbps++;
			return 0;
		}
}

/* One code byte of the process, through /proc/PID/mem where ptd may open
 * it (root with CAP_DAC_OVERRIDE, or the owner), else through
 * PTRACE_PEEKDATA/POKEDATA with a thread that is stopped (tr->mem_tid: the
 * one whose stop is being handled, or a parked one).  The aligned word
 * around the byte never crosses a page. */
static int mem_open(struct tracer *tr)
{
	char path[64];

	if (tr->memfd >= 0 || tr->memfd_failed)
		return tr->memfd;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)tr->mem_tid);
	tr->memfd = open(path, O_RDWR | O_CLOEXEC);
	tr->memfd_failed = tr->memfd < 0;
	return tr->memfd;
}

static int mem_rw1(struct tracer *tr, uint64_t addr, uint8_t *v, bool wr)
{
	uint64_t base = addr & ~7ull;
	unsigned sh = (unsigned)(addr - base) * 8;
	long w;
	int fd = mem_open(tr);

	if (fd >= 0) {
		ssize_t n = wr ? pwrite(fd, v, 1, (off_t)addr)
			       : pread(fd, v, 1, (off_t)addr);

		return n == 1 ? 0 : -(errno ? errno : EIO);
	}
	errno = 0;
	w = ptrace(PTRACE_PEEKDATA, tr->mem_tid, (void *)(uintptr_t)base, NULL);
	if (errno)
		return -errno;
	if (!wr) {
		*v = (uint8_t)((uint64_t)w >> sh);
		return 0;
	}
	w = (long)(((uint64_t)w & ~(0xffull << sh)) | ((uint64_t)*v << sh));
	if (ptrace(PTRACE_POKEDATA, tr->mem_tid, (void *)(uintptr_t)base,
		   (void *)w) < 0)
		return -errno;
	return 0;
}

static int mem_write1(struct tracer *tr, uint64_t addr, uint8_t v)
{
	int r = mem_rw1(tr, addr, &v, true);

	if (r < 0)
		return tr_failf(tr, r, "cannot write the code byte at %#"
				PRIx64 " of process %d: %s", addr, (int)tr->pid,
				strerror(-r));
	return 0;
}

static int bp_install(struct tracer *tr, struct tthread *t, uint64_t addr)
{
	uint8_t orig;
	int r;

	tr->mem_tid = t->tid;
	r = mem_rw1(tr, addr, &orig, false);
	if (r < 0)
		return tr_failf(tr, r, "cannot read the code byte at %#"
				PRIx64 " of thread %d: %s", addr, (int)t->tid,
				strerror(-r));
	if (orig == INT3)	/* not the instruction decoded there */
		return 1;
	(void)pthread_mutex_lock(&tr->pa->lock);
	r = bp_add(tr, addr, orig);
	if (r == 0)
		r = mem_write1(tr, addr, INT3);
	(void)pthread_mutex_unlock(&tr->pa->lock);
	if (r < 0)
		return r;
	tr->bp_installs++;
	return 0;
}

/* Put every original byte back, and forget the breakpoints (@keep: keep
 * the addresses, to recognise a trap one of them caused). */
static int bp_remove_all(struct tracer *tr, bool keep)
{
	int r = 0;

	(void)pthread_mutex_lock(&tr->pa->lock);
	for (size_t i = 0; i < tr->pa->cap && tr->pa->nbps; i++) {
		int r2;

		if (!tr->pa->bps[i].addr || tr->pa->bps[i].gone)
			continue;
		r2 = mem_write1(tr, tr->pa->bps[i].addr, tr->pa->bps[i].orig);
		if (r == 0)
			r = r2;
		tr->pa->bps[i].gone = true;
	}
	if (!keep) {
		free(tr->pa->bps);
		tr->pa->bps = NULL;
		tr->pa->cap = 0;
		tr->pa->nbps = 0;
	}
	(void)pthread_mutex_unlock(&tr->pa->lock);
	return r;
}

/* The original bytes of @p's breakpoints into @buf, @len bytes read at
 * @addr: a lookup per byte for a short read, else one pass over the
 * table. */
static void patches_unpatch(const struct ptd_swpt_patches *p, uint64_t addr,
			    uint8_t *buf, size_t len)
{
	if (!p->nbps)
		return;
	if (len <= 32) {
		for (size_t i = 0; i < len; i++) {
			const struct tr_bp *b = patch_find(p, addr + i);

			if (b && !b->gone)
				buf[i] = b->orig;
		}
		return;
	}
	for (size_t i = 0; i < p->cap; i++) {
		const struct tr_bp *b = &p->bps[i];

		if (b->addr && !b->gone && b->addr >= addr &&
		    b->addr - addr < len)
			buf[b->addr - addr] = b->orig;
	}
}

void tr_fast_unpatch(const struct tracer *tr, uint64_t addr, uint8_t *buf,
		     size_t len)
{
	patches_unpatch(tr->pa, addr, buf, len);
}

/* May breakpoints go into the mapping @m? */
static bool map_patchable(const struct ptd_map *m)
{
	return m && (m->prot & PTD_MAP_PROT_X) && !(m->prot & PTD_MAP_PROT_W) &&
	       !m->shared &&
	       (m->kind == PTD_MAP_FILE || m->kind == PTD_MAP_VDSO);
}

static bool map_same_file(const struct ptd_map *a, const struct ptd_map *b,
			  uint64_t addr)
{
	return a->kind == b->kind && a->inode == b->inode &&
	       a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
	       addr - a->start + a->offset == addr - b->start + b->offset &&
	       strcmp(a->path, b->path) == 0;
}

/* The executable mappings changed from @old to @now (nobody waits on the
 * memory meanwhile: the caller handles a stop).  A breakpoint whose
 * mapping is the same stays; one in the same file's memory stays if the
 * mapping may still hold one, else its byte goes back; one whose memory
 * was replaced is forgotten. */
int tr_fast_maps_changed(struct tracer *tr, const struct ptd_maps *old,
			 const struct ptd_maps *now)
{
	struct tr_bp *v = tr->pa->bps;
	size_t cap = tr->pa->cap;
	int r = 0;

	tr_fast_blocks_clear(tr);
	if (!tr->pa->nbps)
		return 0;
	(void)pthread_mutex_lock(&tr->pa->lock);
	tr->pa->bps = NULL;
	tr->pa->cap = 0;
	tr->pa->nbps = 0;
	for (size_t i = 0; i < cap; i++) {
		const struct ptd_map *a, *b;
		uint8_t cur;

		if (!v[i].addr || v[i].gone)
			continue;
		a = ptd_maps_find(old, v[i].addr);
		b = ptd_maps_find(now, v[i].addr);
		if (!a || !b || !map_same_file(a, b, v[i].addr) ||
		    mem_rw1(tr, v[i].addr, &cur, false) < 0 ||
		    cur != INT3)
			continue;	/* not our byte there any more */
		if (map_patchable(b)) {
			if ((r = bp_add(tr, v[i].addr, v[i].orig)) < 0)
				break;
			continue;
		}
		if ((r = mem_write1(tr, v[i].addr, v[i].orig)) < 0)
			break;
	}
	(void)pthread_mutex_unlock(&tr->pa->lock);
	free(v);
	return r;
}

/* ---- blocks ---------------------------------------------------------- */

void tr_fast_blocks_clear(struct tracer *tr)
{
	for (size_t i = 0; i < tr->blkcap; i++)
		blk_unref(tr->blks[i]);
	free(tr->blks);
	tr->blks = NULL;
	tr->blkcap = 0;
	tr->nblks = 0;
}

static struct tr_block *blk_find(const struct tracer *tr, uint64_t start)
{
	if (!tr->nblks)
		return NULL;
	for (size_t i = hash_u64(start, tr->blkcap);;
	     i = (i + 1) & (tr->blkcap - 1)) {
		if (!tr->blks[i])
			return NULL;
		if (tr->blks[i]->start == start)
			return tr->blks[i];
	}
}

static int blk_insert(struct tracer *tr, struct tr_block *b)
{
	if (tr->nblks >= BLK_CACHE_MAX)
		tr_fast_blocks_clear(tr);
	if ((tr->nblks + 1) * 2 > tr->blkcap) {
		size_t cap = tr->blkcap ? tr->blkcap * 2 : 1024;
		struct tr_block **v = calloc(cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < tr->blkcap; i++) {
			size_t j;

			if (!tr->blks[i])
				continue;
			for (j = hash_u64(tr->blks[i]->start, cap); v[j];
			     j = (j + 1) & (cap - 1))
				;
			v[j] = tr->blks[i];
		}
		free(tr->blks);
		tr->blks = v;
		tr->blkcap = cap;
	}
	for (size_t i = hash_u64(b->start, tr->blkcap);;
	     i = (i + 1) & (tr->blkcap - 1))
		if (!tr->blks[i]) {
			tr->blks[i] = b;
			tr->nblks++;
			return 0;
		}
}

static bool plain(const struct ptd_x86_insn *i)
{
	return !i->rep && (i->kind == PTD_X86_OTHER ||
			   i->kind == PTD_X86_JMP_DIRECT ||
			   i->kind == PTD_X86_CALL_DIRECT);
}

static uint64_t next_ip(uint64_t ip, const struct ptd_x86_insn *i)
{
	return i->kind == PTD_X86_JMP_DIRECT || i->kind == PTD_X86_CALL_DIRECT
		       ? i->target
		       : ip + i->size;
}

/* The successor rule of the branch at @ip, from its original bytes. */
static int flow_at(struct tracer *tr, struct tthread *t, uint64_t ip,
		   struct ptd_x86_flow *ret)
{
	uint8_t buf[16];
	ssize_t n = tr_read_code(tr, t->tid, ip, buf, sizeof(buf));

	ret->kind = PTD_X86_FLOW_NONE;
	if (n <= 0)
		return 0;
	if (ptd_x86_decode_flow(buf, (size_t)n, ip, ret) < 0)
		ret->kind = PTD_X86_FLOW_NONE;
	return 0;
}

/* Decode the run from @start (where @t stands). */
static int blk_build(struct tracer *tr, struct tthread *t, uint64_t start,
		     struct tr_block **ret)
{
	const struct ptd_map *m = ptd_maps_find(&tr->maps, start);
	struct ptd_x86_insn v[BLK_MAX], in;
	struct tr_block *b;
	enum blk_end end = BLK_END_STEP;
	struct ptd_x86_flow flow = { 0 };
	uint64_t ip = start;
	uint32_t n = 0;
	int r;

	while (map_patchable(m) && ip >= m->start && ip < m->end) {
		r = tr_decode_at(tr, t, ip, &in);
		if (r < 0)
			break;	/* single-stepping it reports why */
		if (plain(&in)) {
			uint64_t next = next_ip(ip, &in);

			if (n == BLK_MAX || (next >= start && next <= ip))
				break;	/* long, or it loops */
			v[n++] = in;
			ip = next;
			continue;
		}
		if (in.kind == PTD_X86_SYSCALL && !in.rep) {
			uint8_t op[2];

			/* SYSCALL (0F 05), not SYSENTER */
			if (tr_read_code(tr, t->tid, ip, op, 2) == 2 &&
			    op[0] == 0x0f && op[1] == 0x05)
				end = BLK_END_SYSCALL;
			break;
		}
		r = flow_at(tr, t, ip, &flow);
		if (r < 0)
			return r;
		if (flow.kind != PTD_X86_FLOW_NONE && ip + in.size <= m->end)
			end = BLK_END_BP;
		break;
	}
	if (end == BLK_END_STEP)
		n = 0;
	b = malloc(sizeof(*b) + n * sizeof(b->v[0]));
	if (!b)
		return -ENOMEM;
	b->start = start;
	b->refs = 1;
	b->end = end;
	b->term = ip;
	b->flow = flow;
	b->n = n;
	memcpy(b->v, v, n * sizeof(v[0]));
	r = blk_insert(tr, b);
	if (r < 0) {
		free(b);
		return r;
	}
	*ret = b;
	return 0;
}

/* ---- emulation ------------------------------------------------------- */

static unsigned long long *reg_of(struct user_regs_struct *r, int n)
{
	switch (n) {
	case 0: return &r->rax;
	case 1: return &r->rcx;
	case 2: return &r->rdx;
	case 3: return &r->rbx;
	case 4: return &r->rsp;
	case 5: return &r->rbp;
	case 6: return &r->rsi;
	case 7: return &r->rdi;
	case 8: return &r->r8;
	case 9: return &r->r9;
	case 10: return &r->r10;
	case 11: return &r->r11;
	case 12: return &r->r12;
	case 13: return &r->r13;
	case 14: return &r->r14;
	case 15: return &r->r15;
	default: return NULL;
	}
}

static bool cond_holds(unsigned cc, uint64_t fl)
{
	bool cf = fl & 0x1, pf = fl & 0x4, zf = fl & 0x40, sf = fl & 0x80,
	     of = fl & 0x800, v;

	switch (cc >> 1) {
	case 0: v = of; break;
	case 1: v = cf; break;
	case 2: v = zf; break;
	case 3: v = cf || zf; break;
	case 4: v = sf; break;
	case 5: v = pf; break;
	case 6: v = sf != of; break;
	default: v = zf || sf != of; break;
	}
	return (cc & 1) ? !v : v;
}

static bool read_u64(struct tracer *tr, pid_t tid, uint64_t addr,
		     uint64_t *ret)
{
	return tr_read_code(tr, tid, addr, ret, 8) == 8;
}

static bool write_u64(pid_t tid, uint64_t addr, uint64_t v)
{
	struct iovec l = { &v, 8 }, rm = { (void *)(uintptr_t)addr, 8 };

	return process_vm_writev(tid, &l, 1, &rm, 1, 0) == 8;
}

/* Do what the branch @t stands at does, to @regs (and the stack), and
 * record it.  Returns 0, 1 if it cannot be computed here (it must be
 * executed), or a negative error. */
static int emulate(struct tracer *tr, struct tthread *t,
		   struct user_regs_struct *regs, const struct ptd_x86_flow *f)
{
	struct ptd_x86_insn insn = t->insn;
	uint64_t ip = t->ip, after = ip + insn.size, next, a = 0;
	unsigned long long *p;

	switch (f->kind) {
	case PTD_X86_FLOW_JCC:
		next = cond_holds(f->cc, regs->eflags) ? insn.target : after;
		break;
	case PTD_X86_FLOW_JRCXZ:
		next = regs->rcx == 0 ? insn.target : after;
		break;
	case PTD_X86_FLOW_RET:
		if (!read_u64(tr, t->tid, regs->rsp, &next))
			return 1;
		regs->rsp += 8 + f->imm;
		break;
	case PTD_X86_FLOW_REG:
	case PTD_X86_FLOW_MEM:
		if (f->kind == PTD_X86_FLOW_REG) {
			next = *reg_of(regs, f->base);
		} else {
			if (f->rip)
				a = after;
			else if (f->base >= 0)
				a = *reg_of(regs, f->base);
			if (f->index >= 0)
				a += *reg_of(regs, f->index) * f->scale;
			a += (uint64_t)f->disp;
			if (f->seg == 1)
				a += regs->fs_base;
			else if (f->seg == 2)
				a += regs->gs_base;
			if (!read_u64(tr, t->tid, a, &next))
				return 1;
		}
		if (f->call) {
			if (!write_u64(t->tid, regs->rsp - 8, after))
				return 1;
			regs->rsp -= 8;
		}
		break;
	case PTD_X86_FLOW_NONE:
	default:
		return 1;
	}
	p = &regs->rip;
	*p = next;
	tr->emulated++;
	return tr_completed(tr, t, ip, &insn, 0, regs);
}

/* ---- runs ------------------------------------------------------------ */

static bool max_near(const struct tracer *tr, uint32_t n)
{
	return tr->opt->max_insns && tr->insns + n + 1 >= tr->opt->max_insns;
}

static int set_regs(struct tracer *tr, struct tthread *t,
		    const struct user_regs_struct *regs)
{
	if (ptrace(PTRACE_SETREGS, t->tid, NULL, regs) < 0) {
		t->regs_unset = errno == ESRCH;	/* tr_on_wait says why */
		return tr_failf(tr, -errno, "thread %d: PTRACE_SETREGS: %s",
				(int)t->tid, strerror(errno));
	}
	return 0;
}

static void hold(struct tracer *tr, struct tthread *t)
{
	if (!t->hold) {
		t->hold = true;
		tr->holds++;
	}
}

void tr_fast_release(struct tracer *tr, struct tthread *t)
{
	if (t->hold) {
		t->hold = false;
		tr->holds--;
	}
}

static void park(struct tracer *tr, struct tthread *t, int how, int sig)
{
	t->park = how;
	t->park_sig = sig;
	tr->nparked++;
}

int tr_fast_go(struct tracer *tr, struct tthread *t,
	       struct user_regs_struct *regs, bool dirty)
{
	struct ptd_x86_flow f;
	struct tr_block *b;
	int r;

	for (unsigned k = 0; tr_fast_enabled(tr) && k < 1024; k++) {
		if (t->restart || t->after_exec || t->rep_recorded ||
		    t->entered || !t->gen)
			break;
		if (t->insn.kind == PTD_X86_COND || t->insn.kind == PTD_X86_RET ||
		    t->insn.kind == PTD_X86_JMP_INDIRECT ||
		    t->insn.kind == PTD_X86_CALL_INDIRECT) {
			if (max_near(tr, 0))
				break;
			b = t->run_last && t->run_last->term == t->ip
				    ? t->run_last : NULL;
			if (b && b->end == BLK_END_BP)
				f = b->flow;
			else if ((r = flow_at(tr, t, t->ip, &f)) < 0)
				return r;
			r = emulate(tr, t, regs, &f);
			if (r < 0)
				return r;
			if (r > 0)
				break;
			dirty = true;
			if (tr->detaching || tr_stop_asked(tr) ||
			    max_near(tr, 0)) {
				if ((r = set_regs(tr, t, regs)) < 0)
					return r;
				return tr_step_on(tr, t, regs, false);
			}
			continue;
		}
		if (!plain(&t->insn) || tr->holds || tr->detaching)
			break;
		b = blk_find(tr, t->ip);
		if (!b && (r = blk_build(tr, t, t->ip, &b)) < 0)
			return r;
		if (b->end == BLK_END_STEP || max_near(tr, b->n))
			break;
		if (b->end == BLK_END_BP && !bp_find(tr, b->term)) {
			r = bp_install(tr, t, b->term);
			if (r < 0)
				return r;
			if (r > 0)
				break;
		}
		if (dirty && (r = set_regs(tr, t, regs)) < 0)
			return r;
		b->refs++;
		t->run = b;
		tr->nrunners++;
		tr->runs++;
		t->inject = 0;
		if (ptrace(PTRACE_SYSCALL, t->tid, NULL, NULL) < 0 &&
		    errno != ESRCH)
			return tr_failf(tr, -errno, "thread %d: PTRACE_SYSCALL: %s",
					(int)t->tid, strerror(errno));
		return 0;
	}
	if (dirty && (r = set_regs(tr, t, regs)) < 0)
		return r;
	/* A breakpoint stands where it must execute: every breakpoint goes
	 * first (tr_fast_settle). */
	if (bp_find(tr, t->ip) && !bp_find(tr, t->ip)->gone) {
		hold(tr, t);
		park(tr, t, TR_PARK_STEP, 0);
		return 0;
	}
	return tr_resume(tr, t, 0);
}

/* The run @t was on ended with the thread at @end: record what ran. */
static int run_end(struct tracer *tr, struct tthread *t, uint64_t end,
		   const struct user_regs_struct *regs)
{
	struct tr_block *b = t->run;
	struct user_regs_struct fake = *regs;
	uint64_t ip = b->start;
	int r = 0;

	for (uint32_t i = 0; ip != end; i++) {
		struct ptd_x86_insn in;

		if (i >= b->n) {
			r = tr_failf(tr, -EPROTO, "thread %d stopped at %#"
				     PRIx64 ", off its run from %#" PRIx64
				     " (code changed under it?)", (int)t->tid,
				     end, b->start);
			break;
		}
		in = b->v[i];
		fake.rip = next_ip(ip, &in);
		r = tr_completed(tr, t, ip, &in, 0, &fake);
		if (r < 0)
			break;
		ip = fake.rip;
	}
	t->run = NULL;
	tr->nrunners--;
	blk_unref(t->run_last);
	t->run_last = b;	/* the run's reference moves here */
	return r;
}

/* A runner that will never stop again (gone, or killed by an exec). */
void tr_fast_drop_run(struct tracer *tr, struct tthread *t)
{
	if (t->run) {
		blk_unref(t->run);
		t->run = NULL;
		tr->nrunners--;
	}
	blk_unref(t->run_last);
	t->run_last = NULL;
	if (t->park) {
		t->park = 0;
		tr->nparked--;
	}
	tr_fast_release(tr, t);
}

int tr_fast_stopped(struct tracer *tr, struct tthread *t, int status,
		    struct user_regs_struct *regs, bool *handled)
{
	struct tr_block *b = t->run;
	int sig = WSTOPSIG(status), event = status >> 16, r;
	bool hit = b->end == BLK_END_BP && regs->rip == b->term + 1 &&
		   bp_find(tr, b->term);

	*handled = false;
	if (event == 0 && sig == (SIGTRAP | 0x80)) {
		if (b->end != BLK_END_SYSCALL || regs->rip != b->term + 2)
			return tr_failf(tr, -EPROTO, "thread %d: syscall stop "
					"at %#llx, not after its run's SYSCALL "
					"at %#" PRIx64, (int)t->tid, regs->rip,
					b->term);
		r = run_end(tr, t, b->term, regs);
		if (r < 0)
			return r;
		t->sysnr = regs->orig_rax;
		*handled = true;
		return tr_step_on(tr, t, regs, false);
	}
	if (hit && event == PTRACE_EVENT_STOP) {
		/* the INT3 ran and its SIGTRAP is still queued: take it */
		if (ptrace(PTRACE_CONT, t->tid, NULL, NULL) < 0 &&
		    errno != ESRCH)
			return tr_failf(tr, -errno, "thread %d: PTRACE_CONT: %s",
					(int)t->tid, strerror(errno));
		*handled = true;
		return 0;
	}
	if (event == PTRACE_EVENT_EXIT && b->end == BLK_END_SYSCALL &&
	    regs->rip == b->term + 2)
	{
		/* killed as it entered the run's SYSCALL: a fatal signal
		 * skips the syscall-entry stop.  What ran is the run up to
		 * the SYSCALL, as at that stop; the SYSCALL never completed,
		 * and the exit (on_stopped goes on to it) ends the stream
		 * there, as for a thread killed where it stood. */
		regs->rip = b->term;
		return run_end(tr, t, b->term, regs);
	}
	if (hit) {
		regs->rip = b->term;
		r = set_regs(tr, t, regs);
		if (r == 0) {
			t->trap_unrewound = false;
			r = run_end(tr, t, b->term, regs);
		}
		if (r < 0 || event != 0 || sig != SIGTRAP)
			return r;	/* on to what else the stop says */
		*handled = true;
		return tr_step_on(tr, t, regs, false);
	}
	return run_end(tr, t, regs->rip, regs);
}

/* A SIGTRAP with si_code SI_KERNEL outside a run, the thread just past its
 * ip: it stepped onto one of our breakpoints (single-stepped there, or a
 * signal injected where it stood was ignored).  The instruction at ip is
 * decoded from the bytes without our breakpoints: if it is no INT of the
 * program's, the INT3 that ran was ours -- standing, or taken away since
 * the thread trapped on it (every breakpoint goes at a detach or a park
 * once no thread is on a run, and the trapped thread's stop may still wait
 * in the kernel's queue: another thread shares the code).  Put it back:
 * nothing ran. */
int tr_fast_trap(struct tracer *tr, struct tthread *t,
		 struct user_regs_struct *regs, bool *handled)
{
	int r;

	*handled = false;
	if (regs->rip - 1 != t->ip || t->insn.kind == PTD_X86_INT)
		return 0;
	regs->rip = t->ip;
	r = set_regs(tr, t, regs);
	if (r < 0)
		return r;
	t->trap_unrewound = false;
	*handled = true;
	return tr_step_on(tr, t, regs, false);
}

/* ---- fork, detach, exec ---------------------------------------------- */

/* 0: no new process; 1: a child process; 2: a child process sharing the
 * memory beyond a vfork. */
static int forkish(struct tracer *tr, struct tthread *t)
{
	struct user_regs_struct regs;
	uint64_t flags;

	switch (t->sysnr) {
	case SYS_fork:
	case SYS_vfork:
		return 1;
	case SYS_clone:
	case SYS_clone3:
		if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
			return 2;
		if (t->sysnr == SYS_clone)
			flags = regs.rdi;
		else if (!read_u64(tr, t->tid, regs.rdi, &flags))
			return 2;
		if (flags & CLONE_THREAD)
			return 0;
		if ((flags & CLONE_VM) && !(flags & CLONE_VFORK))
			return 2;
		return 1;
	default:
		return 0;
	}
}

int tr_fast_before_step(struct tracer *tr, struct tthread *t, int sig)
{
	int k;

	if (!tr->branch || t->insn.kind != PTD_X86_SYSCALL || t->hold)
		return 0;
	k = forkish(tr, t);
	if (!k)
		return 0;
	hold(tr, t);
	if (k == 2)
		tr->fast_dead = true;
	if (!tr->pa->nbps)
		return 0;
	park(tr, t, TR_PARK_STEP, sig);
	return 1;
}

int tr_fast_detach(struct tracer *tr, struct tthread *t)
{
	if (!tr->pa->nbps)
		return 0;
	tr->mem_tid = t->tid;
	if (tr->nrunners) {
		park(tr, t, TR_PARK_DETACH, 0);
		return 1;
	}
	return bp_remove_all(tr, false);
}

int tr_fast_settle(struct tracer *tr)
{
	int r;

	if (!tr->nparked || tr->nrunners)
		return 0;
	for (size_t i = 0; i < tr->nth; i++)
		if (tr->th[i]->park)
			tr->mem_tid = tr->th[i]->tid;	/* stopped */
	if (tr->pa->nbps && (r = bp_remove_all(tr, false)) < 0)
		return r;
	for (size_t i = 0; i < tr->nth && tr->nparked; i++) {
		struct tthread *t = tr->th[i];
		int how = t->park;

		if (!how)
			continue;
		t->park = 0;
		tr->nparked--;
		if (how == TR_PARK_DETACH)
			r = tr_detach_thread(tr, t);
		else
			r = tr_resume(tr, t, t->park_sig);
		if (r < 0)
			return r;
	}
	return 0;
}

void tr_fast_exec(struct tracer *tr, struct tthread *t)
{
	tr->vm_shared = false;		/* a memory of its own now */
	for (size_t i = 0; i < tr->nth; i++)
		if (tr->th[i] != t)
			tr_fast_drop_run(tr, tr->th[i]);
	(void)pthread_mutex_lock(&tr->pa->lock);
	free(tr->pa->bps);
	tr->pa->bps = NULL;
	tr->pa->cap = 0;
	tr->pa->nbps = 0;
	(void)pthread_mutex_unlock(&tr->pa->lock);
	tr_fast_blocks_clear(tr);
	if (tr->memfd >= 0)
		(void)close(tr->memfd);
	tr->memfd = -1;
	tr->memfd_failed = false;
}

/* On an error: every original byte back, through whichever thread is
 * stopped. */
void tr_fast_abandon(struct tracer *tr)
{
	if (!tr->pa || !tr->pa->nbps)
		return;
	if (mem_open(tr) >= 0) {
		(void)bp_remove_all(tr, true);
		return;
	}
	for (size_t i = 0; i < tr->nth; i++) {
		if (tr->th[i]->reaped)
			continue;
		tr->mem_tid = tr->th[i]->tid;
		if (bp_remove_all(tr, true) == 0)
			return;
		for (size_t k = 0; k < tr->pa->cap; k++)
			tr->pa->bps[k].gone = false;	/* try the next */
	}
}

bool tr_fast_was_bp(const struct tracer *tr, uint64_t addr)
{
	return bp_find(tr, addr) != NULL;
}

void tr_fast_free(struct tracer *tr)
{
	for (size_t i = 0; i < tr->nth; i++) {
		blk_unref(tr->th[i]->run);
		blk_unref(tr->th[i]->run_last);
		tr->th[i]->run = tr->th[i]->run_last = NULL;
	}
	tr_fast_blocks_clear(tr);
	if (tr->pa) {
		(void)pthread_mutex_lock(&tr->pa->lock);
		free(tr->pa->bps);
		tr->pa->bps = NULL;
		tr->pa->nbps = tr->pa->cap = 0;
		(void)pthread_mutex_unlock(&tr->pa->lock);
	}
	ptd_swpt_patches_free(tr->own_patches);
	tr->own_patches = NULL;
	tr->pa = NULL;
	if (tr->memfd >= 0)
		(void)close(tr->memfd);
	tr->memfd = -1;
}

/* ---- the breakpoints, for other threads ------------------------------ */

int ptd_swpt_patches_new(struct ptd_swpt_patches **ret)
{
	struct ptd_swpt_patches *p = calloc(1, sizeof(*p));

	*ret = p;
	if (!p)
		return -ENOMEM;
	(void)pthread_mutex_init(&p->lock, NULL);
	return 0;
}

void ptd_swpt_patches_free(struct ptd_swpt_patches *p)
{
	if (!p)
		return;
	(void)pthread_mutex_destroy(&p->lock);
	free(p->bps);
	free(p->ups);
	free(p);
}

static bool uprobe_same(const struct ptd_swpt_uprobe *a,
			const struct ptd_swpt_uprobe *b)
{
	return a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
	       a->inode == b->inode && a->offset == b->offset;
}

int ptd_swpt_patches_uprobe_add(struct ptd_swpt_patches *p,
				const struct ptd_swpt_uprobe *u)
{
	struct ptd_swpt_uprobe *v;

	if (!u->len || u->len > sizeof(u->insn))
		return -EINVAL;
	(void)pthread_mutex_lock(&p->lock);
	v = realloc(p->ups, (p->nups + 1) * sizeof(*v));
	if (v) {
		p->ups = v;
		p->ups[p->nups++] = *u;
	}
	(void)pthread_mutex_unlock(&p->lock);
	return v ? 0 : -ENOMEM;
}

/* One of the entries equal to @u goes (two triggers may probe the same
 * instruction: each added its own). */
void ptd_swpt_patches_uprobe_remove(struct ptd_swpt_patches *p,
				    const struct ptd_swpt_uprobe *u)
{
	(void)pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->nups; i++)
		if (uprobe_same(&p->ups[i], u)) {
			p->ups[i] = p->ups[--p->nups];
			break;
		}
	(void)pthread_mutex_unlock(&p->lock);
}

int tr_fast_init(struct tracer *tr)
{
	tr->memfd = -1;
	tr->pa = tr->opt->patches;
	if (!tr->pa) {
		int r = ptd_swpt_patches_new(&tr->own_patches);

		if (r < 0)
			return r;
		tr->pa = tr->own_patches;
	}
	return 0;
}

ssize_t ptd_swpt_patches_read(void *ctx, pid_t pid, uint64_t addr, void *buf,
			      size_t len)
{
	struct ptd_swpt_patches *p = ctx;
	struct iovec l = { buf, len }, rm = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	(void)pthread_mutex_lock(&p->lock);
	do {
		n = process_vm_readv(pid, &l, 1, &rm, 1, 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		n = -errno;
	else
		patches_unpatch(p, addr, buf, (size_t)n);
	(void)pthread_mutex_unlock(&p->lock);
	return n;
}
