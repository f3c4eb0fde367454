// SPDX-License-Identifier: MIT
/*
 * The perf.data writer: write captures (a synthetic one with known content,
 * and a real one made with the software source) and parse the file back
 * with perfdata/format.h's structs: header, sections inside the file, attr
 * entries and ids, features, every record well-formed (strictly parsed by
 * perf/sideband.h), records in the order perf needs, the AUXTRACE data
 * equal to the capture's PT, the auxtrace index pointing at the AUXTRACE
 * records.  Errors: bad arguments, an unwritable path, missing or changed
 * capture files: a clear message and no file (nor temporary) left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "perf/sideband.h"
#include "perfdata/format.h"
#include "perfdata/read.h"
#include "perfdata/write.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static char workdir[256];

static void put_file(const char *dir, const char *name, const void *p,
		     size_t n)
{
	char path[512];

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (ptd_file_write_atomic(path, p, n) < 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

static const uint8_t pt100[13] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
				   2, 0x82, 2, 0x82, 0 };
static const uint8_t pt101[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
				   2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
static const uint8_t snapbytes[8] = { 0x90, 0x90, 0x90, 0xc3 };

static void add_ev(struct ptd_timeline *tl, enum ptd_tl_op op, uint64_t start,
		   uint64_t end, const char *path, const char *name,
		   const char *file)
{
	struct ptd_tl_event e;

	memset(&e, 0, sizeof(e));
	e.op = op;
	e.start = start;
	e.end = end;
	e.path = (char *)path;
	e.name = (char *)name;
	e.file = (char *)file;
	if (ptd_timeline_add(tl, &e) < 0)
		exit(1);
}

/* A synthetic capture in @tag: threads 100 (from the start) and 101
 * (after event 1), a MAP, a snapshot, an UNMAP and another MAP.  Only the
 * fields the writer reads are set. */
static void make_synthetic(const char *tag, struct ptd_capture *c)
{
	static char *argv[] = { "/usr/bin/prog-synth", NULL };
	char dir[512];

	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, tag);
	if (mkdir(dir, 0700) != 0)
		exit(1);
	put_file(dir, "pt-100.bin", pt100, sizeof(pt100));
	put_file(dir, "pt-101.bin", pt101, sizeof(pt101));
	put_file(dir, "snap-1.bin", snapbytes, sizeof(snapbytes));
	memset(c, 0, sizeof(*c));
	c->dir = strdup(dir);
	c->pid = 100;
	c->argv = argv;
	c->cpu.vendor = pcv_intel;
	c->cpu.family = 6;
	c->cpu.model = 85;
	c->cpu.stepping = 4;
	c->config.noretcomp = true;
	c->config.tsc = true;
	c->nthreads = 2;
	c->threads = calloc(2, sizeof(*c->threads));
	if (!c->dir || !c->threads)
		exit(1);
	c->threads[0] = (struct ptd_capture_thread){
		100, 0, "pt-100.bin", "truth-100.bin", 0, sizeof(pt100) };
	c->threads[1] = (struct ptd_capture_thread){
		101, 2, "pt-101.bin", "truth-101.bin", 0, sizeof(pt101) };
	ptd_timeline_init(&c->tl);
	add_ev(&c->tl, PTD_TL_MAP, 0x400000, 0x401000, "/usr/bin/prog-synth",
	       NULL, NULL);
	add_ev(&c->tl, PTD_TL_SNAPSHOT, 0x7000000, 0x7001000, NULL, "[anon]",
	       "snap-1.bin");
	add_ev(&c->tl, PTD_TL_UNMAP, 0x7000000, 0x7001000, NULL, NULL, NULL);
	add_ev(&c->tl, PTD_TL_MAP, 0x7f0000000, 0x7f0002000,
	       "/usr/lib/x86_64-linux-gnu/libc.so.6", NULL, NULL);
	c->exited = true;
}

/* Only what make_synthetic allocated (argv and thread names are static). */
static void free_synthetic(struct ptd_capture *c)
{
	free(c->dir);
	free(c->threads);
	ptd_timeline_fini(&c->tl);
}

/* ---- reading the file back ---- */

