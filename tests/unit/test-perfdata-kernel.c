/* SPDX-License-Identifier: MIT */
/*
 * Kernel code in perf.data traces (perfdata/decode.h "Kernel code"): a
 * trace that goes from user code through a syscall into the kernel and a
 * module and back, recorded as `perf record --kcore` lays it out (the
 * perf.data in DIR/data, the kernel's code in DIR/kcore_dir/kcore), decodes
 * instruction by instruction on both decoder paths; a vmlinux found by
 * --kernel, by build-id or by release under a sysroot serves the kernel
 * but not its modules; a missing or foreign kernel image gives one error
 * record naming it; an exec while in the kernel keeps the kernel mapped;
 * broken kernel images are answered with the reason.
 *
 * No machine here has /proc/kcore or a vmlinux, so the kernel is made
 * here: ELF files with the code at kernel addresses, as perf's kcore copy
 * and a vmlinux have it.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "input/input.h"
#include "perfdata/decode.h"
#include "perfdata/read.h"
#include "e2e/run-cmd.h"
#include "unit/pdbuild.h"
#include "unit/ptenc.h"

#define KBASE 0xffffffff81000000ull	/* the kernel's text */
#define MBASE 0xffffffffc0000000ull	/* a module */
#define UBASE 0x400000ull		/* the user program */
#define RELEASE "9.9.9-ptdtest"

static char tmpdir[] = "/tmp/ptd-pdk-XXXXXX";

static const uint8_t kbid[20] = { 0x6b, 0x65, 0x72, 0x6e, 0x65, 0x6c, 1, 2 };
static const uint8_t otherbid[20] = { 0x0f, 0x0e, 0x0d };

/* User code: nop; syscall; nop; syscall. */
static const uint8_t user1[] = { 0x90, 0x0f, 0x05, 0x90, 0x0f, 0x05 };
/* The program an exec brings: at 0x400003 nop; nop; syscall. */
static const uint8_t user2[] = { 0xcc, 0xcc, 0xcc, 0x90, 0x90, 0x0f, 0x05 };
/* Kernel entry: nop; test rax,rax; je +1; nop; call MBASE; sysretq. */
static const uint8_t kcode[] = {
	0x90, 0x48, 0x85, 0xc0, 0x74, 0x01, 0x90,
	0xe8, 0xf4, 0xff, 0xff, 0x3e,	/* MBASE - (KBASE + 0xc) */
	0x48, 0x0f, 0x07,
};
/* Module: nop; ret. */
static const uint8_t mcode[] = { 0x90, 0xc3 };

/* What executes: user, kernel, module, kernel, user. */
static const uint64_t want_ips[] = {
	UBASE, UBASE + 1, KBASE, KBASE + 1, KBASE + 4, KBASE + 7,
	MBASE, MBASE + 1, KBASE + 0xc, UBASE + 3, UBASE + 4,
};
/* The same with the exec: user2 from 0x400003 on. */
static const uint64_t want_exec_ips[] = {
	UBASE, UBASE + 1, KBASE, KBASE + 1, KBASE + 4, KBASE + 7,
	MBASE, MBASE + 1, KBASE + 0xc, UBASE + 3, UBASE + 4, UBASE + 5,
};

static char path_user1[256], path_user2[256];

/* ---- files ------------------------------------------------------------ */

static void write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	REQUIRE(fd >= 0);
	REQUIRE(write(fd, p, n) == (ssize_t)n);
	REQUIRE(close(fd) == 0);
}

/* mkdir -p TMPDIR/@rel */
static void mkdirs(const char *rel)
{
	char cmd[1024];

	(void)snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", tmpdir, rel);
	REQUIRE(system(cmd) == 0);
}

struct seg {
	uint64_t vaddr;
	const uint8_t *code;
	size_t len;
	uint32_t flags;
};

/* An ELF of @type whose PT_LOADs hold @segs (each at its own page), with
 * a PT_NOTE GNU build-id if @bid. */
