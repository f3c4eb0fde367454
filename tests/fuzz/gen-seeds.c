/* SPDX-License-Identifier: MIT */
/*
 * Writes the binary seed inputs of the fuzz harnesses:
 *
 *   gen-seeds OUTDIR
 *   gen-seeds --pack DIR FILE    (any directory as one multi-file input)
 *
 * makes OUTDIR/{pt,sideband,perfdata,capture,bundle,lldb,timeline,manifest}
 * with small, valid inputs built the way the unit tests build theirs
 * (libipt's encoder through tests/unit/ptenc.h, the perf.data builder of
 * tests/unit/pdbuild.h, ptd's own writers of captures, bundles, LLDB
 * bundles and perf.data): PT over fuzz_code (fuzz-common.h) with every
 * packet kind, one perf record of every type, perf.data files in both
 * layouts, per-thread and per-CPU, a capture, its bundles, its LLDB
 * bundles.  Multi-file inputs are packed as fuzz-common.h describes.
 * tests/fuzz/corpus/ holds what this wrote (make-corpus.sh); regenerate
 * only when a format changes.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fuzz/fuzz-common.h"
#include "unit/pdbuild.h"
#include "unit/ptenc.h"

#include "bundle/bundle.h"
#include "lldb/elfwrap.h"
#include "lldb/export.h"
#include "perfdata/write.h"
#include "swpt/capture.h"

static const char *out;
static char work[] = "/tmp/ptd-gen-seeds-XXXXXX";

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "gen-seeds: %s: %s\n", what, msg ? msg : "");
	exit(1);
}

static void emit(const char *sub, const char *name, const void *p, size_t n)
{
	char path[1024];

	(void)snprintf(path, sizeof(path), "%s/%s", out, sub);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/%s/%s", out, sub, name);
	fuzz_write_file(path, p, n);
}

static void slurp(const char *path, struct ptd_buf *b)
{
	char *data = NULL;
	size_t len = 0;

	if (ptd_file_read_all(path, 64u << 20, &data, &len) < 0)
		die("read", path);
	put(b, data, len);
	free(data);
}

/* Append every file under @dir/@rel to @b in the "@@@ NAME" form,
 * sorted by name. */
static void pack_dir(const char *dir, const char *rel, struct ptd_buf *b)
{
	struct dirent **ents = NULL;
	char path[1024];
	int n;

	(void)snprintf(path, sizeof(path), "%s%s%s", dir, *rel ? "/" : "",
		       rel);
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0)
		die("scandir", path);
	for (int i = 0; i < n; i++) {
		char sub[512], full[1024];
		struct stat st;

		if (ents[i]->d_name[0] == '.')
			goto next;
		(void)snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "",
			       ents[i]->d_name);
		(void)snprintf(full, sizeof(full), "%s/%s", dir, sub);
		if (lstat(full, &st) < 0)
			die("lstat", full);
		if (S_ISDIR(st.st_mode)) {
			pack_dir(dir, sub, b);
		} else {
			if (b->len)
				put(b, "\n", 1);
			put(b, "@@@ ", 4);
			put(b, sub, strlen(sub));
			put(b, "\n", 1);
			slurp(full, b);
		}
next:
		free(ents[i]);
	}
	free(ents);
}

static void emit_dir(const char *sub, const char *name, const char *dir)
{
	struct ptd_buf b = { 0 };

	pack_dir(dir, "", &b);
	emit(sub, name, b.data, b.len);
	ptd_buf_fini(&b);
}

static void emit_file(const char *sub, const char *name, const char *path)
{
	struct ptd_buf b = { 0 };

	slurp(path, &b);
	emit(sub, name, b.data, b.len);
	ptd_buf_fini(&b);
}

/* ---- PT ----------------------------------------------------------------- */

#define BASE FUZZ_CODE_BASE

static void packet(struct trace *t, enum pt_packet_type type,
		   void (*fill)(struct pt_packet *p, uint64_t v), uint64_t v)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	if (fill)
		fill(&p, v);
	pkt(t, &p);
}