struct parsed {
	uint32_t pid;		/* the capture's, in every sample_id */
	uint8_t *data;
	size_t len;
	struct ptd_perfdata_file_header h;
	struct perf_event_attr attr[2];
	uint64_t ids[2];
	/* records in file order */
	uint32_t types[64];
	uint32_t tids[64];	/* tid of the record (sample_id or body) */
	uint64_t offs[64];	/* file offsets */
	size_t nrec;
	uint64_t aux_sizes[8];
	size_t naux;
	unsigned mmap2;
	char mmap_names[8][256];
	const char *filter;	/* the filter text AUXTRACE_INFO must carry */
};

static bool inside(const struct parsed *p, uint64_t off, uint64_t size)
{
	return off <= p->len && size <= p->len - off;
}

/* Check the header and attrs; fills p->h, p->attr, p->ids. */
static void check_header(struct parsed *p)
{
	struct ptd_perfdata_file_attr fa;

	REQUIRE(p->len >= sizeof(p->h));
	memcpy(&p->h, p->data, sizeof(p->h));
	CHECK_EQ_U64(p->h.magic, PTD_PERFDATA_MAGIC);
	CHECK(!memcmp(p->data, "PERFILE2", 8));
	CHECK_EQ_U64(p->h.size, 104);
	CHECK_EQ_U64(p->h.attr_size, sizeof(fa));
	CHECK_EQ_U64(p->h.attrs.size, 2 * sizeof(fa));
	REQUIRE(inside(p, p->h.attrs.offset, p->h.attrs.size));
	REQUIRE(inside(p, p->h.data.offset, p->h.data.size));
	CHECK(p->h.data.offset % 8 == 0);
	CHECK(p->h.data.offset >= p->h.attrs.offset + p->h.attrs.size);
	for (size_t i = 0; i < 2; i++) {
		memcpy(&fa, p->data + p->h.attrs.offset + i * sizeof(fa),
		       sizeof(fa));
		memset(&p->attr[i], 0, sizeof(p->attr[i]));
		memcpy(&p->attr[i], fa.attr, sizeof(fa.attr));
		CHECK_EQ_INT(p->attr[i].size, PTD_PERFDATA_ATTR_SIZE);
		CHECK_EQ_INT(p->attr[i].sample_id_all, 1);
		CHECK_EQ_U64(p->attr[i].sample_type & PTD_SIDEBAND_SAMPLE_TYPE,
			     PTD_SIDEBAND_SAMPLE_TYPE);
		CHECK_EQ_U64(fa.ids.size, 8);
		REQUIRE(inside(p, fa.ids.offset, fa.ids.size));
		memcpy(&p->ids[i], p->data + fa.ids.offset, 8);
	}
	CHECK_EQ_U64(p->ids[0], PTD_PERFDATA_PT_ID);
	CHECK_EQ_U64(p->ids[1], PTD_PERFDATA_DUMMY_ID);
	CHECK(p->attr[0].type >= PERF_TYPE_MAX);
	CHECK_EQ_INT(p->attr[0].exclude_kernel, 1);
	CHECK_EQ_INT(p->attr[1].type, PERF_TYPE_SOFTWARE);
	CHECK_EQ_U64(p->attr[1].config, PERF_COUNT_SW_DUMMY);
	CHECK_EQ_INT(p->attr[1].mmap2, 1);
	CHECK_EQ_INT(p->attr[1].comm, 1);
	CHECK_EQ_INT(p->attr[1].task, 1);
}

static uint64_t priv_word(const uint8_t *rec, unsigned i)
{
	uint64_t v;

	memcpy(&v, rec + sizeof(struct ptd_perfdata_auxtrace_info) + 8 * i, 8);
	return v;
}

