/* SPDX-License-Identifier: MIT */
/*
 * The software PT source (swpt/tracer.h): the traced process's code as the
 * trace needs it -- decoded instructions cached by ip, the timeline of its
 * mappings (read from /proc/PID/maps at start and after each syscall that
 * may change them), the address filter resolved against them, and
 * non-file code snapshotted when it first runs.
 */
#include "swpt/tracer-int.h"

/* ---- timeline -------------------------------------------------------- */

/* Add @ev with the current position of every live thread; a live output
 * gets every stream up to there first, then the event (and @code, the
 * bytes of a snapshot). */
static int tl_add_code(struct tracer *tr, struct ptd_tl_event *ev,
		       const uint8_t *code, size_t ncode)
{
	const struct ptd_swpt_out *out = tr->opt->out;
	struct ptd_tl_pos *pos;
	size_t n = 0;
	int64_t seq;
	int r;

	if (out && (r = tr_flush_all(tr)) < 0)
		return r;
	pos = calloc(tr->live ? tr->live : 1, sizeof(*pos));
	if (!pos)
		return -ENOMEM;
	for (size_t i = 0; i < tr->nth; i++) {
		if (!tr->th[i]->gen)
			continue;
		pos[n].tid = tr->th[i]->tid;
		pos[n].pos = ptd_ptgen_offset(tr->th[i]->gen);
		n++;
	}
	ev->pos = pos;
	ev->npos = n;
	seq = ptd_timeline_add(&tr->tl, ev);
	free(pos);
	if (seq < 0)
		return (int)seq;
	if (out && (r = out->image(out->ctx, &tr->tl.ev[tr->tl.n - 1], code,
				   ncode)) < 0)
		return tr_failf(tr, r, "live output of an image change: %s",
				ptd_strerror(r));
	return 0;
}

int tr_tl_add(struct tracer *tr, struct ptd_tl_event *ev)
{
	return tl_add_code(tr, ev, NULL, 0);
}

static bool map_exec(const struct ptd_map *m)
{
	return m->prot & PTD_MAP_PROT_X;
}

static bool map_same(const struct ptd_map *a, const struct ptd_map *b)
{
	return a->start == b->start && a->end == b->end &&
	       a->offset == b->offset && a->inode == b->inode &&
	       a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
	       a->prot == b->prot && a->kind == b->kind &&
	       strcmp(a->path, b->path) == 0;
}

/* Whether @maps has a mapping identical to @m. */
static bool maps_has(const struct ptd_maps *maps, const struct ptd_map *m)
{
	const struct ptd_map *f = ptd_maps_find(maps, m->start);

	return f && map_same(f, m);
}

static int add_map_event(struct tracer *tr, const struct ptd_map *m)
{
	struct ptd_tl_event ev = { 0 };

	ev.op = PTD_TL_MAP;
	ev.start = m->start;
	ev.end = m->end;
	ev.pgoff = m->offset;
	ev.path = m->path;
	ptd_file_id_from_map(m, &ev.id);	/* checked where it is read */
	return tr_tl_add(tr, &ev);
}

static void drop_snaps(struct tracer *tr, uint64_t start, uint64_t end)
{
	size_t k = 0;

	for (size_t i = 0; i < tr->nsnaps; i++)
		if (tr->snaps[i].end <= start || tr->snaps[i].start >= end)
			tr->snaps[k++] = tr->snaps[i];
	tr->nsnaps = k;
}

static int read_maps(struct tracer *tr, struct ptd_maps *ret)
{
	int r = ptd_maps_read_pid("/proc", tr->pid, ret, tr->diag);

	if (r < 0 && r != -PTD_EFORMAT && r != -PTD_ELIMIT)
		return tr_failf(tr, r, "cannot read /proc/%d/maps: %s",
				(int)tr->pid, ptd_strerror(r));
	return r;
}

static void filter_update(struct tracer *tr, bool exec);