static void write_elf(const char *path, uint16_t type, const struct seg *segs,
		      size_t n, const uint8_t *bid)
{
	struct ptd_buf b = { 0 };
	Elf64_Ehdr eh;
	size_t nph = n + (bid ? 1 : 0), i;
	uint64_t data = 0x1000;

	memset(&eh, 0, sizeof(eh));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = type;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = (uint16_t)nph;
	put(&b, &eh, sizeof(eh));
	for (i = 0; i < n; i++) {
		Elf64_Phdr ph;

		memset(&ph, 0, sizeof(ph));
		ph.p_type = PT_LOAD;
		ph.p_flags = segs[i].flags;
		ph.p_offset = data + 0x1000 * i;
		ph.p_vaddr = ph.p_paddr = segs[i].vaddr;
		ph.p_filesz = ph.p_memsz = 0x1000;
		ph.p_align = 0x1000;
		put(&b, &ph, sizeof(ph));
	}
	if (bid) {
		Elf64_Phdr ph;

		memset(&ph, 0, sizeof(ph));
		ph.p_type = PT_NOTE;
		ph.p_offset = data + 0x1000 * n;
		ph.p_filesz = 12 + 4 + 20;
		ph.p_align = 4;
		put(&b, &ph, sizeof(ph));
	}
	while (b.len < data)
		put(&b, "", 1);
	for (i = 0; i < n; i++) {
		uint8_t page[0x1000];

		memset(page, 0xcc, sizeof(page));
		memcpy(page, segs[i].code, segs[i].len);
		put(&b, page, sizeof(page));
	}
	if (bid) {
		uint32_t nh[3] = { 4, 20, NT_GNU_BUILD_ID };

		put(&b, nh, sizeof(nh));
		put(&b, "GNU", 4);
		put(&b, bid, 20);
	}
	write_file(path, b.data, b.len);
	ptd_buf_fini(&b);
}

static void write_kcore(const char *path)
{
	const struct seg s[] = {
		{ KBASE, kcode, sizeof(kcode), PF_R | PF_W | PF_X },
		{ MBASE, mcode, sizeof(mcode), PF_R | PF_W | PF_X },
	};

	write_elf(path, ET_CORE, s, 2, NULL);
}

static void write_vmlinux(const char *path, const uint8_t *bid)
{
	const struct seg s[] = {
		{ KBASE, kcode, sizeof(kcode), PF_R | PF_X },
	};

	write_elf(path, ET_EXEC, s, 1, bid);
}

/* ---- the perf.data ---------------------------------------------------- */

/* The sample_id trailer (ST) of a kernel record: pid -1, tid 0, cpu 0,
 * the dummy event's id. */
static void put_kernel_sid(struct fb *f)
{
	put_u32(&f->recs, UINT32_MAX);
	put_u32(&f->recs, 0);
	put_u64(&f->recs, ++f->time);
	put_u32(&f->recs, 0);		/* cpu, res */
	put_u32(&f->recs, 0);
	put_u64(&f->recs, 2);
}

/* PERF_RECORD_MMAP of kernel code as perf synthesizes it: pid -1, the
 * kernel cpumode, no prot. */
static void fb_kmmap(struct fb *f, uint64_t start, uint64_t len,
		     uint64_t pgoff, const char *name)
{
	char fn[64] = { 0 };
	size_t fl = (strlen(name) + 1 + 7) & ~(size_t)7;
	struct perf_event_header h = { PERF_RECORD_MMAP,
				       PERF_RECORD_MISC_KERNEL,
				       (uint16_t)(8 + 8 + 24 + fl + 32) };

	REQUIRE(fl <= sizeof(fn));
	memcpy(fn, name, strlen(name));
	put(&f->recs, &h, sizeof(h));
	put_u32(&f->recs, UINT32_MAX);
	put_u32(&f->recs, 0);
	put_u64(&f->recs, start);
	put_u64(&f->recs, len);
	put_u64(&f->recs, pgoff);
	put(&f->recs, fn, fl);
	put_kernel_sid(f);
}

/* PERF_RECORD_TEXT_POKE as the kernel writes it: addr, old_len, new_len,
 * the old then the new bytes, padded to 8, the sample_id.  @bad: new_len
 * says more bytes than the record has. */
