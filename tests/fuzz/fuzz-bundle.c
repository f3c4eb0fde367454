/* SPDX-License-Identifier: MIT */
/*
 * ptd bundles (bundle/bundle.c): the input is a bundle directory in the
 * form fuzz-common.h describes ("@@@ ptd-bundle.json",
 * "@@@ capture/capture.json", "@@@ images/1-prog", ...), unpacked, then
 * ptd_bundle_decode: manifest, verification of every file, the capture,
 * decoding with the bundle's images.
 * Checked: a refusal names the file; every record rendered is JSON; no
 * descriptor is left open.
 */
#include "fuzz-common.h"

#include "bundle/bundle.h"

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
	r = ptd_bundle_decode(dir, &o, &sink, NULL, &d);
	fuzz_check_refusal(r, &d, "ptd_bundle_decode");
	fuzz_report("ptd_bundle_decode", r, &d, &sc);
	fuzz_files_remove(dir);
	fuzz_check_fds();
	return 0;
}