static void check_auxtrace_info(struct parsed *p, const uint8_t *rec,
				uint16_t size)
{
	struct ptd_perfdata_auxtrace_info ai;

	memcpy(&ai, rec, sizeof(ai));
	CHECK_EQ_INT(ai.type, PTD_PERFDATA_AUXTRACE_INTEL_PT);
	size_t flen = p->filter ? strlen(p->filter) : 0;

	/* the filter text follows the words, NUL-terminated, 8-padded */
	CHECK_EQ_INT(size, 16 + 8 * PTD_PERFDATA_INTEL_PT_PRIV_MAX +
				   (flen ? (flen + 1 + 7) / 8 * 8 : 0));
	CHECK_EQ_U64(priv_word(rec, PTD_PERFDATA_INTEL_PT_PMU_TYPE),
		     p->attr[0].type);
	/* timeless: no time conversion */
	CHECK_EQ_U64(priv_word(rec, PTD_PERFDATA_INTEL_PT_CAP_USER_TIME_ZERO),
		     0);
	CHECK_EQ_U64(priv_word(rec, PTD_PERFDATA_INTEL_PT_PER_CPU_MMAPS), 0);
	CHECK_EQ_U64(priv_word(rec, PTD_PERFDATA_INTEL_PT_FILTER_STR_LEN),
		     flen);
	/* the option bits the PMU has for tsc/noretcomp: one bit each */
	CHECK(__builtin_popcountll(
		      priv_word(rec, PTD_PERFDATA_INTEL_PT_TSC_BIT)) == 1);
	CHECK(__builtin_popcountll(
		      priv_word(rec, PTD_PERFDATA_INTEL_PT_NORETCOMP_BIT)) == 1);
	/* mtc_period's word is its field's mask, as perf writes it (perf
	 * finds the field's shift from the mask's lowest bit) */
	CHECK_EQ_U64(priv_word(rec, PTD_PERFDATA_INTEL_PT_MTC_FREQ_BITS),
		     0xfull << 14);
}

/* Walk the data section: every record strictly parsed with the event's
 * sample_type; AUXTRACE data compared with @pts[idx]: a thread's trace may
 * come in several pieces (each where the image changed), each the
 * kernel's AUX record saying how many bytes of trace follow, then an
 * AUXTRACE record at the AUX offset the last one ended at, padded with
 * zeros to 8 bytes; in all, every byte of the thread's trace once. */
static void walk_records(struct parsed *p, const uint8_t *const *pts,
			 const size_t *ptlens, size_t npts)
{
	uint64_t off = p->h.data.offset, end = off + p->h.data.size;
	struct ptd_diag diag = { "" };
	uint64_t done[8] = { 0 };
	struct ptd_perfdata_auxtrace a;
	bool have_aux = false;		/* an AUX record waits for its data */
	uint64_t aux_off = 0, aux_n = 0;

	REQUIRE(npts <= PTD_ARRAY_SIZE(done));
	while (off < end) {
		struct perf_event_header hdr;
		const uint8_t *rec = p->data + off;

		REQUIRE(end - off >= sizeof(hdr));
		memcpy(&hdr, rec, sizeof(hdr));
		REQUIRE(hdr.size >= 8 && hdr.size % 8 == 0);
		REQUIRE(hdr.size <= end - off);
		REQUIRE(p->nrec < PTD_ARRAY_SIZE(p->types));
		p->types[p->nrec] = hdr.type;
		p->offs[p->nrec] = off;
		p->tids[p->nrec] = 0;
		if (hdr.type == PTD_PERFDATA_RECORD_AUXTRACE_INFO) {
			check_auxtrace_info(p, rec, hdr.size);
		} else if (hdr.type == PTD_PERFDATA_RECORD_AUXTRACE) {
			static const uint8_t zero[8];
			const uint8_t *data = rec + sizeof(a);

			REQUIRE(have_aux);	/* its AUX record came first */
			have_aux = false;
			REQUIRE(hdr.size == sizeof(a));
			memcpy(&a, rec, sizeof(a));
			REQUIRE(a.idx < npts);
			CHECK_EQ_U64(a.offset, done[a.idx]);
			CHECK_EQ_U64(a.offset, aux_off);
			CHECK(a.size % 8 == 0 && a.size > 0);
			CHECK_EQ_INT(a.cpu, UINT32_MAX);
			REQUIRE(inside(p, off + sizeof(a), a.size));
			REQUIRE(aux_n <= a.size && a.size - aux_n < 8);
			REQUIRE(a.offset + aux_n <= ptlens[a.idx]);
			CHECK(!memcmp(data, pts[a.idx] + a.offset, aux_n));
			CHECK(!memcmp(data + aux_n, zero, a.size - aux_n));
			done[a.idx] = a.offset + aux_n;
			p->tids[p->nrec] = a.tid;
			off += a.size;	/* data not counted in header.size */
		} else {
			struct ptd_perf_event e;
			uint64_t st = p->attr[1].sample_type;
			int r = ptd_perf_event_parse(
				(const struct perf_event_header *)rec, st, true,
				&e, &diag);

			CHECK_EQ_INT(r, 0);
			if (r < 0) {
				fprintf(stderr, "  %s\n", diag.msg);
				return;
			}
			CHECK(!e.other);
			CHECK_EQ_U64(e.sid.pid, p->pid);
			p->tids[p->nrec] = e.sid.tid;
			/* identifier names the event that writes the type */
			if (hdr.type == PERF_RECORD_ITRACE_START ||
			    hdr.type == PERF_RECORD_AUX)
				CHECK_EQ_U64(e.sid.identifier,
					     PTD_PERFDATA_PT_ID);
			else
				CHECK_EQ_U64(e.sid.identifier,
					     PTD_PERFDATA_DUMMY_ID);
			if (hdr.type == PERF_RECORD_AUX) {
				CHECK(!have_aux);	/* the last one's data came */
				have_aux = true;
				aux_off = e.u.aux.aux_offset;
				aux_n = e.u.aux.aux_size;
			}
			if (hdr.type == PERF_RECORD_AUX &&
			    p->naux < PTD_ARRAY_SIZE(p->aux_sizes))
				p->aux_sizes[p->naux++] = e.u.aux.aux_size;
			if (hdr.type == PERF_RECORD_MMAP2 &&
			    p->mmap2 < PTD_ARRAY_SIZE(p->mmap_names))
				(void)snprintf(p->mmap_names[p->mmap2++],
					       sizeof(p->mmap_names[0]), "%s",
					       e.u.mmap.filename);
		}
		p->nrec++;
		off += hdr.size;
	}
	CHECK_EQ_U64(off, end);
	CHECK(!have_aux);
	for (size_t i = 0; i < npts; i++)
		CHECK_EQ_U64(done[i], ptlens[i]);
}

