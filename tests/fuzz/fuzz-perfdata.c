/* SPDX-License-Identifier: MIT */
/*
 * perf.data, file or pipe layout (perfdata/read.c, perfdata/decode.c):
 * ptd_perfdata_parse, every kernel record through ptd_perfdata_event, then
 * ptd_perfdata_decode_parsed on both decoder paths.
 *
 * Files are looked up under a sysroot that holds fuzz_code as "/prog" (the
 * path the seeds map), the build-id cache is an empty directory and the
 * kernel a file that does not exist, so decoding reads nothing of this
 * machine's unless the input names one of its files by path.
 * Checked: a refusal says what and where; every record the reader
 * accepted parses again; every record rendered is JSON; no descriptor is
 * left open.
 */
#include "fuzz-common.h"

#include "perfdata/decode.h"
#include "perfdata/read.h"

static char sysroot[300], cache[300], kernel[300];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[400];

	(void)argc;
	(void)argv;
	(void)snprintf(sysroot, sizeof(sysroot), "%s/root", fuzz_tmpdir());
	(void)snprintf(cache, sizeof(cache), "%s/cache", fuzz_tmpdir());
	(void)snprintf(kernel, sizeof(kernel), "%s/no-kernel", fuzz_tmpdir());
	if (mkdir(sysroot, 0700) < 0 || mkdir(cache, 0700) < 0)
		abort();
	(void)snprintf(path, sizeof(path), "%s/prog", sysroot);
	fuzz_write_file(path, fuzz_code, sizeof(fuzz_code));
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	struct fuzz_sink_ctx c;
	struct ptd_input_sink sink;
	int r;

	r = ptd_perfdata_parse(data, size, "fuzz.data", &pd, &d);
	fuzz_check_refusal(r, &d, "ptd_perfdata_parse");
	if (r < 0) {
		fuzz_report("ptd_perfdata_parse", r, &d, NULL);
		return 0;
	}
	for (size_t i = 0; i < pd->nrecs; i++) {
		struct ptd_perf_event e;

		if (pd->recs[i].type >= 64)
			continue;	/* perf's own records */
		r = ptd_perfdata_event(pd, i, &e, &d);
		if (r < 0 && r != -EINVAL) {
			fprintf(stderr, "%s\n", d.msg);
			fuzz_fail("ptd_perfdata_event",
				  "an accepted record does not parse");
		}
	}
	for (int path = 0; path < 2; path++) {
		memset(&o, 0, sizeof(o));
		o.decode.path = path ? PTD_PATH_BLOCK : PTD_PATH_INSN;
		o.decode.want = PTD_REC_ALL;
		if (!path)
			o.decode.want &= ~PTD_REC_BIT(PTD_REC_BLOCK);
		o.decode.json_bodies = path;
		o.sysroot = sysroot;
		o.buildid_dir = cache;
		o.kernel = kernel;
		sink = fuzz_sink(&c);
		d.msg[0] = '\0';
		r = ptd_perfdata_decode_parsed(pd, &o, &sink, NULL, &d);
		fuzz_check_refusal(r, &d, "ptd_perfdata_decode_parsed");
		fuzz_report("ptd_perfdata_decode_parsed", r, &d, &c);
	}
	ptd_perfdata_free(pd);
	fuzz_check_fds();
	return 0;
}
