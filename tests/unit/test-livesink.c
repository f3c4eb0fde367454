/* SPDX-License-Identifier: MIT */
/*
 * swpt/livesink.h on its own, its output calls made by the test (no
 * tracer): the per-CPU switch and its refusals; a thread's buffer freed
 * once its reader releases it (not before it ended), the list by begin
 * order after that, and counts that keep what released threads wrote;
 * per-CPU threads freed at their end.  Use after free is ASan's to see.
 * And the tracer writing into it: a live trace forgets the threads that
 * ended, so a target's threads count against PTD_CAPTURE_MAX_THREADS
 * while they live, not in all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "swpt/capture.h"
#include "swpt/livesink.h"
#include "swpt/tracer.h"

/* The livesink's per-CPU switch and its documented refusals. */
static void test_livesink_set_cpus(void)
{
	struct ptd_livesink *ls = NULL;
	struct ptd_perf_buf *b[4];
	const struct ptd_swpt_out *out;

	CHECK_EQ_INT(ptd_livesink_set_cpus(NULL, 2, 0), -EINVAL);
	REQUIRE(ptd_livesink_new(getpid(), 4096, 4096, -1, NULL, &ls) == 0);
	CHECK_EQ_INT(ptd_livesink_set_cpus(ls, 0, 0), -EINVAL);
	CHECK_EQ_INT(ptd_livesink_set_cpus(ls, PTD_LIVESINK_MAX_CPUS + 1, 0),
		     -EINVAL);
	CHECK_EQ_U64(ptd_livesink_cpus(ls, b, 4), 0);
	CHECK_EQ_INT(ptd_livesink_set_cpus(ls, 2, 3), 0);
	CHECK_EQ_INT(ptd_livesink_set_cpus(ls, 2, 3), -EBUSY);
	CHECK_EQ_INT(ptd_livesink_set_overwrite(ls, true), -EINVAL);
	CHECK_EQ_U64(ptd_livesink_cpus(ls, b, 4), 2);
	CHECK(b[0] != b[1] && b[0]->meta && b[1]->aux);
	/* a thread's records land in its CPU's ring, not its own buffer */
	out = ptd_livesink_out(ls);
	CHECK_EQ_INT(out->thread_begin(out->ctx, 4242), 0);
	CHECK(b[0]->meta->data_head > 0);
	CHECK_EQ_U64(b[1]->meta->data_head, 0);
	CHECK_EQ_INT(out->pt(out->ctx, 4242, (const uint8_t *)"\x02\x82", 2),
		     0);
	CHECK_EQ_U64(b[0]->meta->aux_head, 2);
	CHECK_EQ_INT(out->thread_end(out->ctx, 4242), 0);
	CHECK_EQ_INT(out->pt(out->ctx, 4242, (const uint8_t *)"\x00", 1),
		     -ESRCH);
	ptd_livesink_free(ls);
	REQUIRE(ptd_livesink_new(getpid(), 4096, 4096, -1, NULL, &ls) == 0);
	CHECK_EQ_INT(ptd_livesink_set_overwrite(ls, true), 0);
	CHECK_EQ_INT(ptd_livesink_set_cpus(ls, 2, 0), -EINVAL);
	ptd_livesink_free(ls);
}

static const uint8_t PSB_END[2] = { 0x02, 0x23 };	/* any bytes */

/* Per-thread mode: threads 100, 101, 102; 100 ends and is released. */
static void test_release(void)
{
	struct ptd_livesink *ls = NULL;
	struct ptd_livesink_thread *th[4];
	struct ptd_livesink_stats st;
	const struct ptd_swpt_out *out;

	REQUIRE(ptd_livesink_new(getpid(), 4096, 4096, -1, NULL, &ls) == 0);
	out = ptd_livesink_out(ls);
	CHECK_EQ_INT(out->thread_begin(out->ctx, 100), 0);
	CHECK_EQ_INT(out->thread_begin(out->ctx, 101), 0);
	CHECK_EQ_INT(out->pt(out->ctx, 100, PSB_END, 2), 0);
	CHECK_EQ_INT(out->pt(out->ctx, 101, PSB_END, 1), 0);
	REQUIRE(ptd_livesink_threads(ls, 0, th, 4) == 2);
	CHECK_EQ_INT(th[0]->tid, 100);
	CHECK_EQ_U64(th[0]->seq, 0);
	CHECK_EQ_U64(th[1]->seq, 1);
	/* not ended: its producer may still write */
	CHECK_EQ_INT(ptd_livesink_release(ls, th[0]), -EBUSY);
	CHECK_EQ_INT(out->thread_end(out->ctx, 100), 0);
	CHECK_EQ_INT(ptd_livesink_release(ls, th[0]), 0);
	/* gone from the list; what it wrote still counted */
	REQUIRE(ptd_livesink_threads(ls, 0, th, 4) == 1);
	CHECK_EQ_INT(th[0]->tid, 101);
	ptd_livesink_get_stats(ls, &st);
	CHECK_EQ_U64(st.threads, 2);
	CHECK_EQ_U64(st.live, 1);
	CHECK_EQ_U64(st.aux_written, 3);
	/* a thread begun later is listed from the seq after the last seen,
	 * whatever was released before it; its tid may be the old one's */
	CHECK_EQ_INT(out->thread_begin(out->ctx, 100), 0);
	REQUIRE(ptd_livesink_threads(ls, 2, th, 4) == 1);
	CHECK_EQ_INT(th[0]->tid, 100);
	CHECK_EQ_U64(th[0]->seq, 2);
	CHECK_EQ_U64(ptd_livesink_threads(ls, 3, th, 4), 0);
	/* the new one writes into its own buffer */
	CHECK_EQ_INT(out->pt(out->ctx, 100, PSB_END, 2), 0);
	ptd_livesink_get_stats(ls, &st);
	CHECK_EQ_U64(st.threads, 3);
	CHECK_EQ_U64(st.live, 2);
	CHECK_EQ_U64(st.aux_written, 5);
	/* the rest is freed with the sink (ended or not) */
	CHECK_EQ_INT(out->thread_end(out->ctx, 101), 0);
	ptd_livesink_free(ls);
}