/* The feature table right after the data; AUXTRACE index entries must
 * name the AUXTRACE records. */
static void check_features(struct parsed *p, bool want_cpuid)
{
	uint64_t off = p->h.data.offset + p->h.data.size;
	unsigned nfeat = 0;

	CHECK(ptd_perfdata_feat_test(p->h.features,
				     PTD_PERFDATA_HEADER_AUXTRACE));
	CHECK(ptd_perfdata_feat_test(p->h.features,
				     PTD_PERFDATA_HEADER_NRCPUS));
	CHECK(ptd_perfdata_feat_test(p->h.features, PTD_PERFDATA_HEADER_ARCH));
	CHECK_EQ_INT(ptd_perfdata_feat_test(p->h.features,
					    PTD_PERFDATA_HEADER_CPUID),
		     want_cpuid);
	CHECK(!ptd_perfdata_feat_test(p->h.features,
				      PTD_PERFDATA_HEADER_RESERVED));
	for (unsigned f = 0; f < PTD_PERFDATA_FEAT_BITS; f++) {
		struct ptd_perfdata_section s;
		const uint8_t *body;

		if (!ptd_perfdata_feat_test(p->h.features, f))
			continue;
		REQUIRE(inside(p, off + 16 * nfeat, 16));
		memcpy(&s, p->data + off + 16 * nfeat, 16);
		nfeat++;
		REQUIRE(inside(p, s.offset, s.size));
		body = p->data + s.offset;
		if (f == PTD_PERFDATA_HEADER_CPUID) {
			uint32_t len;

			memcpy(&len, body, 4);
			CHECK(len % 64 == 0 && len + 4 == s.size);
			CHECK_EQ_STR((const char *)body + 4,
				     "GenuineIntel,6,85,4");
		} else if (f == PTD_PERFDATA_HEADER_AUXTRACE) {
			uint64_t nr;
			size_t found = 0;

			memcpy(&nr, body, 8);
			CHECK_EQ_U64(s.size, 8 + 16 * nr);
			for (uint64_t i = 0; i < nr && 8 + 16 * i < s.size;
			     i++) {
				struct ptd_perfdata_auxtrace_index_entry e;

				memcpy(&e, body + 8 + 16 * i, 16);
				CHECK_EQ_U64(e.sz, 48);
				for (size_t k = 0; k < p->nrec; k++)
					if (p->offs[k] == e.file_offset &&
					    p->types[k] ==
						    PTD_PERFDATA_RECORD_AUXTRACE)
						found++;
			}
			CHECK_EQ_U64(found, nr);
			CHECK(nr > 0);
		} else if (f == PTD_PERFDATA_HEADER_NRCPUS) {
			struct ptd_perfdata_nrcpus n;

			CHECK_EQ_U64(s.size, sizeof(n));
			memcpy(&n, body, sizeof(n));
			CHECK(n.nr_cpus_online >= 1);
		}
	}
	CHECK(nfeat >= 3);
}