static void f_mtc(struct pt_packet *p, uint64_t v) { p->payload.mtc.ctc = (uint8_t)v; }
static void f_cyc(struct pt_packet *p, uint64_t v) { p->payload.cyc.value = v; }
static void f_cbr(struct pt_packet *p, uint64_t v) { p->payload.cbr.ratio = (uint8_t)v; }
static void f_tsc(struct pt_packet *p, uint64_t v) { p->payload.tsc.tsc = v; }
static void f_pip(struct pt_packet *p, uint64_t v) { p->payload.pip.cr3 = v; }
static void f_vmcs(struct pt_packet *p, uint64_t v) { p->payload.vmcs.base = v; }
static void f_mnt(struct pt_packet *p, uint64_t v) { p->payload.mnt.payload = v; }
static void f_tma(struct pt_packet *p, uint64_t v)
{
	p->payload.tma.ctc = (uint16_t)v;
	p->payload.tma.fc = 3;
}
static void f_ptw(struct pt_packet *p, uint64_t v)
{
	p->payload.ptw.plc = 1;
	p->payload.ptw.ip = 1;
	p->payload.ptw.payload = v;
}
static void f_tsx(struct pt_packet *p, uint64_t v)
{
	p->payload.mode.leaf = pt_mol_tsx;
	p->payload.mode.bits.tsx.intx = v & 1;
	p->payload.mode.bits.tsx.abrt = (v >> 1) & 1;
}
static void f_exec32(struct pt_packet *p, uint64_t v)
{
	(void)v;
	p->payload.mode.leaf = pt_mol_exec;
	p->payload.mode.bits.exec = pt_set_exec_mode(ptem_32bit);
}
static void f_pwre(struct pt_packet *p, uint64_t v)
{
	p->payload.pwre.state = (uint8_t)v;
	p->payload.pwre.hw = 1;
}
static void f_pwrx(struct pt_packet *p, uint64_t v)
{
	p->payload.pwrx.last = (uint8_t)v;
	p->payload.pwrx.deepest = (uint8_t)v;
	p->payload.pwrx.interrupt = 1;
}
static void f_mwait(struct pt_packet *p, uint64_t v)
{
	p->payload.mwait.hints = (uint32_t)v;
	p->payload.mwait.ext = 1;
}
static void f_exstop(struct pt_packet *p, uint64_t v) { p->payload.exstop.ip = v & 1; }

/* The decoder unit test's main trace: calls, compressed returns, an
 * indirect jump, a syscall and a resume. */
static void main_trace(struct trace *t, bool timing)
{
	if (timing) {
		psb_tsc(t, 0x1000, 0);
		packet(t, ppt_tma, f_tma, 0x10);
		packet(t, ppt_cbr, f_cbr, 40);
	} else {
		psb(t);
	}
	ippkt(t, ppt_tip_pge, BASE);
	if (timing)
		packet(t, ppt_cyc, f_cyc, 7);
	tnt(t, "1110");
	if (timing)
		packet(t, ppt_mtc, f_mtc, 3);
	ippkt(t, ppt_tip, BASE + 0x20);
	ippkt(t, ppt_tip_pgd, 0);
	if (timing)
		packet(t, ppt_tsc, f_tsc, 0x2000);
	ippkt(t, ppt_tip_pge, BASE + 0x24);
	ippkt(t, ppt_tip_pgd, 0x700000);
}

