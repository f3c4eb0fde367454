/* SPDX-License-Identifier: MIT */
/*
 * ptctl top: a session's hottest functions by exact instruction count,
 * from the counters snapshots ptd sends a subscriber (doc/protocol.md,
 * "first_exec and counters"), redrawn each interval.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/strutil.h"
#include "ptctl.h"

#define TOP_NAME_MAX 160

struct top_fn {
	uint64_t count;
	unsigned ninsn;
	char name[TOP_NAME_MAX];
};

struct top {
	uint64_t session;
	uint32_t k;
	bool once, tty;
	/* the snapshot being read: its total, its function lines */
	bool open;
	uint64_t total, distinct;
	struct top_fn *fn;
	unsigned nfn;
	unsigned shown;
};

static uint64_t hex_of(const cJSON *o, const char *key)
{
	uint64_t v = 0;

	(void)ptd_parse_u64(str_of(o, key), 0, &v);
	return v;
}

/* Print the snapshot read (a block of lines; on a terminal, the screen
 * redrawn). */
static int top_print(struct top *t)
{
	if (!t->open)
		return 0;
	t->open = false;
	if (t->tty)
		fputs("\033[H\033[2J", stdout);
	printf("session %" PRIu64 ": %" PRIu64 " instructions executed, "
	       "%" PRIu64 " distinct\n", t->session, t->total, t->distinct);
	printf("%14s %6s %6s  %s\n", "count", "share", "insns", "function");
	for (unsigned i = 0; i < t->nfn; i++)
		printf("%14" PRIu64 " %5.1f%% %6u  %s\n", t->fn[i].count,
		       t->total ? 100.0 * (double)t->fn[i].count /
					  (double)t->total
				: 0.0,
		       t->fn[i].ninsn, t->fn[i].name);
	if (!t->tty)
		putchar('\n');
	t->shown++;
	if (fflush(stdout) != 0)
		return EXIT_STREAM;
	return t->once ? -1 : 0;
}

static int top_line(void *ctx, const char *line, size_t n)
{
	struct top *t = ctx;
	cJSON *o;
	const char *of;
	int r = 0;

	if (!strncmp(line, "{\"type\":\"bye\"", 13))
		return top_print(t) > 0 ? EXIT_STREAM : 0;
	if (strncmp(line, "{\"type\":\"counters\"", 18))
		return 0;
	o = cJSON_ParseWithLength(line, n);
	of = str_of(o, "of");
	if (!strcmp(of, "total")) {
		r = top_print(t);	/* (a short one: fewer than k) */
		if (r == 0) {
			t->open = true;
			t->total = hex_of(o, "count");
			t->distinct = (uint64_t)num_of(o, "ninsn");
			t->nfn = 0;
		}
	} else if (!strcmp(of, "function") && t->open && t->nfn < t->k) {
		struct top_fn *f = &t->fn[t->nfn++];
		const char *fn = str_of(o, "function");

		f->count = hex_of(o, "count");
		f->ninsn = (unsigned)num_of(o, "ninsn");
		(void)snprintf(f->name, sizeof(f->name), "%s%s%s%s",
			       *fn ? fn : "", *fn ? " (" : "",
			       str_of(o, "module"), *fn ? ")" : "");
		/* the last of the snapshot's k functions: shown at once */
		if (t->nfn == t->k)
			r = top_print(t);
	}
	cJSON_Delete(o);
	return r;
}

/* --once: the counts as they are now (the counters request), one view. */
static int top_once(FILE *f, struct top *t)
{
	struct ptd_request req;
	struct ptd_response resp;
	const cJSON *a, *v;
	int r;

	client_request(&req, PTD_CMD_COUNTERS);
	req.has_session = true;
	req.session = t->session;
	req.filter.counters_top = t->k;
	r = client_call(f, &req, false, &resp);
	if (r)
		return r;
	a = cJSON_GetObjectItemCaseSensitive(resp.result, "records");
	cJSON_ArrayForEach(v, a) {
		char *line = cJSON_PrintUnformatted(v);

		r = line ? top_line(t, line, strlen(line)) : EXIT_STREAM;
		free(line);
		if (r)
			break;
	}
	if (r >= 0)
		r = top_print(t);
	ptd_response_fini(&resp);
	return r < 0 ? 0 : r;
}

static const struct option top_long[] = {
	{ "interval", required_argument, NULL, 'i' },
	{ "top", required_argument, NULL, 'k' },
	{ "once", no_argument, NULL, '1' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int verb_top(int argc, char **argv)
{
	struct ptd_filter_spec spec;
	struct top t = { .k = 20 };
	uint64_t v, interval = 1000;
	FILE *f = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", top_long, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (ptd_parse_u64(optarg, 10, &interval) < 0 ||
			    interval < PTD_PROTO_COUNTERS_EVERY_MIN ||
			    interval > PTD_PROTO_COUNTERS_EVERY_MAX) {
				errx_msg("--interval: expected %u to %u ms, "
					 "got '%s'",
					 PTD_PROTO_COUNTERS_EVERY_MIN,
					 PTD_PROTO_COUNTERS_EVERY_MAX, optarg);
				return EXIT_USAGE;
			}
			break;
		case 'k':
			if (ptd_parse_u64(optarg, 10, &v) < 0 || !v ||
			    v > PTD_PROTO_COUNTERS_TOP_MAX) {
				errx_msg("--top: expected 1 to %u, got '%s'",
					 PTD_PROTO_COUNTERS_TOP_MAX, optarg);
				return EXIT_USAGE;
			}
			t.k = (uint32_t)v;
			break;
		case '1':
			t.once = true;
			break;
		case 'h':
			printf("Usage: ptctl top SESSION [--interval MS] "
			       "[--top K] [--once]\n\n"
			       "The session's K (default 20) most executed "
			       "functions by exact instruction\ncount (the "
			       "session must count: attach --counters), "
			       "redrawn every MS ms\n(default 1000) until the "
			       "session ends.  On a terminal the screen is "
			       "redrawn;\notherwise each view is a block of "
			       "lines ending in an empty one.  --once:\none "
			       "view of the counts as they are now, at "
			       "once.\n");
			return 0;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		errx_msg("expected one SESSION (ptctl top SESSION "
			 "[--interval MS] [--top K] [--once])");
		return EXIT_USAGE;
	}
	r = parse_session_arg(argv[optind], &t.session);
	if (r)
		return r;
	t.fn = calloc(t.k, sizeof(*t.fn));
	if (!t.fn) {
		errx_msg("out of memory");
		return EXIT_STREAM;
	}
	t.tty = isatty(STDOUT_FILENO) == 1;
	stream_filter_init(&spec);
	spec.kinds = PTD_REC_BIT(PTD_REC_COUNTERS);
	spec.counters_top = t.k;
	spec.counters_every_ms = (uint32_t)interval;
	r = client_connect(&f);
	/* functions by name where the session has symbols (its status says
	 * so), else by module */
	if (!r) {
		struct ptd_request req;
		struct ptd_response resp;

		client_request(&req, PTD_CMD_STATUS);
		req.has_session = true;
		req.session = t.session;
		r = client_call(f, &req, false, &resp);
		if (!r) {
			spec.symbols = cJSON_GetObjectItemCaseSensitive(
					       resp.result, "symbols") != NULL;
			ptd_response_fini(&resp);
		}
	}
	if (!r && t.once)
		r = top_once(f, &t);
	else if (!r)
		r = subscribe_and_follow_lines(f, t.session, &spec, top_line,
					       &t);
	if (f)
		fclose(f);
	free(t.fn);
	return r;
}