static void fb_text_poke(struct fb *f, uint64_t addr, const uint8_t *old,
			 const uint8_t *new_bytes, uint16_t len, bool bad)
{
	uint8_t body[64] = { 0 };
	size_t n = 4 + 2 * (size_t)len, padded = (n + 7) & ~(size_t)7;
	struct perf_event_header h = { PERF_RECORD_TEXT_POKE,
				       PERF_RECORD_MISC_KERNEL,
				       (uint16_t)(8 + 8 + padded + 32) };
	uint16_t nl = bad ? (uint16_t)(len + 40) : len;

	REQUIRE(padded <= sizeof(body));
	memcpy(body, &len, 2);
	memcpy(body + 2, &nl, 2);
	memcpy(body + 4, old, len);
	memcpy(body + 4 + len, new_bytes, len);
	put(&f->recs, &h, sizeof(h));
	put_u64(&f->recs, addr);
	put(&f->recs, body, padded);
	put_kernel_sid(f);
}

/* The trace: enabled at UBASE; the syscall enters the kernel (TIP), the
 * je is taken and the module's ret compressed (TNT 11), sysretq returns
 * (TIP), the second syscall ends tracing (TIP.PGD).  Cut after the
 * kernel entry (@ret_cut, 8-aligned) for the exec variant.  @poked: the
 * je was patched into a jmp (no TNT bit for it). */
static void make_trace(struct trace *t, size_t *ret_cut, bool poked)
{
	tr_begin(t);
	(void)psb_plus(t, false, 0, UBASE);
	ippkt(t, ppt_tip, KBASE);
	pad8(t);
	*ret_cut = t->len;
	tnt(t, poked ? "1" : "11");
	ippkt(t, ppt_tip, UBASE + 3);
	ippkt(t, ppt_tip_pgd, 0);
	pad8(t);
	tr_end(t);
}

struct pdopts {
	bool exclude_kernel;
	bool exec;		/* an exec to user2 while in the kernel */
	bool modules;		/* map the module */
	bool poke;		/* TEXT_POKE: the je at KBASE + 4 is a jmp */
	bool bad_poke;		/* a TEXT_POKE cut short */
};

static void make_perfdata(struct ptd_buf *out, const struct pdopts *po)
{
	struct trace t;
	size_t cut;
	struct fb f;

	make_trace(&t, &cut, po->poke);
	fb_init(&f);
	f.attr[0].exclude_kernel = po->exclude_kernel;
	fb_ptinfo(&f, false, NULL);
	fb_buildid(fb_feat(&f, PTD_PERFDATA_HEADER_BUILD_ID),
		   "[kernel.kallsyms]", kbid);
	put_string(fb_feat(&f, PTD_PERFDATA_HEADER_OSRELEASE), RELEASE);
	fb_comm(&f, 100, 100, true, "prog");
	/* perf's length reaches past the text, as its map end does */
	fb_kmmap(&f, KBASE, 0x1209988, KBASE, "[kernel.kallsyms]_text");
	if (po->modules)
		fb_kmmap(&f, MBASE, 0x1000, 0, "[mymod]");
	if (po->poke || po->bad_poke) {
		static const uint8_t je[2] = { 0x74, 0x01 }, jmp[2] = {
			0xeb, 0x01 };

		fb_text_poke(&f, KBASE + 4, je, jmp, 2, po->bad_poke);
	}
	fb_mmap2(&f, 100, UBASE, 0x1000, 0, path_user1, NULL);
	fb_itrace(&f, 100, 100, UINT32_MAX);
	if (po->exec) {
		fb_auxtrace(&f, 100, UINT32_MAX, 0, t.buf, cut);
		fb_comm(&f, 100, 100, true, "prog2");
		fb_mmap2(&f, 100, UBASE, 0x1000, 0, path_user2, NULL);
		fb_auxtrace(&f, 100, UINT32_MAX, cut, t.buf + cut,
			    t.len - cut);
	} else {
		fb_auxtrace(&f, 100, UINT32_MAX, 0, t.buf, t.len);
	}
	fb_file(&f, out);
	fb_free(&f);
}

