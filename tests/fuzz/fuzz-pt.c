/* SPDX-License-Identifier: MIT */
/*
 * Raw PT bytes (decode/decoder.c) through both decoder paths:
 * pt_insn_next (PTD_PATH_INSN) and pt_blk_next with the instruction cache
 * (PTD_PATH_BLOCK), against a small fixed image: fuzz_code at
 * FUZZ_CODE_BASE and again at FUZZ_CODE_HIGH, timing packets enabled, a
 * Skylake CPU (its errata workarounds on).  Every record is rendered as
 * JSON.
 * Checked: a decode of any bytes runs to the end (errors are records, not
 * failures) and counts every byte.
 */
#include "fuzz-common.h"

#include "aspace/image.h"
#include "aspace/iscache.h"
#include "decode/decoder.h"

#define FUZZ_CODE_HIGH 0x7f0000001000ull

static struct ptd_iscache *ic;
static struct ptd_image *img;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct ptd_diag d = { "" };
	char path[512];

	(void)argc;
	(void)argv;
	(void)snprintf(path, sizeof(path), "%s/code.bin", fuzz_tmpdir());
	fuzz_write_file(path, fuzz_code, sizeof(fuzz_code));
	(void)ptd_iscache_new(&ic);
	(void)ptd_image_new(ic, "fuzz", &img);
	if (!img ||
	    ptd_image_map_file(img, path, 0, sizeof(fuzz_code), FUZZ_CODE_BASE,
			       "code", &d) <= 0 ||
	    ptd_image_map_file(img, path, 0, sizeof(fuzz_code), FUZZ_CODE_HIGH,
			       "high", &d) <= 0) {
		fprintf(stderr, "fuzz-pt: cannot map the code: %s\n", d.msg);
		abort();
	}
	return 0;
}

static void decode(enum ptd_decode_path path, const uint8_t *data,
		   size_t size)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats st;
	struct fuzz_sink_ctx c;
	struct ptd_input_sink sink = fuzz_sink(&c);
	int r;

	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = PTD_REC_ALL;
	if (path == PTD_PATH_INSN)
		o.want &= ~PTD_REC_BIT(PTD_REC_BLOCK);
	o.json_bodies = true;
	o.cpu.vendor = pcv_intel;
	o.cpu.family = 6;
	o.cpu.model = 94;
	o.cpu.stepping = 3;
	o.mtc_freq = 3;
	o.nom_freq = 4;
	o.cpuid_0x15_eax = 2;
	o.cpuid_0x15_ebx = 200;
	o.has_clock = true;
	o.clock.time_mult = 1u << 31;
	o.clock.time_shift = 31;
	o.clock.time_zero = 1000;
	o.has_wallref = true;
	o.wallref.perf_ns = 1000;
	o.wallref.wall_ns = 1700000000000000000ull;
	memset(&a, 0, sizeof(a));
	a.pt = data;
	a.len = size;
	a.pid = 100;
	a.tid = 101;
	a.img = img;
	memset(&st, 0, sizeof(st));
	r = ptd_decode_thread(&o, &a, sink.record, sink.ctx, &st);
	fuzz_report(path == PTD_PATH_INSN ? "insn path" : "block path", r,
		    NULL, &c);
	if (r != 0 && r != -ENOMEM)
		fuzz_fail("ptd_decode_thread", "did not decode to the end");
	if (r == 0 && (st.bytes != size || st.skipped > size))
		fuzz_fail("ptd_decode_thread", "bytes miscounted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode(PTD_PATH_INSN, data, size);
	decode(PTD_PATH_BLOCK, data, size);
	return 0;
}
