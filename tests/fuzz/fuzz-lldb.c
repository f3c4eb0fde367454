/* SPDX-License-Identifier: MIT */
/*
 * LLDB Intel PT trace bundles (lldb/trace.c, lldb/percpu.c), through the
 * reader's public entry point only: the input is a bundle directory in the
 * form fuzz-common.h describes ("@@@ trace.json", "@@@ threads/1.trace",
 * "@@@ modules/prog", ...), unpacked, then ptd_lldb_decode on both
 * decoder paths.
 * Checked: a refusal names the field or file; every record rendered is
 * JSON; no descriptor is left open.
 */
#include "fuzz-common.h"

#include "lldb/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *dir = fuzz_files_write(data, size);

	fuzz_decode_dir(ptd_lldb_decode, "ptd_lldb_decode", dir);
	fuzz_files_remove(dir);
	fuzz_check_fds();
	return 0;
}