/* ---- decoding --------------------------------------------------------- */

struct got {
	uint64_t ip[64];
	char mod[64][64];
	size_t n;
	unsigned noimage, errors;
	char noimage_msg[1024];
	char source[32];
};

static int got_info(void *ctx, const struct ptd_input_info *in)
{
	struct got *g = ctx;

	(void)snprintf(g->source, sizeof(g->source), "%s", in->source);
	return 0;
}

static int got_record(void *ctx, const struct ptd_record *r)
{
	struct got *g = ctx;

	if (r->type == PTD_REC_INSN && g->n < 64) {
		(void)snprintf(g->mod[g->n], sizeof(g->mod[0]), "%s",
			       r->u.insn.module);
		g->ip[g->n++] = r->u.insn.ip;
	}
	if (r->type == PTD_REC_ERROR) {
		g->errors++;
		if (r->u.error.ptd_code &&
		    r->u.error.code == -PTD_ENOIMAGE) {
			g->noimage++;
			if (!g->noimage_msg[0])
				(void)snprintf(g->noimage_msg,
					       sizeof(g->noimage_msg), "%s",
					       r->u.error.context);
		}
	}
	return 0;
}

/* Decode @path into @g; returns the decode's result. */
static int decode(const char *path, const struct ptd_input_opts *o,
		  struct got *g, struct ptd_diag *diag)
{
	struct ptd_input_sink sink = { got_info, got_record, NULL, g, NULL };

	memset(g, 0, sizeof(*g));
	memset(diag, 0, sizeof(*diag));
	return ptd_input_decode(path, o, &sink, NULL, diag);
}

static void opts(struct ptd_input_opts *o, enum ptd_decode_path p)
{
	memset(o, 0, sizeof(*o));
	o->decode.path = p;
	o->decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
}

static void check_ips(const struct got *g, const uint64_t *want, size_t n)
{
	size_t i;

	CHECK_EQ_INT(g->n, n);
	for (i = 0; i < n && i < g->n; i++)
		if (g->ip[i] != want[i]) {
			CHECK_FAIL_("instruction %zu: expected 0x%" PRIx64
				    ", got 0x%" PRIx64, i, want[i], g->ip[i]);
			return;
		}
}

static const char *const paths[] = { "insn", "block" };

/* The directory perf record --kcore writes, TMPDIR/@name: the perf.data of
 * @po in "data", the kernel in "kcore_dir/kcore". */
static void make_kcore_dir(const char *name, const struct pdopts *po,
			   char *dir, size_t dirsz)
{
	char rel[128], file[600];
	struct ptd_buf pd;

	(void)snprintf(rel, sizeof(rel), "%s/kcore_dir", name);
	mkdirs(rel);
	(void)snprintf(dir, dirsz, "%s/%s", tmpdir, name);
	make_perfdata(&pd, po);
	(void)snprintf(file, sizeof(file), "%s/data", dir);
	write_file(file, pd.data, pd.len);
	(void)snprintf(file, sizeof(file), "%s/kcore_dir/kcore", dir);
	write_kcore(file);
	ptd_buf_fini(&pd);
}

/* Decode @dir on both paths: exactly @want (@n instructions), no error,
 * and the module of instruction @mi[k] is @mods[k] (@nm of them). */
static void check_dir(const char *dir, const uint64_t *want, size_t n,
		      const size_t *mi, const char *const *mods, size_t nm)
{
	struct ptd_input_opts o;
	struct ptd_diag diag;
	struct got g;

	for (int p = 0; p < 2; p++) {
		fprintf(stderr, "  %s path\n", paths[p]);
		opts(&o, p ? PTD_PATH_BLOCK : PTD_PATH_INSN);
		CHECK_EQ_INT(decode(dir, &o, &g, &diag), 0);
		CHECK_EQ_STR(g.source, "perf.data");
		check_ips(&g, want, n);
		CHECK_EQ_INT(g.errors, 0);
		for (size_t k = 0; g.n == n && k < nm; k++)
			CHECK_EQ_STR(g.mod[mi[k]], mods[k]);
	}
}