/* Per-CPU mode: a thread has no buffer; it is freed at its end. */
static void test_percpu_end_frees(void)
{
	struct ptd_livesink *ls = NULL;
	struct ptd_livesink_thread *th[4];
	struct ptd_livesink_stats st;
	const struct ptd_swpt_out *out;

	REQUIRE(ptd_livesink_new(getpid(), 4096, 4096, -1, NULL, &ls) == 0);
	REQUIRE(ptd_livesink_set_cpus(ls, 2, 1) == 0);
	out = ptd_livesink_out(ls);
	CHECK_EQ_INT(out->thread_begin(out->ctx, 7), 0);
	CHECK_EQ_INT(out->thread_begin(out->ctx, 8), 0);
	/* (migrate every batch: 7 runs on both CPUs) */
	CHECK_EQ_INT(out->pt(out->ctx, 7, PSB_END, 2), 0);
	CHECK_EQ_INT(out->pt(out->ctx, 7, PSB_END, 2), 0);
	CHECK_EQ_INT(out->thread_end(out->ctx, 7), 0);
	REQUIRE(ptd_livesink_threads(ls, 0, th, 4) == 1);
	CHECK_EQ_INT(th[0]->tid, 8);
	ptd_livesink_get_stats(ls, &st);
	CHECK_EQ_U64(st.threads, 2);
	CHECK_EQ_U64(st.live, 1);
	CHECK_EQ_U64(st.migrated, 1);
	CHECK_EQ_U64(st.aux_written, 4);
	/* 8 runs on where 7 ran: nothing of 7 is touched */
	CHECK_EQ_INT(out->pt(out->ctx, 8, PSB_END, 2), 0);
	CHECK_EQ_INT(out->pt(out->ctx, 8, PSB_END, 2), 0);
	CHECK_EQ_INT(out->thread_end(out->ctx, 8), 0);
	ptd_livesink_get_stats(ls, &st);
	CHECK_EQ_U64(st.live, 0);
	CHECK_EQ_U64(st.migrated, 2);
	CHECK_EQ_U64(ptd_livesink_threads(ls, 0, th, 4), 0);
	ptd_livesink_free(ls);
}

/* prog-onebyone N: N threads one after another, traced live (no capture
 * written) into a livesink whose reader releases each as it ends (as a
 * session's does): every thread traced, the tracer holding a few at
 * once. */
static void test_tracer_forgets_ended(void)
{
	enum { N = 200 };
	const char *progs = getenv("PTD_TEST_PROGS");
	char path[512], arg[16];
	char *argv[] = { path, arg, NULL };
	struct ptd_livesink *ls = NULL;
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	struct ptd_livesink_stats st;

	REQUIRE(progs != NULL);	/* (main runs this only then) */
	(void)snprintf(path, sizeof(path), "%s/prog-onebyone", progs);
	(void)snprintf(arg, sizeof(arg), "%d", N);
	/* (no reader: rings big enough for a thread's whole trace) */
	REQUIRE(ptd_livesink_new(getpid(), 64u << 10, 1u << 20, -1, NULL,
				 &ls) == 0);
	memset(&so, 0, sizeof(so));
	so.gen.psb_period = 4096;
	so.out = ptd_livesink_out(ls);
	so.quiet_target = true;
	CHECK_EQ_INT(ptd_swpt_run(argv, &so, &res, &diag), 0);
	CHECK_EQ_INT(res.exit_code, 0);
	CHECK_EQ_U64(res.threads, N + 1);
	/* the main thread, the one running, those ended since the last
	 * sweep */
	fprintf(stderr, "held at most %u\n", res.max_threads_held);
	CHECK(res.max_threads_held < 48);
	CHECK(res.max_threads_held < PTD_CAPTURE_MAX_THREADS);
	CHECK(res.pt_bytes > 0);
	ptd_livesink_get_stats(ls, &st);
	CHECK_EQ_U64(st.threads, N + 1);
	CHECK_EQ_U64(st.live, 0);
	/* every byte the tracer wrote is in the buffers */
	CHECK_EQ_U64(st.aux_written, res.pt_bytes);
	ptd_livesink_free(ls);
}

int main(void)
{
	RUN(test_livesink_set_cpus);
	RUN(test_release);
	RUN(test_percpu_end_frees);
	if (getenv("PTD_TEST_PROGS"))
		RUN(test_tracer_forgets_ended);
	else
		fprintf(stderr, "skip test_tracer_forgets_ended: "
				"PTD_TEST_PROGS is not set\n");
	return check_done();
}
