/* SPDX-License-Identifier: MIT */
/*
 * The Chrome JSON trace-event writer (views/perfetto.h).
 */
#include "views/perfetto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "record/jsonw.h"

struct ptd_perfetto {
	FILE *f;
	const struct ptd_stacks *s;
	pid_t *pids;		/* processes named so far */
	size_t npids, cappids;
	bool first;		/* no event written yet */
	char esc[6 * PTD_STACKS_MAX_NAME + 8];
};

/* @s as a JSON string (cut names are already short). */
static const char *jstr(struct ptd_perfetto *p, const char *s)
{
	size_t n = ptd_json_string(p->esc, sizeof(p->esc) - 1, s,
				   strnlen(s, PTD_STACKS_MAX_NAME));

	p->esc[n ? n : 0] = '\0';
	if (!n)
		memcpy(p->esc, "\"?\"", 4);
	return p->esc;
}

static void sep(struct ptd_perfetto *p)
{
	fputs(p->first ? "\n" : ",\n", p->f);
	p->first = false;
}

static void put_ts(struct ptd_perfetto *p, uint64_t ts)
{
	if (p->s && ptd_stacks_clock(p->s) == PTD_STACKS_CLOCK_TIME)
		fprintf(p->f, "%" PRIu64 ".%03u", ts / 1000,
			(unsigned)(ts % 1000));
	else
		fprintf(p->f, "%" PRIu64, ts);
}

static int on_thread(void *ctx, pid_t pid, pid_t tid)
{
	struct ptd_perfetto *p = ctx;
	size_t i;

	for (i = 0; i < p->npids && p->pids[i] != pid; i++)
		;
	if (i == p->npids) {
		if (p->npids == p->cappids) {
			size_t cap = p->cappids ? 2 * p->cappids : 8;
			pid_t *n = reallocarray(p->pids, cap, sizeof(*n));

			if (!n)
				return -ENOMEM;
			p->pids = n;
			p->cappids = cap;
		}
		p->pids[p->npids++] = pid;
		sep(p);
		fprintf(p->f, "{\"ph\":\"M\",\"name\":\"process_name\","
			      "\"pid\":%ld,\"tid\":%ld,\"args\":{\"name\":"
			      "\"pid %ld\"}}",
			(long)pid, (long)tid, (long)pid);
	}
	sep(p);
	fprintf(p->f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%ld,"
		      "\"tid\":%ld,\"args\":{\"name\":\"tid %ld\"}}",
		(long)pid, (long)tid, (long)tid);
	return ferror(p->f) ? -EIO : 0;
}

static int on_open(void *ctx, pid_t pid, pid_t tid, uint32_t depth,
		   const char *name, uint64_t ts)
{
	struct ptd_perfetto *p = ctx;

	(void)depth;
	sep(p);
	fprintf(p->f, "{\"ph\":\"B\",\"pid\":%ld,\"tid\":%ld,\"ts\":",
		(long)pid, (long)tid);
	put_ts(p, ts);
	fprintf(p->f, ",\"name\":%s}", jstr(p, name));
	return ferror(p->f) ? -EIO : 0;
}

static int on_close(void *ctx, pid_t pid, pid_t tid, uint32_t depth,
		    uint64_t ts)
{
	struct ptd_perfetto *p = ctx;

	(void)depth;
	sep(p);
	fprintf(p->f, "{\"ph\":\"E\",\"pid\":%ld,\"tid\":%ld,\"ts\":",
		(long)pid, (long)tid);
	put_ts(p, ts);
	fputc('}', p->f);
	return ferror(p->f) ? -EIO : 0;
}

static int on_reset(void *ctx, pid_t pid, pid_t tid, const char *reason,
		    uint64_t ts)
{
	struct ptd_perfetto *p = ctx;

	sep(p);
	fprintf(p->f, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%ld,\"tid\":%ld,"
		      "\"ts\":",
		(long)pid, (long)tid);
	put_ts(p, ts);
	fprintf(p->f, ",\"name\":\"stack_reset\",\"args\":{\"reason\":%s}}",
		jstr(p, reason));
	return ferror(p->f) ? -EIO : 0;
}

int ptd_perfetto_new(FILE *f, struct ptd_stacks_ops *ops,
		     struct ptd_perfetto **ret)
{
	struct ptd_perfetto *p = calloc(1, sizeof(*p));

	*ret = NULL;
	if (!p)
		return -ENOMEM;
	p->f = f;
	p->first = true;
	memset(ops, 0, sizeof(*ops));
	ops->thread = on_thread;
	ops->open = on_open;
	ops->close = on_close;
	ops->reset = on_reset;
	ops->ctx = p;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
	if (ferror(f)) {
		free(p);
		return -EIO;
	}
	*ret = p;
	return 0;
}

void ptd_perfetto_set_stacks(struct ptd_perfetto *p,
			     const struct ptd_stacks *s)
{
	p->s = s;
}

int ptd_perfetto_finish(struct ptd_perfetto *p, const char *input,
			const char *source)
{
	enum ptd_stacks_clock c = p->s ? ptd_stacks_clock(p->s)
				       : PTD_STACKS_CLOCK_NONE;
	static const char *const unit[] = {
		[PTD_STACKS_CLOCK_NONE] = "none",
		[PTD_STACKS_CLOCK_TIME] = "perf time: ts is microseconds",
		[PTD_STACKS_CLOCK_TSC] = "TSC ticks: 1 tick per ts unit "
					 "(shown as 1 us)",
		[PTD_STACKS_CLOCK_INSNS] = "instructions since the thread's "
					   "trace began: 1 instruction per ts "
					   "unit (shown as 1 us)",
	};

	fprintf(p->f, "\n],\n\"otherData\":{\"generator\":\"ptd\","
		      "\"time_axis\":\"%s\",\"time_unit\":\"%s\",",
		ptd_stacks_clock_name(c), unit[c]);
	fprintf(p->f, "\"input\":%s,", jstr(p, input ? input : ""));
	fprintf(p->f, "\"source\":%s,", jstr(p, source ? source : ""));
	fprintf(p->f, "\"instructions\":%" PRIu64 ",\"stack_resets\":%" PRIu64
		      "}}\n",
		p->s ? ptd_stacks_insns(p->s) : 0,
		p->s ? ptd_stacks_resets(p->s) : 0);
	return ferror(p->f) ? -EIO : 0;
}

void ptd_perfetto_free(struct ptd_perfetto *p)
{
	if (!p)
		return;
	free(p->pids);
	free(p);
}