/* Re-read the maps and put the difference in executable mappings into the
 * timeline: UNMAP for what is gone or changed, MAP for new file code.
 * Non-file code is saved when it first executes (ensure_snapshot). */
int tr_maps_refresh(struct tracer *tr)
{
	struct ptd_maps now;
	bool changed = false;
	int r = read_maps(tr, &now);

	if (r < 0)
		return r;
	for (size_t i = 0; i < tr->maps.n; i++) {
		const struct ptd_map *m = &tr->maps.v[i];
		struct ptd_tl_event ev = { 0 };

		if (!map_exec(m) || maps_has(&now, m))
			continue;
		changed = true;
		drop_snaps(tr, m->start, m->end);
		ev.op = PTD_TL_UNMAP;
		ev.start = m->start;
		ev.end = m->end;
		if ((r = tr_tl_add(tr, &ev)) < 0)
			goto out;
	}
	for (size_t i = 0; i < now.n; i++) {
		const struct ptd_map *m = &now.v[i];

		if (!map_exec(m) || maps_has(&tr->maps, m))
			continue;
		changed = true;
		drop_snaps(tr, m->start, m->end);
		if (m->kind == PTD_MAP_FILE && (r = add_map_event(tr, m)) < 0)
			goto out;
	}
	if (changed) {
		ptd_insncache_clear(tr->ic);
		if ((r = tr_fast_maps_changed(tr, &tr->maps, &now)) < 0)
			goto out;
	}
	ptd_maps_fini(&tr->maps);
	tr->maps = now;
	if (changed)
		filter_update(tr, false);
	return 0;
out:
	ptd_maps_fini(&now);
	return r;
}

/* The whole map set is new (first stop, exec): MAP every file mapping. */
int tr_maps_load_all(struct tracer *tr)
{
	int r;

	ptd_maps_fini(&tr->maps);
	tr->nsnaps = 0;
	ptd_insncache_clear(tr->ic);
	tr_fast_blocks_clear(tr);
	r = read_maps(tr, &tr->maps);
	if (r < 0)
		return r;
	for (size_t i = 0; i < tr->maps.n; i++) {
		const struct ptd_map *m = &tr->maps.v[i];

		if (map_exec(m) && m->kind == PTD_MAP_FILE &&
		    (r = add_map_event(tr, m)) < 0)
			return r;
	}
	filter_update(tr, true);
	return 0;
}

/* Resolve opt->filter against the maps just read (once) and hand it to
 * every thread's generator; none of them is tracing yet (the threads were
 * just seized, or the program was just exec'd).  A range in a file the
 * process does not map yet is pending (it must exist, in the process's
 * root), as the kernel has it. */
int tr_filter_resolve(struct tracer *tr)
{
	char root[64];
	int r;

	if (!tr->opt->filter || tr->fcfg_set)
		return 0;
	(void)snprintf(root, sizeof(root), "/proc/%d/root", (int)tr->pid);
	r = ptd_addrfilter_resolve(tr->opt->filter, &tr->maps, root,
				   &tr->fcfg, &tr->fpending, tr->diag);
	if (r < 0)
		return r;	/* the message is in diag */
	tr->fcfg_set = true;
	tr->filter_seq++;
	for (size_t i = 0; i < tr->nth; i++) {
		if (!tr->th[i]->gen)
			continue;
		r = ptd_ptgen_set_filter(tr->th[i]->gen, &tr->fcfg);
		if (r < 0)
			return tr_failf(tr, r, "thread %d: cannot set the filter "
					"while it is tracing: %s",
					(int)tr->th[i]->tid, ptd_strerror(r));
		tr->th[i]->filter_seq = tr->filter_seq;
	}
	return 0;
}