/* A perf record --kcore directory decodes to every instruction, each named
 * by its module, on both paths. */
static void test_kcore_dir(void)
{
	const struct pdopts po = { .modules = true };
	const size_t mi[] = { 0, 2, 6, 8, 9 };
	const char *const mods[] = { path_user1, "[kernel.kallsyms]",
				     "[mymod]", "[kernel.kallsyms]",
				     path_user1 };
	char dir[512];

	make_kcore_dir("kc.data", &po, dir, sizeof(dir));
	check_dir(dir, want_ips, PTD_ARRAY_SIZE(want_ips), mi, mods,
		  PTD_ARRAY_SIZE(mi));
}

/* The data file alone: the kernel is nowhere; one error record says so
 * (naming it, its build-id and what to do), the user code before the
 * syscall is decoded. */
static void test_no_kernel(void)
{
	struct pdopts po = { .modules = true };
	char file[512];
	struct ptd_input_opts o;
	struct ptd_diag diag;
	struct ptd_buf pd;
	struct got g;

	make_perfdata(&pd, &po);
	(void)snprintf(file, sizeof(file), "%s/alone.data", tmpdir);
	write_file(file, pd.data, pd.len);
	opts(&o, PTD_PATH_INSN);
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_EQ_INT(g.noimage, 1);
	fprintf(stderr, "  said: %s\n", g.noimage_msg);
	CHECK_CONTAINS(g.noimage_msg, "[kernel.kallsyms]");
	CHECK_CONTAINS(g.noimage_msg, "6b65726e656c0102");
	CHECK_CONTAINS(g.noimage_msg, "perf record --kcore");
	CHECK_CONTAINS(g.noimage_msg, "--kernel");
	CHECK(g.errors >= 2);	/* and the decode stops at the kernel */
	CHECK(g.n >= 2);
	if (g.n >= 2) {
		CHECK_EQ_U64(g.ip[0], UBASE);
		CHECK_EQ_U64(g.ip[1], UBASE + 1);
	}
	for (size_t i = 0; i < g.n; i++)
		CHECK((int64_t)g.ip[i] > 0);

	/* A user-only recording: the kernel maps perf always writes do not
	 * matter and nothing is said about them. */
	po.exclude_kernel = true;
	ptd_buf_fini(&pd);
	make_perfdata(&pd, &po);
	write_file(file, pd.data, pd.len);
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_EQ_INT(g.noimage, 0);
	ptd_buf_fini(&pd);
}

/* A vmlinux: given (--kernel), by build-id, or by release under the
 * sysroot; it has the kernel, not the module (one error record says so);
 * one of another build is refused saying whose it is. */