static int read_back(const char *path, uint32_t pid, struct parsed *p)
{
	char *d = NULL;
	size_t n = 0;
	int r = ptd_file_read_all(path, 64u << 20, &d, &n);

	memset(p, 0, sizeof(*p));
	p->data = (uint8_t *)d;
	p->len = n;
	p->pid = pid;
	return r;
}

/* No "perf.data.XXXXXX" temporaries (nor perf.data unless @want) in
 * @dir. */
static void check_no_leftovers(const char *dir, bool want)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool seen = false;

	REQUIRE(d);
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, "perf.data.", 10))
			CHECK_FAIL_("temporary '%s' left in %s", de->d_name,
				    dir);
		if (!strcmp(de->d_name, "perf.data"))
			seen = true;
	}
	closedir(d);
	CHECK_EQ_INT(seen, want);
}

static void test_synthetic(void)
{
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	struct parsed p;
	char path[600];
	const uint8_t *pts[2] = { pt100, pt101 };
	size_t lens[2] = { sizeof(pt100), sizeof(pt101) };
	/* The order perf needs: AUXTRACE_INFO first; the process's COMM
	 * before its mappings; a thread's FORK/COMM/ITRACE_START where it
	 * started in the timeline (after seq 1, before seq 3; the UNMAP has
	 * no record); PT with its AUX; exits, the leader last. */
	static const uint32_t want[] = {
		PTD_PERFDATA_RECORD_AUXTRACE_INFO, PERF_RECORD_COMM,
		PERF_RECORD_ITRACE_START, PERF_RECORD_MMAP2, PERF_RECORD_MMAP2,
		PERF_RECORD_FORK, PERF_RECORD_COMM, PERF_RECORD_ITRACE_START,
		PERF_RECORD_MMAP2, PERF_RECORD_AUX,
		PTD_PERFDATA_RECORD_AUXTRACE, PERF_RECORD_AUX,
		PTD_PERFDATA_RECORD_AUXTRACE, PERF_RECORD_EXIT, PERF_RECORD_EXIT,
	};
	static const uint32_t want_tid[] = { 0,	  100, 100, 100, 100,
					     101, 101, 101, 100, 100,
					     100, 101, 101, 101, 100 };
	int r;

	make_synthetic("synth", &c);
	(void)snprintf(path, sizeof(path), "%s/perf.data", c.dir);
	r = ptd_perfdata_write_capture(&c, path, &diag);
	CHECK_EQ_INT(r, 0);
	if (r < 0)
		fprintf(stderr, "  %s\n", diag.msg);
	REQUIRE(r == 0);
	check_no_leftovers(c.dir, true);
	REQUIRE(read_back(path, (uint32_t)c.pid, &p) == 0);
	check_header(&p);
	walk_records(&p, pts, lens, 2);
	CHECK_EQ_INT(p.nrec, PTD_ARRAY_SIZE(want));
	for (size_t i = 0; i < p.nrec && i < PTD_ARRAY_SIZE(want); i++) {
		if (p.types[i] != want[i] || p.tids[i] != want_tid[i])
			CHECK_FAIL_("record %zu: expected type %u tid %u, got "
				    "type %u tid %u", i, want[i], want_tid[i],
				    p.types[i], p.tids[i]);
	}
	CHECK_EQ_INT(p.naux, 2);
	CHECK_EQ_U64(p.aux_sizes[0], sizeof(pt100));
	CHECK_EQ_U64(p.aux_sizes[1], sizeof(pt101));
	/* the snapshot is mapped from its file, by absolute path */
	CHECK_EQ_INT(p.mmap2, 3);
	CHECK_EQ_STR(p.mmap_names[0], "/usr/bin/prog-synth");
	CHECK(p.mmap_names[1][0] == '/');
	CHECK_CONTAINS(p.mmap_names[1], "/synth/snap-1.bin");
	CHECK_EQ_STR(p.mmap_names[2], "/usr/lib/x86_64-linux-gnu/libc.so.6");
	check_features(&p, true);
	/* the capture's options are in the PT config, at the bits the
	 * AUXTRACE_INFO names */
	for (size_t i = 0; i < p.nrec; i++) {
		const uint8_t *rec = p.data + p.offs[i];

		if (p.types[i] != PTD_PERFDATA_RECORD_AUXTRACE_INFO)
			continue;
		CHECK(p.attr[0].config &
		      priv_word(rec, PTD_PERFDATA_INTEL_PT_TSC_BIT));
		CHECK(p.attr[0].config &
		      priv_word(rec, PTD_PERFDATA_INTEL_PT_NORETCOMP_BIT));
	}
	free(p.data);

	/* Without the options and with an unknown CPU: no bits, no CPUID. */
	c.config.noretcomp = false;
	c.config.tsc = false;
	c.cpu.vendor = pcv_unknown;
	r = ptd_perfdata_write_capture(&c, path, &diag);
	REQUIRE(r == 0);
	REQUIRE(read_back(path, (uint32_t)c.pid, &p) == 0);
	check_header(&p);
	walk_records(&p, pts, lens, 2);
	check_features(&p, false);
	for (size_t i = 0; i < p.nrec; i++) {
		const uint8_t *rec = p.data + p.offs[i];

		if (p.types[i] != PTD_PERFDATA_RECORD_AUXTRACE_INFO)
			continue;
		CHECK(!(p.attr[0].config &
			priv_word(rec, PTD_PERFDATA_INTEL_PT_TSC_BIT)));
		CHECK(!(p.attr[0].config &
			priv_word(rec, PTD_PERFDATA_INTEL_PT_NORETCOMP_BIT)));
	}
	free(p.data);
	free_synthetic(&c);
}