static void pt_seeds(void)
{
	struct trace t;

	tr_begin(&t);
	main_trace(&t, false);
	tr_end(&t);
	emit("pt", "main.pt", t.buf, t.len);

	tr_begin(&t);
	main_trace(&t, true);
	tr_end(&t);
	emit("pt", "timing.pt", t.buf, t.len);

	/* paging and VMCS, TSX, ptwrite, power events, overflow, stop */
	tr_begin(&t);
	psb_tsc(&t, 0x100, BASE);
	packet(&t, ppt_pip, f_pip, 0x1000);
	packet(&t, ppt_vmcs, f_vmcs, 0x2000);
	packet(&t, ppt_mode, f_tsx, 1);
	tnt(&t, "1");
	packet(&t, ppt_mode, f_tsx, 2);
	ippkt(&t, ppt_fup, BASE + 0x09);
	ippkt(&t, ppt_tip, BASE + 0x50);
	packet(&t, ppt_ptw, f_ptw, 0x1234);
	ippkt(&t, ppt_fup, BASE + 0x66);
	packet(&t, ppt_mwait, f_mwait, 0x20);
	packet(&t, ppt_pwre, f_pwre, 2);
	packet(&t, ppt_exstop, f_exstop, 1);
	ippkt(&t, ppt_fup, BASE + 0x6a);
	packet(&t, ppt_pwrx, f_pwrx, 2);
	packet(&t, ppt_mnt, f_mnt, 0xabcd);
	simple(&t, ppt_ovf);
	ippkt(&t, ppt_fup, BASE + 0x40);
	ippkt(&t, ppt_tip_pgd, 0);
	simple(&t, ppt_stop);
	tr_end(&t);
	emit("pt", "events.pt", t.buf, t.len);

	/* several PSBs, 32-bit mode, the high copy, a bad opcode */
	tr_begin(&t);
	psb_tsc(&t, 0x100, 0);
	ippkt(&t, ppt_tip_pge, 0x7f0000001000ull);
	tnt(&t, "10");
	ippkt(&t, ppt_tip, 0x7f0000001000ull + 0x56);
	psb_tsc(&t, 0x200, 0x7f0000001000ull + 0x58);
	packet(&t, ppt_mode, f_exec32, 0);
	ippkt(&t, ppt_tip, BASE + 0x8d);
	simple(&t, ppt_pad);
	psb_tsc(&t, 0x300, 0);
	ippkt(&t, ppt_tip_pge, BASE + 0x74);
	tnt(&t, "111111");
	tr_end(&t);
	emit("pt", "psbs.pt", t.buf, t.len);
}

/* ---- perf records ---------------------------------------------------------- */

static void sb_emit(const char *name, uint8_t flags, const void *rec, size_t n)
{
	uint8_t buf[8192];

	if (!n || n + 1 > sizeof(buf))
		die("record", name);
	buf[0] = flags;
	memcpy(buf + 1, rec, n);
	emit("sideband", name, buf, n + 1);
}

#define SB_FLAGS 0x40 | 0x01 | 0x02 | 0x10 | 0x20	/* ST, sample_id_all */

