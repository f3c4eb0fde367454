/* SPDX-License-Identifier: MIT */
/*
 * Test helper: whether a process has installed its handler of a signal
 * yet (a target started under a tracer starts slowly, and a signal it is
 * to handle kills it before).  Header-only.
 */
#ifndef PTD_TESTS_CATCHING_H
#define PTD_TESTS_CATCHING_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

/* Whether @pid catches signal @sig (its handler is installed: SigCgt in
 * /proc/PID/status), waiting up to @timeout_ms for it to be.  A target
 * released from its shell is still starting (under a tracer, slowly): a
 * signal it is to handle must wait for this, or it kills it. */
static inline bool wait_catching(pid_t pid, int sig, int timeout_ms)
{
	char path[64], line[256];

	(void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	for (int i = 0; i < timeout_ms / 10; i++) {
		FILE *f = fopen(path, "r");
		unsigned long long mask = 0;
		bool found = false;

		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "SigCgt: %llx", &mask) == 1) {
				found = true;
				break;
			}
		if (f)
			fclose(f);
		if (!f)
			return false;	/* gone */
		if (found && (mask >> (sig - 1) & 1))
			return true;
		usleep(10000);
	}
	return false;
}

#endif