/* A thread's PT larger than the piece the writer reads at a time (1 MiB),
 * and not a multiple of it or of 8: written whole and exact, padded. */
static void test_large_pt(void)
{
	const size_t big = (5u << 19) + 3;	/* 2.5 MiB + 3 */
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	struct parsed p;
	char path[600];
	uint8_t *pt = malloc(big);
	const uint8_t *pts[2];
	size_t lens[2];
	int r;

	REQUIRE(pt);
	for (size_t i = 0; i < big; i++)
		pt[i] = (uint8_t)(i * 2654435761u >> 13);
	make_synthetic("largept", &c);
	put_file(c.dir, "pt-100.bin", pt, big);
	c.threads[0].pt_bytes = big;
	pts[0] = pt;
	lens[0] = big;
	pts[1] = pt101;
	lens[1] = sizeof(pt101);
	(void)snprintf(path, sizeof(path), "%s/perf.data", c.dir);
	r = ptd_perfdata_write_capture(&c, path, &diag);
	if (r < 0)
		fprintf(stderr, "  %s\n", diag.msg);
	REQUIRE(r == 0);
	REQUIRE(read_back(path, (uint32_t)c.pid, &p) == 0);
	check_header(&p);
	walk_records(&p, pts, lens, 2);
	CHECK_EQ_INT(p.naux, 2);
	CHECK_EQ_U64(p.aux_sizes[0], big);
	free(p.data);
	free_synthetic(&c);
	free(pt);
}

/* A detached capture has no EXIT records (the process did not exit). */
static void test_detached(void)
{
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	struct parsed p;
	char path[600];
	const uint8_t *pts[2] = { pt100, pt101 };
	size_t lens[2] = { sizeof(pt100), sizeof(pt101) };

	make_synthetic("detached", &c);
	c.exited = false;
	c.detached = true;
	(void)snprintf(path, sizeof(path), "%s/perf.data", c.dir);
	REQUIRE(ptd_perfdata_write_capture(&c, path, &diag) == 0);
	REQUIRE(read_back(path, (uint32_t)c.pid, &p) == 0);
	check_header(&p);
	walk_records(&p, pts, lens, 2);
	for (size_t i = 0; i < p.nrec; i++)
		CHECK(p.types[i] != PERF_RECORD_EXIT);
	CHECK_EQ_INT(p.types[p.nrec - 1], PTD_PERFDATA_RECORD_AUXTRACE);
	free(p.data);
	free_synthetic(&c);
}