static void sideband_seeds(void)
{
	static const uint8_t bid[20] = { 0xab, 0xcd, 1, 2, 3 };
	struct ptd_perf_sample_id s = { 0, 100, 101, 1000, 0, 0, 2, 1 };
	struct ptd_perf_mmap m;
	struct ptd_perf_comm c = { 100, 100, true, "prog" };
	struct ptd_perf_task tk = { 100, 1, 101, 100, 999 };
	struct ptd_perf_switch sw = { true, true, true, 200, 201 };
	struct ptd_perf_itrace_start it = { 100, 101 };
	struct ptd_perf_code code;
	struct ptd_perf_unmap um = { 100, 101, BASE, BASE + 0x1000 };
	uint8_t buf[4096];
	size_t n;

	memset(&m, 0, sizeof(m));
	m.pid = 100;
	m.tid = 100;
	m.addr = BASE;
	m.len = 0x1000;
	m.prot = 5;
	m.flags = 2;
	m.maj = 8;
	m.ino = 1234;
	m.filename = "/prog";
	n = ptd_perf_encode_mmap2(buf, sizeof(buf), &m, ST, &s);
	sb_emit("mmap2.rec", SB_FLAGS, buf, n);
	m.has_build_id = true;
	m.build_id_size = 20;
	memcpy(m.build_id, bid, 20);
	m.filename = "[vdso]";
	n = ptd_perf_encode_mmap2(buf, sizeof(buf), &m, 0, NULL);
	sb_emit("mmap2-buildid.rec", 0, buf, n);
	n = ptd_perf_encode_comm(buf, sizeof(buf), &c, ST, &s);
	sb_emit("comm.rec", SB_FLAGS, buf, n);
	n = ptd_perf_encode_task(buf, sizeof(buf), false, &tk, ST, &s);
	sb_emit("fork.rec", SB_FLAGS, buf, n);
	n = ptd_perf_encode_task(buf, sizeof(buf), true, &tk, 0x3f, &s);
	sb_emit("exit.rec", 0x7f, buf, n);
	n = ptd_perf_encode_switch(buf, sizeof(buf), &sw, ST, &s);
	sb_emit("switch-cpu-wide.rec", SB_FLAGS, buf, n);
	sw.cpu_wide = false;
	n = ptd_perf_encode_switch(buf, sizeof(buf), &sw, ST, &s);
	sb_emit("switch.rec", SB_FLAGS, buf, n);
	n = ptd_perf_encode_itrace_start(buf, sizeof(buf), &it, ST, &s);
	sb_emit("itrace-start.rec", SB_FLAGS, buf, n);
	memset(&code, 0, sizeof(code));
	code.pid = 100;
	code.tid = 101;
	code.vaddr = BASE;
	code.len = sizeof(fuzz_code);
	code.size = sizeof(fuzz_code);
	code.name = "[anon]";
	code.bytes = fuzz_code;
	n = ptd_perf_encode_code(buf, sizeof(buf), &code, ST, &s);
	sb_emit("code.rec", SB_FLAGS, buf, n);
	n = ptd_perf_encode_unmap(buf, sizeof(buf), &um, ST, &s);
	sb_emit("unmap.rec", SB_FLAGS, buf, n);
	{
		/* AUX, LOST, LOST_SAMPLES and TEXT_POKE have no encoder */
		uint64_t aux[] = { 0x0000002000000000ull | PERF_RECORD_AUX |
				   (40ull << 48),
				   0x1000, 0x800, PERF_AUX_FLAG_TRUNCATED,
				   0x6500000064ull };
		uint64_t lost[] = { PERF_RECORD_LOST | (32ull << 48), 7, 99,
				    0x6500000064ull };
		uint64_t lsamp[] = { PERF_RECORD_LOST_SAMPLES | (16ull << 48),
				     5 };
		uint8_t poke[40] = { 0 };
		struct perf_event_header h = { PERF_RECORD_TEXT_POKE, 0, 40 };
		uint64_t addr = 0xffffffff81000000ull;
		uint16_t lens[2] = { 5, 5 };

		aux[0] = PERF_RECORD_AUX | ((uint64_t)sizeof(aux) << 48);
		sb_emit("aux.rec", 0x01, aux, sizeof(aux));
		sb_emit("lost.rec", 0x41, lost, sizeof(lost));
		sb_emit("lost-samples.rec", 0, lsamp, sizeof(lsamp));
		memcpy(poke, &h, 8);
		memcpy(poke + 8, &addr, 8);
		memcpy(poke + 16, lens, 4);
		memcpy(poke + 20, "\x0f\x1f\x44\x00\x00\xe8\x01\x02\x03\x04",
		       10);
		sb_emit("text-poke.rec", 0, poke, sizeof(poke));
	}
}

/* ---- perf.data ------------------------------------------------------------ */

static void pd_emit(struct fb *f, const char *name, bool pipe)
{
	struct ptd_buf o;

	if (pipe)
		fb_pipe(f, &o);
	else
		fb_file(f, &o);
	emit("perfdata", name, o.data, o.len);
	ptd_buf_fini(&o);
	fb_free(f);
}

