/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU sessions through the product: ptd started in a temp dir,
 * `ptctl attach --per-cpu --capture DIR PID` on a multi-threaded program
 * (per-CPU buffers: the software source's two virtual CPUs, threads
 * switching and migrating between them), `ptctl status` shows the layout,
 * and `ptctl stream` gets, for every thread, exactly the instructions the
 * ground truth says it executed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/subscribed.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capture.h"

/* Every insn line of thread @tid in @text, in order, against @ips. */
static size_t match_truth(const char *text, pid_t tid, const uint64_t *ips,
			  size_t nips)
{
	const char *p = text;
	size_t k = 0;
	char key[64];

	(void)snprintf(key, sizeof(key), "\"tid\":%d,", (int)tid);
	while (*p) {
		const char *e = strchr(p, '\n'), *ipp;
		uint64_t ip;

		if (!e)
			break;
		if (is_type(p, "insn") &&
		    memmem(p, (size_t)(e - p), key, strlen(key)) &&
		    (ipp = memmem(p, (size_t)(e - p), "\"ip\":\"", 6)) &&
		    !strncmp(ipp + 6, "0x", 2) &&
		    ptd_parse_u64n(ipp + 8, strcspn(ipp + 8, "\""), 16,
				   &ip) == 0) {
			if (k >= nips || ip != ips[k]) {
				CHECK_FAIL_("tid %d: insn %zu is %#llx, truth "
					    "%#llx", (int)tid, k,
					    (unsigned long long)ip,
					    k < nips ? (unsigned long long)ips[k]
						     : 0ull);
				return k;
			}
			k++;
		}
		p = e + 1;
	}
	return k;
}

static char *read_text(const char *path)
{
	char *text = NULL;
	size_t len = 0;

	if (ptd_file_read_all(path, 1u << 30, &text, &len) < 0)
		return NULL;
	return text;
}

static void test_percpu_groundtruth(void)
{
	struct daemon d;
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	char pidarg[32], capdir[700], attach_out[700], stream_out[700];
	char status_out[700], sidarg[32], *text;
	size_t nthreads_seen = 0;
	pid_t t, streamer;
	int go, r;

	REQUIRE(daemon_start(&d, "percpu", "subscriber_queue_size = 1G\n"));
	t = spawn_target(0.3, &go);
	REQUIRE(t > 0);
	(void)snprintf(pidarg, sizeof(pidarg), "%ld", (long)t);
	(void)snprintf(capdir, sizeof(capdir), "%s/capture", d.dir);
	(void)snprintf(attach_out, sizeof(attach_out), "%s/attach.out", d.dir);
	(void)snprintf(stream_out, sizeof(stream_out), "%s/stream.out", d.dir);
	(void)snprintf(status_out, sizeof(status_out), "%s/status.out", d.dir);
	{
		const char *args[] = { "attach", "--per-cpu", "--capture",
				       capdir, pidarg, NULL };

		r = wait_exit(ptctl_spawn(&d, attach_out, NULL, args));
	}
	CHECK_EQ_INT(r, 0);
	text = read_text(attach_out);
	REQUIRE(text != NULL);
	(void)snprintf(sidarg, sizeof(sidarg), "%.*s",
		       (int)strcspn(text, "\n"), text);
	free(text);
	{
		const char *args[] = { "status", sidarg, NULL };

		CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, status_out, NULL,
						   args)), 0);
	}
	text = read_text(status_out);
	CHECK(text && strstr(text, "buffers: per-cpu") != NULL);
	if (text)
		fprintf(stderr, "  %s", text);
	free(text);
	{
		const char *args[] = { "stream", sidarg, NULL };

		streamer = ptctl_spawn(&d, stream_out, NULL, args);
	}
	/* the streamer is in before the target runs */
	CHECK(wait_subscribed(d.sock, sidarg));
	release(&go);
	CHECK_EQ_INT(wait_exit(streamer), 0);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	text = read_text(stream_out);
	REQUIRE(text != NULL);
	CHECK(is_type(text, "hello"));
	r = ptd_capture_load(capdir, &cap, &diag);
	if (r < 0) {
		CHECK_FAIL_("capture: %s", diag.msg);
		free(text);
		daemon_stop(&d);
		return;
	}
	for (size_t i = 0; i < cap.nthreads; i++) {
		uint64_t *ips = NULL;
		size_t nips = 0, k;

		REQUIRE(ptd_capture_read_truth(&cap, i, &ips, &nips,
					       &diag) == 0);
		k = match_truth(text, cap.threads[i].tid, ips, nips);
		CHECK_EQ_U64(k, nips);
		if (k == nips && nips > 0)
			nthreads_seen++;
		fprintf(stderr, "  tid %d: %zu insns streamed = truth\n",
			(int)cap.threads[i].tid, k);
		free(ips);
	}
	CHECK(nthreads_seen >= 4);	/* main, 2 workers, brief ones */
	CHECK(strstr(text, "\"type\":\"bye\"") != NULL);
	CHECK(strstr(text, "\"reason\":\"exited\"") != NULL);
	ptd_capture_fini(&cap);
	free(text);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

int main(void)
{
	harness_setup("/tmp/ptdpc-XXXXXX");
	RUN(test_percpu_groundtruth);
	return harness_done();
}
