/* SPDX-License-Identifier: MIT */
/*
 * LLDB Intel PT trace bundles (lldb/trace.c, lldb/percpu.c), through the
 * reader's public entry point only: the input is a bundle directory in the
 * form fuzz-common.h describes ("@@@ trace.json", "@@@ threads/1.trace",
 * "@@@ modules/prog", ...), unpacked, then ptd_lldb_decode on the insn
 * path.
 * Checked: a refusal names the field or file; every record rendered is
 * JSON; no descriptor is left open.
 */
#include "fuzz-common.h"

#include "lldb/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_files_write(data, size);
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	struct fuzz_sink_ctx sc;
	struct ptd_input_sink sink = fuzz_sink(&sc);
	int r;

	memset(&o, 0, sizeof(o));
	/* The insn path: with code from the input, libipt 2.0.5's
	 * pt_blk_next can loop inside one call (known/README.md). */
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_ALL & ~PTD_REC_BIT(PTD_REC_BLOCK);
	r = ptd_lldb_decode(dir, &o, &sink, NULL, &d);
	fuzz_check_refusal(r, &d, "ptd_lldb_decode");
	fuzz_report("ptd_lldb_decode", r, &d, &sc);
	fuzz_files_remove(dir);
	fuzz_check_fds();
	return 0;
}