static void perfdata_seeds(void)
{
	struct trace t;
	struct fb f;

	tr_begin(&t);
	main_trace(&t, true);
	pad8(&t);
	tr_end(&t);
	/* per-thread, both layouts, with the usual features */
	for (int pipe = 0; pipe < 2; pipe++) {
		fb_init(&f);
		f.attr[0].config = (1u << 10) | (1u << 9) | (3u << 14);
		fb_ptinfo(&f, false, "filter 0x0/0x94@/prog");
		fb_features(&f);
		fb_comm(&f, 100, 100, true, "prog");
		fb_mmap2(&f, 100, BASE, 0x1000, 0, "/prog", NULL);
		fb_itrace(&f, 100, 100, UINT32_MAX);
		fb_auxtrace(&f, 100, UINT32_MAX, 0, t.buf, t.len);
		pd_emit(&f, pipe ? "thread.pipe" : "thread.data", pipe);
	}
	/* per-CPU: two CPUs, AUX records, a context switch */
	fb_init(&f);
	fb_ptinfo(&f, true, NULL);
	fb_comm(&f, 100, 100, true, "prog");
	fb_mmap2(&f, 100, BASE, 0x1000, 0, "/prog", NULL);
	fb_itrace(&f, 100, 100, 0);
	fb_aux(&f, 100, 100, 0, 0, t.len, 0);
	{
		struct ptd_perf_switch sw = { true, false, true, 100, 100 };
		struct ptd_perf_sample_id s = sid(&f, 100, 100, 0, 2);
		uint8_t buf[128];

		fb_rec(&f, buf, ptd_perf_encode_switch(buf, sizeof(buf), &sw,
						       ST, &s));
	}
	fb_itrace(&f, 100, 100, 1);
	fb_aux(&f, 100, 100, 1, 0, t.len, PERF_AUX_FLAG_PARTIAL);
	fb_auxtrace(&f, UINT32_MAX, 0, 0, t.buf, t.len);
	fb_auxtrace(&f, UINT32_MAX, 1, 0, t.buf, t.len);
	pd_emit(&f, "cpu.data", false);
}

/* ---- captures and what is made of them ------------------------------------ */

static const uint64_t main_ips[] = {
	0x400000, 0x400003, 0x400010, 0x400011, 0x400013, 0x400016,
	0x400008, 0x400009, 0x400000, 0x400003, 0x400010, 0x400011,
	0x400013, 0x400016, 0x400008, 0x400009, 0x40000b, 0x400020,
	0x400021, 0x400022, 0x400024, 0x400025, 0x400026, 0x400027,
};

/* A capture in @dir of one thread running main_trace over fuzz_code:
 * mapped from the file @prog (when not NULL) or as a snapshot. */
static void make_capture(const char *dir, const char *prog)
{
	char *argv[] = { (char *)"/prog", NULL };
	struct ptd_capture_thread th = { 100, 0, (char *)"pt-100.bin",
					 (char *)"truth-100.bin", 0, 0 };
	struct ptd_tl_pos pos = { 100, 0 };
	struct ptd_capture c;
	struct ptd_tl_event ev;
	struct ptd_truth_writer w;
	struct ptd_diag d = { "" };
	struct trace t;
	char path[1024];

	if (mkdir(dir, 0755) < 0)
		die("mkdir", dir);
	tr_begin(&t);
	main_trace(&t, true);
	tr_end(&t);
	(void)snprintf(path, sizeof(path), "%s/pt-100.bin", dir);
	fuzz_write_file(path, t.buf, t.len);
	(void)snprintf(path, sizeof(path), "%s/truth-100.bin", dir);
	if (ptd_truth_writer_open(&w, path) < 0)
		die("truth", path);
	for (size_t i = 0; i < FUZZ_ARRAY_SIZE(main_ips); i++)
		(void)ptd_truth_writer_add(&w, main_ips[i]);
	if (ptd_truth_writer_close(&w) < 0)
		die("truth", path);
	th.insns = FUZZ_ARRAY_SIZE(main_ips);
	th.pt_bytes = t.len;
	memset(&c, 0, sizeof(c));
	c.dir = (char *)dir;
	c.pid = 100;
	c.argv = argv;
	c.cpu.vendor = pcv_intel;
	c.cpu.family = 6;
	c.cpu.model = 94;
	c.cpu.stepping = 3;
	c.config.psb_period = 4096;
	c.config.tsc = true;
	c.config.cbr = 40;
	c.threads = &th;
	c.nthreads = 1;
	c.has_clock = true;
	c.clock.time_mult = 1u << 31;
	c.clock.time_shift = 31;
	c.has_wallref = true;
	c.wallref.perf_ns = 1;
	c.wallref.wall_ns = 1700000000000000000ull;
	c.exited = true;
	ptd_timeline_init(&c.tl);
	memset(&ev, 0, sizeof(ev));
	ev.start = BASE;
	ev.end = BASE + sizeof(fuzz_code);
	ev.pos = &pos;
	ev.npos = 1;
	if (prog) {
		ev.op = PTD_TL_MAP;
		ev.path = (char *)prog;
	} else {
		ev.op = PTD_TL_SNAPSHOT;
		ev.name = (char *)"[anon]";
		ev.file = (char *)"snap-0.bin";
		(void)snprintf(path, sizeof(path), "%s/snap-0.bin", dir);
		fuzz_write_file(path, fuzz_code, sizeof(fuzz_code));
	}
	if (ptd_timeline_add(&c.tl, &ev) < 0)
		die("timeline", NULL);
	/* gone at the syscall: decoding after it finds no code */
	memset(&ev, 0, sizeof(ev));
	ev.op = PTD_TL_UNMAP;
	ev.start = BASE + 0x80;
	ev.end = BASE + sizeof(fuzz_code);
	pos.pos = t.len - 8;
	ev.pos = &pos;
	ev.npos = 1;
	if (ptd_timeline_add(&c.tl, &ev) < 0)
		die("timeline", NULL);
	if (ptd_capture_save(&c, &d) < 0)
		die("capture", d.msg);
	ptd_timeline_fini(&c.tl);
}