static void test_vmlinux(void)
{
	struct pdopts po = { .modules = true };
	char file[512], vml[512], other[512], dir[512];
	struct ptd_input_opts o;
	struct ptd_diag diag;
	struct ptd_buf pd;
	struct got g;

	make_perfdata(&pd, &po);
	(void)snprintf(file, sizeof(file), "%s/vm.data", tmpdir);
	write_file(file, pd.data, pd.len);
	(void)snprintf(vml, sizeof(vml), "%s/vmlinux", tmpdir);
	write_vmlinux(vml, kbid);
	(void)snprintf(other, sizeof(other), "%s/vmlinux-other", tmpdir);
	write_vmlinux(other, otherbid);

	opts(&o, PTD_PATH_BLOCK);
	o.kernel = vml;
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	/* user, kernel up to the call into the module */
	check_ips(&g, want_ips, 6);
	CHECK_EQ_INT(g.noimage, 1);
	fprintf(stderr, "  said: %s\n", g.noimage_msg);
	CHECK_CONTAINS(g.noimage_msg, "[mymod]");
	CHECK_CONTAINS(g.noimage_msg, "kcore");

	/* Without the module mapping, the vmlinux is all it takes. */
	po.modules = false;
	ptd_buf_fini(&pd);
	make_perfdata(&pd, &po);
	write_file(file, pd.data, pd.len);
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_EQ_INT(g.noimage, 0);
	CHECK_EQ_INT(g.n, 6);

	/* Another kernel's vmlinux is refused by build-id. */
	o.kernel = other;
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_EQ_INT(g.noimage, 1);
	fprintf(stderr, "  said: %s\n", g.noimage_msg);
	CHECK_CONTAINS(g.noimage_msg, "another kernel");
	CHECK_CONTAINS(g.noimage_msg, "0f0e0d");
	CHECK_EQ_INT(g.n, 2);

	/* By build-id: DIR/.build-id/6b/65...../elf */
	o.kernel = NULL;
	mkdirs("bid/.build-id/6b/65726e656c0102000000000000000000000000");
	(void)snprintf(dir, sizeof(dir), "%s/bid/.build-id/6b/"
		       "65726e656c0102000000000000000000000000/elf", tmpdir);
	write_vmlinux(dir, kbid);
	(void)snprintf(dir, sizeof(dir), "%s/bid", tmpdir);
	o.buildid_dir = dir;
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_EQ_INT(g.noimage, 0);
	CHECK_EQ_INT(g.n, 6);

	/* By release, under the sysroot: /usr/lib/debug/boot/vmlinux-R */
	o.buildid_dir = tmpdir;	/* no cache there */
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_EQ_INT(g.noimage, 1);
	mkdirs("root/usr/lib/debug/boot");
	(void)snprintf(dir, sizeof(dir), "%s/root/usr/lib/debug/boot/"
		       "vmlinux-" RELEASE, tmpdir);
	write_vmlinux(dir, kbid);
	(void)snprintf(dir, sizeof(dir), "%s/root", tmpdir);
	o.sysroot = dir;
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_EQ_INT(g.noimage, 0);
	CHECK_EQ_INT(g.n, 6);
	ptd_buf_fini(&pd);
}

/* An exec while the thread is in the kernel: the new program's code is in
 * place when the syscall returns, and the kernel's stays mapped. */
static void test_exec_in_kernel(void)
{
	const struct pdopts po = { .modules = true, .exec = true };
	const size_t mi[] = { 0, 7, 9 };
	const char *const mods[] = { path_user1, "[mymod]", path_user2 };
	char dir[512];

	make_kcore_dir("exec.data", &po, dir, sizeof(dir));
	check_dir(dir, want_exec_ips, PTD_ARRAY_SIZE(want_exec_ips), mi, mods,
		  PTD_ARRAY_SIZE(mi));
}

/* A TEXT_POKE changes the kernel's code from where it is read: the je
 * patched into a jmp needs no TNT bit, and its instruction is named by
 * the poke; a TEXT_POKE cut short is refused naming it. */