/* A filtered capture's filter text goes into AUXTRACE_INFO as perf
 * record writes its --filter, and perf.data's reader reads it back. */
static void test_filter_text(void)
{
	static const char text[] = "filter 0x1130/0x40@/usr/bin/prog-synth";
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	struct ptd_perfdata *pd = NULL;
	struct parsed p;
	char path[600];
	const uint8_t *pts[2] = { pt100, pt101 };
	size_t lens[2] = { sizeof(pt100), sizeof(pt101) };

	make_synthetic("filtered", &c);
	c.filter = (char *)text;
	(void)snprintf(path, sizeof(path), "%s/perf.data", c.dir);
	REQUIRE(ptd_perfdata_write_capture(&c, path, &diag) == 0);
	REQUIRE(read_back(path, (uint32_t)c.pid, &p) == 0);
	p.filter = text;
	check_header(&p);
	walk_records(&p, pts, lens, 2);
	CHECK(p.nrec > 4);
	free(p.data);
	CHECK_EQ_INT(ptd_perfdata_open(path, &pd, &diag), 0);
	if (pd) {
		CHECK(pd->pt.filter != NULL);
		if (pd->pt.filter)
			CHECK_EQ_STR(pd->pt.filter, text);
	}
	ptd_perfdata_free(pd);
	c.filter = NULL;
	free_synthetic(&c);
}

static void test_bad_args(void)
{
	struct ptd_capture c;
	struct ptd_diag diag = { "" };

	memset(&c, 0, sizeof(c));
	CHECK_EQ_INT(ptd_perfdata_write_capture(NULL, "x", &diag), -EINVAL);
	CHECK_EQ_INT(ptd_perfdata_write_capture(&c, NULL, &diag), -EINVAL);
	c.dir = workdir;
	CHECK_EQ_INT(ptd_perfdata_write_capture(&c, "x", &diag), -EINVAL);
	CHECK_EQ_INT(ptd_perfdata_write_capture(&c, "x", NULL), -EINVAL);
}

static void test_unwritable(void)
{
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	char path[600];
	int r;

	make_synthetic("unwritable", &c);
	(void)snprintf(path, sizeof(path), "%s/no/such/dir/perf.data",
		       c.dir);
	r = ptd_perfdata_write_capture(&c, path, &diag);
	CHECK_EQ_INT(r, -ENOENT);
	CHECK_CONTAINS(diag.msg, path);
	CHECK_CONTAINS(diag.msg, "temporary");
	/* a capture directory that is gone */
	free(c.dir);
	c.dir = strdup("/nonexistent-ptd-capture");
	(void)snprintf(path, sizeof(path), "%s/perf.data", workdir);
	r = ptd_perfdata_write_capture(&c, path, &diag);
	CHECK_EQ_INT(r, -ENOENT);
	CHECK_CONTAINS(diag.msg, "/nonexistent-ptd-capture");
	free_synthetic(&c);
}

/* A bad capture file: a clear message, nothing at @path, an old file there
 * kept as it was, no temporary left. */
static void expect_fail(struct ptd_capture *c, int err, const char *needle)
{
	struct ptd_diag diag = { "" };
	char path[600], *old = NULL;
	size_t n = 0;
	int r;

	(void)snprintf(path, sizeof(path), "%s/perf.data", c->dir);
	r = ptd_perfdata_write_capture(c, path, &diag);
	CHECK_EQ_INT(r, err);
	CHECK_CONTAINS(diag.msg, needle);
	check_no_leftovers(c->dir, false);
	/* again over an existing file: it stays */
	put_file(c->dir, "perf.data", "old", 3);
	r = ptd_perfdata_write_capture(c, path, &diag);
	CHECK_EQ_INT(r, err);
	REQUIRE(ptd_file_read_all(path, 100, &old, &n) == 0);
	CHECK_EQ_STR(old, "old");
	free(old);
	(void)unlink(path);
	check_no_leftovers(c->dir, false);
}