static void capture_seeds(void)
{
	struct ptd_bundle_save_opts bo = PTD_BUNDLE_SAVE_OPTS_INIT;
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	char prog[600], map[600], snap[600], path[700], path2[700];

	(void)snprintf(prog, sizeof(prog), "%s/prog", work);
	fuzz_write_file(prog, fuzz_code, sizeof(fuzz_code));
	(void)snprintf(map, sizeof(map), "%s/cap-map", work);
	(void)snprintf(snap, sizeof(snap), "%s/cap-snap", work);
	make_capture(map, prog);
	make_capture(snap, NULL);
	emit_dir("capture", "map.cap", map);
	emit_dir("capture", "snapshot.cap", snap);
	(void)snprintf(path, sizeof(path), "%s/timeline.jsonl", map);
	emit_file("timeline", "map.jsonl", path);
	(void)snprintf(path, sizeof(path), "%s/timeline.jsonl", snap);
	emit_file("timeline", "snapshot.jsonl", path);

	/* bundles: the image copied, the image referenced */
	(void)snprintf(path, sizeof(path), "%s/bundle-copy", work);
	if (ptd_bundle_save(map, path, NULL, &d) < 0)
		die("bundle", d.msg);
	emit_dir("bundle", "copy.bundle", path);
	(void)snprintf(path2, sizeof(path2), "%s/ptd-bundle.json", path);
	emit_file("manifest", "copy.json", path2);
	(void)snprintf(path, sizeof(path), "%s/bundle-ref", work);
	bo.reference_images = true;
	if (ptd_bundle_save(map, path, &bo, &d) < 0)
		die("bundle", d.msg);
	emit_dir("bundle", "reference.bundle", path);
	(void)snprintf(path2, sizeof(path2), "%s/ptd-bundle.json", path);
	emit_file("manifest", "reference.json", path2);
	(void)snprintf(path, sizeof(path), "%s/bundle-snap", work);
	if (ptd_bundle_save(snap, path, NULL, &d) < 0)
		die("bundle", d.msg);
	emit_dir("bundle", "snapshot.bundle", path);

	/* the snapshot capture as an LLDB bundle and as perf.data */
	if (ptd_capture_load(snap, &c, &d) < 0)
		die("capture", d.msg);
	(void)snprintf(path, sizeof(path), "%s/lldb", work);
	if (ptd_lldb_export_capture(&c, path, &d) < 0)
		die("lldb", d.msg);
	emit_dir("lldb", "thread.lldb", path);
	(void)snprintf(path, sizeof(path), "%s/capture.data", work);
	if (ptd_perfdata_write_capture(&c, path, &d) < 0)
		die("perf.data", d.msg);
	emit_file("perfdata", "capture.data", path);
	ptd_capture_fini(&c);
}