/* The maps changed: resolve the file ranges again, as the kernel does at
 * every executable mapping (a pending range's file was mapped by a dlopen,
 * a library was mapped elsewhere) and after an exec (@exec), where the old
 * program's addresses are void.  A range whose file is no longer mapped
 * is pending again.  A range that does not resolve otherwise (the mapping
 * does not hold it) keeps its addresses; after an exec it is pending.
 * Each thread takes the new filter at its next instruction (tr_record_if):
 * the hardware's filter MSRs are written only with TraceEn clear, so a
 * thread that is tracing stops and starts again, as the kernel restarts
 * a running event for it. */
static void filter_update(struct tracer *tr, bool exec)
{
	static const struct ptd_maps none;
	const struct ptd_addrfilter *f = tr->opt->filter;
	struct pt_conf_addr_filter c;
	bool files = false;
	unsigned pending;

	for (size_t i = 0; tr->fcfg_set && i < f->n; i++)
		files |= f->v[i].file != NULL;
	if (!files)
		return;
	if (ptd_addrfilter_resolve(f, &tr->maps, NULL, &c, &pending,
				   NULL) < 0) {
		if (!exec)
			return;
		if (ptd_addrfilter_resolve(f, &none, NULL, &c, &pending,
					   NULL) < 0)
			return;
	}
	if (!memcmp(&c, &tr->fcfg, sizeof(c)))
		return;
	tr->fcfg = c;
	tr->fpending = pending;
	tr->filter_seq++;
}

/* ---- code bytes, snapshots ------------------------------------------- */

/* Read up to @len bytes at @addr of @tid; a range that crosses into an
 * unreadable page gives what lies before it.  Returns bytes read or
 * -errno. */
static ssize_t read_mem(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	const uint64_t page = 4096;
	uint64_t first = page - (addr & (page - 1));
	struct iovec local = { buf, len };
	struct iovec remote[2];
	int nr = 1;
	ssize_t n;

	remote[0].iov_base = (void *)(uintptr_t)addr;
	remote[0].iov_len = len;
	/* Transfers are partial only at iovec boundaries: split at pages. */
	if (first < len) {
		remote[0].iov_len = first;
		remote[1].iov_base = (void *)(uintptr_t)(addr + first);
		remote[1].iov_len = len - first;
		nr = 2;
	}
	n = process_vm_readv(tid, &local, 1, remote, (unsigned long)nr, 0);
	return n < 0 ? -errno : n;
}

/* Where uprobe @u's instruction lies in mapping @m, if it does: true and
 * its address in *@ret. */
static bool uprobe_in(const struct ptd_swpt_uprobe *u, const struct ptd_map *m,
		      uint64_t *ret)
{
	if (m->kind != PTD_MAP_FILE || m->inode != u->inode ||
	    m->dev_major != u->dev_major || m->dev_minor != u->dev_minor ||
	    u->offset < m->offset || u->offset - m->offset >= m->end - m->start)
		return false;
	*ret = m->start + (u->offset - m->offset);
	return true;
}

/* Put the file's bytes of every uprobe's instruction into @buf (@len
 * bytes of the process at @addr): the kernel's INT3 is not the code. */
static void uprobes_unpatch(struct tracer *tr, uint64_t addr, uint8_t *buf,
			    size_t len)
{
	struct ptd_swpt_patches *p = tr->pa;

	(void)pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->nups; i++) {
		const struct ptd_swpt_uprobe *u = &p->ups[i];

		for (size_t k = 0; k < tr->maps.n; k++) {
			uint64_t at;

			if (!uprobe_in(u, &tr->maps.v[k], &at))
				continue;
			for (unsigned j = 0; j < u->len; j++)
				if (at + j >= addr && at + j - addr < len)
					buf[at + j - addr] = u->insn[j];
		}
	}
	(void)pthread_mutex_unlock(&p->lock);
}