static void test_bad_capture_files(void)
{
	struct ptd_capture c;
	char p[600];

	/* a PT file that is missing */
	make_synthetic("nopt", &c);
	(void)snprintf(p, sizeof(p), "%s/pt-101.bin", c.dir);
	REQUIRE(unlink(p) == 0);
	expect_fail(&c, -ENOENT, "pt-101.bin");
	free_synthetic(&c);

	/* a PT file whose size changed since the capture was loaded */
	make_synthetic("changedpt", &c);
	put_file(c.dir, "pt-100.bin", pt101, sizeof(pt101));
	expect_fail(&c, -PTD_ECHECKSUM, "pt-100.bin");
	free_synthetic(&c);

	/* a snapshot file that is missing */
	make_synthetic("nosnap", &c);
	(void)snprintf(p, sizeof(p), "%s/snap-1.bin", c.dir);
	REQUIRE(unlink(p) == 0);
	expect_fail(&c, -ENOENT, "snap-1.bin");
	free_synthetic(&c);

	/* a snapshot file name that leaves the directory */
	make_synthetic("badsnap", &c);
	free(c.tl.ev[1].file);
	c.tl.ev[1].file = strdup("../snap-1.bin");
	expect_fail(&c, -PTD_EFORMAT, "bad snapshot file name");
	free_synthetic(&c);
}

/* A real capture of prog-loop: the file holds its PT byte for byte and
 * MMAP2 records for the program and its libraries. */
static void test_real_capture(void)
{
	const char *progs = getenv("PTD_TEST_PROGS");
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	struct parsed p;
	char prog[512], dir[512], path[600];
	/* "0": no loop iterations, only the program's start and exit */
	char *argv[] = { prog, "0", NULL };
	uint8_t *pt = NULL;
	size_t ptlen = 0;
	const uint8_t *pts[1];
	bool saw_prog = false;
	int r;

	if (!progs) {
		fprintf(stderr, "  PTD_TEST_PROGS unset: real capture not "
				"tested\n");
		return;
	}
	(void)snprintf(prog, sizeof(prog), "%s/prog-loop", progs);
	(void)snprintf(dir, sizeof(dir), "%s/real", workdir);
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	r = ptd_swpt_run(argv, &so, &res, &diag);
	if (r == -EPERM) {
		fprintf(stderr, "  ptrace refused (%s): real capture not "
				"tested\n", diag.msg);
		return;
	}
	REQUIRE(r == 0);
	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	REQUIRE(c.nthreads == 1);
	REQUIRE(ptd_capture_read_pt(&c, 0, &pt, &ptlen, &diag) == 0);
	(void)snprintf(path, sizeof(path), "%s/out.perf", workdir);
	r = ptd_perfdata_write_capture(&c, path, &diag);
	if (r < 0)
		fprintf(stderr, "  %s\n", diag.msg);
	REQUIRE(r == 0);
	REQUIRE(read_back(path, (uint32_t)c.pid, &p) == 0);
	check_header(&p);
	pts[0] = pt;
	walk_records(&p, pts, &ptlen, 1);
	CHECK(p.mmap2 >= 2);
	for (unsigned i = 0; i < p.mmap2; i++)
		if (strstr(p.mmap_names[i], "prog-loop"))
			saw_prog = true;
	CHECK(saw_prog);
	CHECK_EQ_INT(p.types[0], PTD_PERFDATA_RECORD_AUXTRACE_INFO);
	CHECK_EQ_INT(p.types[p.nrec - 1], PERF_RECORD_EXIT);
	check_features(&p, c.cpu.vendor == pcv_intel);
	free(p.data);
	free(pt);
	ptd_capture_fini(&c);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-pdw-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_bad_args);
	RUN(test_synthetic);
	RUN(test_large_pt);
	RUN(test_detached);
	RUN(test_filter_text);
	RUN(test_unwritable);
	RUN(test_bad_capture_files);
	RUN(test_real_capture);
	(void)ptd_rm_rf(workdir);
	return check_done();
}