static void test_text_poke(void)
{
	const struct pdopts po = { .modules = true, .poke = true };
	const struct pdopts bad = { .modules = true, .bad_poke = true };
	const size_t mi[] = { 2, 4, 5, 6 };
	const char *const mods[] = { "[kernel.kallsyms]", "[text_poke]",
				     "[kernel.kallsyms]", "[mymod]" };
	char dir[512];
	struct ptd_input_opts o;
	struct ptd_diag diag;
	struct got g;

	make_kcore_dir("poke.data", &po, dir, sizeof(dir));
	check_dir(dir, want_ips, PTD_ARRAY_SIZE(want_ips), mi, mods,
		  PTD_ARRAY_SIZE(mi));
	make_kcore_dir("badpoke.data", &bad, dir, sizeof(dir));
	opts(&o, PTD_PATH_INSN);
	CHECK_EQ_INT(decode(dir, &o, &g, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "TEXT_POKE");
	CHECK_CONTAINS(diag.msg, "run past the record end");
}

/* Broken kernel images: each is answered with the reason in the error
 * record, never a crash; a --threads directory is refused. */
static void test_damage(void)
{
	struct pdopts po = { 0 };
	char file[512], k[512], cmd[1200];
	struct ptd_input_opts o;
	struct ptd_diag diag;
	struct ptd_buf pd;
	struct got g;
	uint32_t seed = 1;

	make_perfdata(&pd, &po);
	(void)snprintf(file, sizeof(file), "%s/dmg.data", tmpdir);
	write_file(file, pd.data, pd.len);
	(void)snprintf(k, sizeof(k), "%s/kcore-bad", tmpdir);
	opts(&o, PTD_PATH_INSN);
	o.kernel = k;

	write_file(k, "not an elf", 10);
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_CONTAINS(g.noimage_msg, "is not an ELF file");

	write_kcore(k);
	REQUIRE(truncate(k, 0x1800) == 0);	/* the module's segment cut */
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_CONTAINS(g.noimage_msg, "lies outside the file");

	(void)unlink(k);
	CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	CHECK_CONTAINS(g.noimage_msg, "kcore-bad");

	/* random damage to the ELF headers */
	for (int i = 0; i < 300; i++) {
		uint8_t buf[0x3000];
		int fd;

		write_kcore(k);
		fd = open(k, O_RDWR | O_CLOEXEC);
		REQUIRE(fd >= 0);
		REQUIRE(read(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
		for (int n = 0; n < 1 + i % 4; n++) {
			seed = seed * 1103515245u + 12345u;
			buf[(seed >> 8) % 0x100] = (uint8_t)(seed >> 20);
		}
		REQUIRE(pwrite(fd, buf, sizeof(buf), 0) ==
			(ssize_t)sizeof(buf));
		REQUIRE(close(fd) == 0);
		CHECK_EQ_INT(decode(file, &o, &g, &diag), 0);
	}

	/* perf record --threads: data.N files this reader would miss */
	(void)snprintf(cmd, sizeof(cmd), "mkdir -p %s/thr.data && cp %s "
		       "%s/thr.data/data && cp %s %s/thr.data/data.0", tmpdir,
		       file, tmpdir, file, tmpdir);
	REQUIRE(system(cmd) == 0);
	(void)snprintf(file, sizeof(file), "%s/thr.data", tmpdir);
	o.kernel = NULL;
	CHECK_EQ_INT(decode(file, &o, &g, &diag), -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "--threads");

	/* a directory whose "data" is no perf.data */
	(void)snprintf(cmd, sizeof(cmd), "mkdir -p %s/nodata.data && echo x "
		       "> %s/nodata.data/data", tmpdir, tmpdir);
	REQUIRE(system(cmd) == 0);
	(void)snprintf(file, sizeof(file), "%s/nodata.data", tmpdir);
	CHECK_EQ_INT(decode(file, &o, &g, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "nodata.data/data");
	ptd_buf_fini(&pd);
}

/* Random damage to perf.data files with kernel and module mappings, a
 * TEXT_POKE and an exec in the kernel, decoded with the kernel at hand on
 * both paths: each is parsed and decoded, or refused with a message;
 * never a crash (the suite's second run has ASan and UBSan). */
static void test_fuzz(void)
{
	static const struct pdopts variants[] = {
		{ .modules = true, .poke = true },
		{ .modules = true, .exec = true },
	};
	struct ptd_buf good[2];
	uint32_t seed = 777;
	unsigned parsed = 0, decoded = 0, i, n = 2000;
	char k[512];

	for (i = 0; i < 2; i++)
		make_perfdata(&good[i], &variants[i]);
	(void)snprintf(k, sizeof(k), "%s/fuzz-kcore", tmpdir);
	write_kcore(k);
	for (i = 0; i < n; i++) {
		struct ptd_perfdata *pd = NULL;
		struct ptd_diag diag = { "" };
		struct ptd_buf b = { 0 };
		struct ptd_input_opts o;
		struct got g;
		struct ptd_input_sink sink = { got_info, got_record, NULL, &g,
					       NULL };
		int r;

		put(&b, good[i % 2].data, good[i % 2].len);
		pd_mutate(&b, &seed);
		r = ptd_perfdata_parse(b.data, b.len, "fuzz", &pd, &diag);
		if (r == 0) {
			parsed++;
			opts(&o, i % 4 < 2 ? PTD_PATH_INSN : PTD_PATH_BLOCK);
			o.kernel = k;
			memset(&g, 0, sizeof(g));
			r = ptd_perfdata_decode_parsed(pd, &o, &sink, NULL,
						       &diag);
			decoded += r == 0;
		}
		if (r < 0 && r != -ENOMEM && !diag.msg[0])
			CHECK_FAIL_("mutation %u: refused (%s) without a "
				    "message", i, ptd_strerror(r));
		ptd_perfdata_free(pd);
		ptd_buf_fini(&b);
	}
	fprintf(stderr, "  fuzz: %u of %u mutations parsed, %u decoded\n",
		parsed, n, decoded);
	CHECK(decoded > 0);
	ptd_buf_fini(&good[0]);
	ptd_buf_fini(&good[1]);
}

/* Through ptctl: a --kcore directory as TRACE, and --kernel FILE. */
static void test_ptctl(void)
{
	const char *root = getenv("PTD_BUILD_ROOT");
	struct pdopts po = { 0 };
	char exe[512], dir[512], vml[512], file[600];
	struct ptd_buf pd;
	struct run r;

	if (!root) {
		fprintf(stderr, "  skipped: PTD_BUILD_ROOT is not set (run "
				"through meson test)\n");
		return;
	}
	(void)snprintf(exe, sizeof(exe), "%s/daemon/ptctl", root);
	(void)snprintf(dir, sizeof(dir), "%s/kc.data", tmpdir);
	{
		const char *args[] = { "decode", "--path", "insn", dir, NULL };

		r = run_cmd(exe, args, tmpdir);
		CHECK_EQ_INT(r.status, 0);
		CHECK_CONTAINS(r.out, "\"module\":\"[kernel.kallsyms]\"");
		CHECK_CONTAINS(r.out, "\"module\":\"[mymod]\"");
		run_free(&r);
	}
	make_perfdata(&pd, &po);
	(void)snprintf(file, sizeof(file), "%s/ptctl.data", tmpdir);
	write_file(file, pd.data, pd.len);
	ptd_buf_fini(&pd);
	(void)snprintf(vml, sizeof(vml), "%s/vmlinux", tmpdir);
	{
		const char *args[] = { "decode", "--kernel", vml, file, NULL };

		/* the kernel decodes; the module it calls is not there (a
		 * decode error record: exit 3) */
		r = run_cmd(exe, args, tmpdir);
		CHECK_EQ_INT(r.status, 3);
		CHECK_CONTAINS(r.out, "\"module\":\"[kernel.kallsyms]\"");
		CHECK(!strstr(r.out, "no kcore copy or vmlinux found"));
		run_free(&r);
	}
	{
		const char *args[] = { "decode", file, NULL };

		/* exit 3: decoded with error records */
		r = run_cmd(exe, args, tmpdir);
		CHECK_EQ_INT(r.status, 3);
		CHECK_CONTAINS(r.out, "no kcore copy or vmlinux found");
		run_free(&r);
	}
}

int main(void)
{
	char cmd[256];
	uint8_t page[0x1000];

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	(void)snprintf(path_user1, sizeof(path_user1), "%s/user1", tmpdir);
	(void)snprintf(path_user2, sizeof(path_user2), "%s/user2", tmpdir);
	memset(page, 0xcc, sizeof(page));
	memcpy(page, user1, sizeof(user1));
	write_file(path_user1, page, sizeof(page));
	memset(page, 0xcc, sizeof(page));
	memcpy(page, user2, sizeof(user2));
	write_file(path_user2, page, sizeof(page));
	/* The build-id caches of whoever runs the tests must not help. */
	if (setenv("HOME", tmpdir, 1) < 0)
		return 1;

	RUN(test_kcore_dir);
	RUN(test_no_kernel);
	RUN(test_vmlinux);
	RUN(test_exec_in_kernel);
	RUN(test_text_poke);
	RUN(test_damage);
	RUN(test_fuzz);
	RUN(test_ptctl);

	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	(void)system(cmd);
	return check_done();
}
