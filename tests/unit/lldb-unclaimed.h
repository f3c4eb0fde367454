/* SPDX-License-Identifier: MIT */
/*
 * A tiny LLDB per-CPU bundle whose trace no thread's run claims (one PSB+
 * with a TSC, an empty context switch trace): decoding it gives no record
 * and a notice that says how many bytes were not decoded.  For tests of
 * how that notice reaches users (ptctl, replays).  Header-only; include
 * after check.h and ptenc.h.
 */
#ifndef PTD_TESTS_LLDB_UNCLAIMED_H
#define PTD_TESTS_LLDB_UNCLAIMED_H

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"

/* The notice's words, to look for. */
#define LLDB_UNCLAIMED_NOTICE                                                  \
	"fall in no thread's run in the context switch traces: not decoded"

/* Write the bundle into the new directory @dir; false on failure. */
static inline bool lldb_unclaimed_bundle(const char *dir)
{
	static const char json[] =
		"{\"type\":\"intel-pt\",\"cpuInfo\":{\"vendor\":"
		"\"GenuineIntel\",\"family\":6,\"model\":85,\"stepping\":4},"
		"\"processes\":[{\"pid\":7,\"threads\":[{\"tid\":7}],"
		"\"modules\":[]}],\"cpus\":[{\"id\":0,\"iptTrace\":\"pt\","
		"\"contextSwitchTrace\":\"cs\"}],\"tscPerfZeroConversion\":"
		"{\"timeMult\":1,\"timeShift\":0,\"timeZero\":0}}";
	char path[600];
	struct trace t;

	if (mkdir(dir, 0755) < 0)
		return false;
	tr_begin(&t);
	psb_tsc(&t, 0x1000, 0);
	tr_end(&t);
	(void)snprintf(path, sizeof(path), "%s/pt", dir);
	if (ptd_file_write_atomic(path, t.buf, t.len) < 0)
		return false;
	(void)snprintf(path, sizeof(path), "%s/cs", dir);
	if (ptd_file_write_atomic(path, "", 0) < 0)
		return false;
	(void)snprintf(path, sizeof(path), "%s/trace.json", dir);
	return ptd_file_write_atomic(path, json, strlen(json)) == 0;
}

#endif