bool tr_uprobe_at(struct tracer *tr, uint64_t addr)
{
	struct ptd_swpt_patches *p = tr->pa;
	const struct ptd_map *m;
	bool found = false;
	uint64_t at;

	(void)pthread_mutex_lock(&p->lock);
	m = p->nups ? ptd_maps_find(&tr->maps, addr) : NULL;
	for (size_t i = 0; m && !found && i < p->nups; i++)
		found = uprobe_in(&p->ups[i], m, &at) && at == addr;
	(void)pthread_mutex_unlock(&p->lock);
	return found;
}

ssize_t tr_read_code(struct tracer *tr, pid_t tid, uint64_t addr, void *buf,
		     size_t len)
{
	ssize_t n = read_mem(tid, addr, buf, len);

	if (n > 0) {
		tr_fast_unpatch(tr, addr, buf, (size_t)n);
		if (tr->pa && tr->pa->nups)
			uprobes_unpatch(tr, addr, buf, (size_t)n);
	}
	return n;
}

static bool snapped(const struct tracer *tr, uint64_t ip)
{
	for (size_t i = 0; i < tr->nsnaps; i++)
		if (ip >= tr->snaps[i].start && ip < tr->snaps[i].end)
			return true;
	return false;
}

static const char *snap_name(const struct ptd_map *m)
{
	if (m->path[0])
		return m->path;
	return m->kind == PTD_MAP_ANON ? "[anon]" : ptd_map_kind_name(m->kind);
}