/* An LLDB per-CPU bundle: one CPU, its context switches, the code as an
 * ELF module. */
static void lldb_percpu_seed(void)
{
	static const char json[] =
		"{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":\"GenuineIntel\","
		"\"family\":6,\"model\":94,\"stepping\":3},\"processes\":[{"
		"\"pid\":100,\"triple\":\"x86_64-unknown-linux-gnu\","
		"\"threads\":[{\"tid\":100}],\"modules\":[{\"systemPath\":"
		"\"/prog\",\"file\":\"modules/prog\",\"loadAddress\":"
		"\"0x400000\"}]}],\"cpus\":[{\"id\":0,\"iptTrace\":"
		"\"cpus/0.intelpt.trace\",\"contextSwitchTrace\":"
		"\"cpus/0.perf_context_switch_trace\"}],"
		"\"tscPerfZeroConversion\":{\"timeMult\":1,\"timeShift\":0,"
		"\"timeZero\":0}}";
	struct ptd_perf_switch sw = { false, false, true, 0, 0 };
	struct ptd_perf_sample_id s = { 0, 100, 100, 0x800, 0, 0, 0, 0 };
	struct ptd_diag d = { "" };
	struct ptd_buf cs = { 0 };
	char dir[600], path[700];
	uint8_t buf[64];
	struct trace t;

	(void)snprintf(dir, sizeof(dir), "%s/percpu", work);
	(void)snprintf(path, sizeof(path), "%s/cpus", dir);
	if (mkdir(dir, 0755) < 0 || mkdir(path, 0755) < 0)
		die("mkdir", path);
	(void)snprintf(path, sizeof(path), "%s/modules", dir);
	if (mkdir(path, 0755) < 0)
		die("mkdir", path);
	(void)snprintf(path, sizeof(path), "%s/trace.json", dir);
	fuzz_write_file(path, json, strlen(json));
	(void)snprintf(path, sizeof(path), "%s/modules/prog", dir);
	if (ptd_elfwrap_write(path, fuzz_code, sizeof(fuzz_code), BASE, &d) <
	    0)
		die("elfwrap", d.msg);
	tr_begin(&t);
	main_trace(&t, true);
	tr_end(&t);
	(void)snprintf(path, sizeof(path), "%s/cpus/0.intelpt.trace", dir);
	fuzz_write_file(path, t.buf, t.len);
	put(&cs, buf, ptd_perf_encode_switch(buf, sizeof(buf), &sw,
					     PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
					     &s));
	sw.out = true;
	s.time = 0x3000;
	put(&cs, buf, ptd_perf_encode_switch(buf, sizeof(buf), &sw,
					     PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
					     &s));
	(void)snprintf(path, sizeof(path),
		       "%s/cpus/0.perf_context_switch_trace", dir);
	fuzz_write_file(path, cs.data, cs.len);
	ptd_buf_fini(&cs);
	emit_dir("lldb", "cpu.lldb", dir);
	(void)snprintf(path, sizeof(path), "%s/trace.json", dir);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--pack")) {
		struct ptd_buf b = { 0 };

		pack_dir(argv[2], "", &b);
		fuzz_write_file(argv[3], b.data, b.len);
		ptd_buf_fini(&b);
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: gen-seeds OUTDIR\n"
				"       gen-seeds --pack DIR FILE\n");
		return 2;
	}
	out = argv[1];
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		die("mkdir", out);
	if (!mkdtemp(work))
		die("mkdtemp", work);
	pt_seeds();
	sideband_seeds();
	perfdata_seeds();
	capture_seeds();
	lldb_percpu_seed();
	(void)ptd_rm_rf(work);
	return 0;
}