/* Save the bytes of non-file mapping @m in snap-SEQ.bin. */
static int snapshot(struct tracer *tr, pid_t tid, const struct ptd_map *m)
{
	uint64_t size = m->end - m->start;
	struct ptd_tl_event ev = { 0 };
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_free_ char *path = NULL;
	char file[64];
	struct snap_range *v;
	size_t done = 0;
	int r;

	if (size > SNAP_MAX)
		return tr_failf(tr, -PTD_ELIMIT, "cannot save code at %#" PRIx64
				": mapping of %" PRIu64 " bytes is too large",
				m->start, size);
	buf = malloc(size);
	snprintf(file, sizeof(file), "snap-%" PRIu64 ".bin", tr->tl.next_seq);
	if (tr->opt->outdir &&
	    asprintf(&path, "%s/%s", tr->opt->outdir, file) < 0)
		return -ENOMEM;
	if (!buf)
		return -ENOMEM;
	while (done < size) {
		size_t chunk = size - done < (1u << 20) ? size - done
							: (1u << 20);
		ssize_t n = tr_read_code(tr, tid, m->start + done,
					 buf + done, chunk);

		if (n <= 0)
			return tr_failf(tr, n < 0 ? (int)n : -EIO,
					"cannot read code at %#" PRIx64 " of "
					"thread %d", m->start + done, (int)tid);
		done += (size_t)n;
	}
	r = path ? ptd_file_write_atomic(path, buf, size) : 0;
	if (r < 0)
		return tr_failf(tr, r, "cannot write '%s': %s", path,
				ptd_strerror(r));
	v = realloc(tr->snaps, (tr->nsnaps + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	tr->snaps = v;
	tr->snaps[tr->nsnaps++] = (struct snap_range){ m->start, m->end };
	ev.op = PTD_TL_SNAPSHOT;
	ev.start = m->start;
	ev.end = m->end;
	ev.name = (char *)snap_name(m);
	ev.file = file;
	return tl_add_code(tr, &ev, buf, size);
}

static const struct ptd_map *find_map(struct tracer *tr, uint64_t ip)
{
	const struct ptd_map *m = ptd_maps_find(&tr->maps, ip);

	/* Not there: the maps changed behind our back (another process
	 * sharing them, or a syscall we do not watch).  Catch up once. */
	if (!m && tr_maps_refresh(tr) == 0)
		m = ptd_maps_find(&tr->maps, ip);
	return m;
}

/* Make @ip's code available to a decoder: file code is in the timeline
 * already; other code is saved when it first runs. */
static int ensure_snapshot(struct tracer *tr, pid_t tid, uint64_t ip)
{
	const struct ptd_map *m = find_map(tr, ip);

	if (!m)
		return tr_failf(tr, -PTD_ENOIMAGE, "thread %d: ip %#" PRIx64
				" is not in any mapping", (int)tid, ip);
	switch (m->kind) {
	case PTD_MAP_FILE:
		return 0;
	case PTD_MAP_VSYSCALL:
		return tr_failf(tr, -PTD_EUNSUPPORTED, "thread %d: ip %#" PRIx64
				" is in [vsyscall]", (int)tid, ip);
	case PTD_MAP_DELETED:
	case PTD_MAP_ANON:
	case PTD_MAP_HEAP:
	case PTD_MAP_STACK:
	case PTD_MAP_VDSO:
	case PTD_MAP_VVAR:
	case PTD_MAP_OTHER:
		break;
	}
	if (snapped(tr, ip))
		return 0;
	return snapshot(tr, tid, m);
}

/* The code reader of the instruction cache: @t's memory, non-file code
 * saved first (a miss is an instruction met for the first time). */
struct code_read {
	struct tracer *tr;
	struct tthread *t;
	int err;		/* ensure_snapshot's (diag set), or 0 */
	int read_err;		/* the read's errno, or 0 */
};

static int read_code(void *ctx, uint64_t ip, uint8_t *buf, size_t len)
{
	struct code_read *cr = ctx;
	ssize_t n;

	if (ip == cr->t->ip &&
	    (cr->err = ensure_snapshot(cr->tr, cr->t->tid, ip)) < 0)
		return -1;
	n = tr_read_code(cr->tr, cr->t->tid, ip, buf, len);
	if (n < 0 && ip == cr->t->ip)
		cr->read_err = (int)n;
	return n < 0 ? -1 : (int)n;
}

/* What the tracer keeps of an instruction-cache entry. */
static struct ptd_x86_insn insn_of(const struct ptd_icache_entry *e)
{
	return (struct ptd_x86_insn){ .size = e->size, .iclass = e->iclass,
				      .kind = e->kind, .rep = e->rep,
				      .cpuid = e->cpuid, .target = e->target };
}

/* Decode the instruction @t executes next (at @ip, with @rax in rax), from
 * the instruction cache (decode/insncache.h, the one the decoders use,
 * keyed here by ip alone and cleared when the code may have changed) or
 * the live process. */
int tr_prepare(struct tracer *tr, struct tthread *t, uint64_t ip,
	       uint64_t rax)
{
	struct code_read cr = { tr, t, 0, 0 };
	const struct ptd_icache_entry *e;
	int err = 0;

	t->ip = ip;
	t->sysnr = rax;		/* the number, should ip be a SYSCALL */
	e = ptd_insncache_get_read(tr->ic, 1, ip, ptem_64bit, read_code, &cr,
				   &err);
	if (!e && cr.err < 0)
		return cr.err;
	if (!e && err == -PTD_ENOIMAGE) {
		err = cr.read_err ? cr.read_err : -EIO;
		return tr_failf(tr, err, "thread %d: cannot read code at %#"
				PRIx64 ": %s", (int)t->tid, ip,
				ptd_strerror(err));
	}
	if (!e)
		return tr_failf(tr, err, "thread %d: cannot decode the "
				"instruction at %#" PRIx64 ": %s",
				(int)t->tid, ip, ptd_strerror(err));
	t->insn = insn_of(e);
	return 0;
}

int tr_decode_at(struct tracer *tr, struct tthread *t, uint64_t ip,
		 struct ptd_x86_insn *ret)
{
	struct code_read cr = { tr, t, 0, 0 };
	const struct ptd_icache_entry *e;
	int err = 0;

	e = ptd_insncache_get_read(tr->ic, 1, ip, ptem_64bit, read_code, &cr,
				   &err);
	if (!e)
		return cr.err < 0 ? cr.err : (err < 0 ? err : -EIO);
	*ret = insn_of(e);
	return 0;
}
