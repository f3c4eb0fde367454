/* SPDX-License-Identifier: MIT */
/*
 * Triggers (trigger.h): their text form, and the uprobes of
 * daemon/bpf/trigger.bpf.c through the skeleton bpftool generated from
 * it at build time.
 */
#include <errno.h>
#include <linux/capability.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "daemon/bpfload.h"
#include "daemon/cred.h"
#include "daemon/trigger.h"

const char *ptd_trigger_action_name(enum ptd_trigger_action a)
{
	switch (a) {
	case PTD_TRIGGER_SNAPSHOT:
		return "snapshot";
	case PTD_TRIGGER_START:
		return "start";
	case PTD_TRIGGER_STOP:
		return "stop";
	}
	return "?";
}

static bool symbol_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       c == '.' || c == '$' || c == '@' ||
	       (!first && c >= '0' && c <= '9');
}

static int parse_where(const char *text, const char *w,
		       struct ptd_trigger_spec *ret, struct ptd_diag *diag)
{
	size_t n = strlen(w), i;

	if (!n)
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': no "
				 "symbol or offset after the last ':'", text);
	if (w[0] == '0' && (w[1] == 'x' || w[1] == 'X')) {
		uint64_t v = 0;

		if (n == 2 || n > 18)
			return ptd_diagf(diag, -PTD_EFORMAT, "trigger "
					 "'%.200s': offset '%s' must be 0x and "
					 "1 to 16 hex digits", text, w);
		for (i = 2; i < n; i++) {
			char c = w[i];
			unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
				   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
				   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
							  : 16u;

			if (d > 15)
				return ptd_diagf(diag, -PTD_EFORMAT, "trigger "
						 "'%.200s': offset '%s': '%c' "
						 "is no hex digit", text, w, c);
			v = v << 4 | d;
		}
		ret->has_offset = true;
		ret->offset = v;
		return 0;
	}
	if (n > PTD_TRIGGER_SYMBOL_MAX)
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': the "
				 "symbol is longer than %d bytes", text,
				 PTD_TRIGGER_SYMBOL_MAX);
	for (i = 0; i < n; i++)
		if (!symbol_char(w[i], i == 0))
			return ptd_diagf(diag, -PTD_EFORMAT, "trigger "
					 "'%.200s': symbol '%.255s': character "
					 "%zu ('%c') may not be in a symbol "
					 "(0x... for a file offset)", text, w,
					 i + 1, w[i]);
	memcpy(ret->symbol, w, n + 1);
	return 0;
}

/* CATEGORY:NAME of a tracepoint trigger (@tp, after "tracepoint:"). */
static int parse_tracepoint(const char *text, const char *tp,
			    struct ptd_trigger_spec *ret, struct ptd_diag *diag)
{
	const char *colon = strchr(tp, ':');
	char *dst[2] = { ret->tp_category, ret->tp_name };
	const char *what[2] = { "category", "name" };
	const char *part[2] = { tp, colon ? colon + 1 : NULL };
	size_t len[2];

	if (!colon || strchr(colon + 1, ':'))
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': "
				 "expected ACTION:tracepoint:CATEGORY:NAME "
				 "(e.g. snapshot:tracepoint:syscalls:"
				 "sys_enter_openat)", text);
	len[0] = (size_t)(colon - tp);
	len[1] = strlen(colon + 1);
	for (int k = 0; k < 2; k++) {
		if (!len[k] || len[k] > PTD_TRIGGER_TP_NAME_MAX)
			return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': "
					 "the tracepoint's %s must be 1 to %d "
					 "characters", text, what[k],
					 PTD_TRIGGER_TP_NAME_MAX);
		for (size_t i = 0; i < len[k]; i++) {
			char c = part[k][i];

			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '_'))
				return ptd_diagf(diag, -PTD_EFORMAT,
						 "trigger '%.200s': the "
						 "tracepoint's %s: character "
						 "%zu ('%c') is not a letter, "
						 "digit or '_'", text, what[k],
						 i + 1, c);
		}
		memcpy(dst[k], part[k], len[k]);
		dst[k][len[k]] = 0;
	}
	ret->tracepoint = true;
	return 0;
}

int ptd_trigger_spec_parse(const char *text, struct ptd_trigger_spec *ret,
			   struct ptd_diag *diag)
{
	const char *a = strchr(text, ':'), *w = strrchr(text, ':');
	size_t flen;

	memset(ret, 0, sizeof(*ret));
	if (strlen(text) > PTD_TRIGGER_TEXT_MAX)
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger: longer than %d "
				 "bytes", PTD_TRIGGER_TEXT_MAX);
	if (!a || a == w)
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': expected "
				 "ACTION:FILE:SYMBOL or ACTION:FILE:0xOFFSET",
				 text);
	if ((size_t)(a - text) == 8 && !strncmp(text, "snapshot", 8))
		ret->action = PTD_TRIGGER_SNAPSHOT;
	else if ((size_t)(a - text) == 5 && !strncmp(text, "start", 5))
		ret->action = PTD_TRIGGER_START;
	else if ((size_t)(a - text) == 4 && !strncmp(text, "stop", 4))
		ret->action = PTD_TRIGGER_STOP;
	else
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': unknown "
				 "action '%.*s' (snapshot, start, stop)", text,
				 (int)(a - text > 64 ? 64 : a - text), text);
	if (!strncmp(a + 1, "tracepoint:", 11))
		return parse_tracepoint(text, a + 12, ret, diag);
	flen = (size_t)(w - a - 1);
	if (!flen)
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': no file",
				 text);
	if (flen >= sizeof(ret->file))
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': the "
				 "file name is longer than %zu bytes", text,
				 sizeof(ret->file) - 1);
	memcpy(ret->file, a + 1, flen);
	ret->file[flen] = 0;
	if (ret->file[0] != '/' && strchr(ret->file, '/'))
		return ptd_diagf(diag, -PTD_EFORMAT, "trigger '%.200s': file "
				 "'%.200s' must be an absolute path or a file "
				 "name without '/'", text, ret->file);
	return parse_where(text, w + 1, ret, diag);
}

#ifdef PTD_HAVE_BPF

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverlength-strings"
#pragma GCC diagnostic ignored "-Wcast-qual"
#include "trigger.skel.h"
#pragma GCC diagnostic pop

struct ptd_triggers {
	struct trigger_bpf *skel;
	struct ring_buffer *rb;
	void (*fn)(void *ctx, const struct ptd_trigger_hit *h);
	void *ctx;
};

struct ptd_uprobe {
	struct bpf_link *link;
};

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static int on_hit(void *ctx, void *data, size_t len)
{
	struct ptd_triggers *t = ctx;
	struct ptd_trigger_hit h;

	if (len < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	t->fn(t->ctx, &h);
	return 0;
}

int ptd_triggers_new(struct ptd_triggers **ret, struct ptd_diag *diag)
{
	struct ptd_bpf_pidns ns;
	struct ptd_triggers *t;
	int r;

	*ret = NULL;
	r = ptd_bpf_check("triggers", &ns, diag);
	if (r < 0)
		return r;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	(void)libbpf_set_print(quiet);
	t->skel = trigger_bpf__open();
	if (!t->skel) {
		r = ptd_bpf_refusal(-errno, "triggers", diag);
		goto err;
	}
	t->skel->rodata->pidns_translate = !ns.initial;
	t->skel->rodata->pidns_dev = ns.dev;
	t->skel->rodata->pidns_ino = ns.ino;
	r = trigger_bpf__load(t->skel);
	if (r < 0) {
		(void)ptd_bpf_refusal(r, "triggers", diag);
		goto err;
	}
	r = ptd_bpf_ringbuf(bpf_map__fd(t->skel->maps.hits), on_hit, t,
			    &t->rb, diag);
	if (r < 0)
		goto err;
	*ret = t;
	return 0;
err:
	ptd_triggers_free(t);
	return r;
}

void ptd_triggers_free(struct ptd_triggers *t)
{
	if (!t)
		return;
	ring_buffer__free(t->rb);
	trigger_bpf__destroy(t->skel);
	free(t);
}

int ptd_triggers_fd(const struct ptd_triggers *t)
{
	return t->rb ? ring_buffer__epoll_fd(t->rb) : -1;
}

uint64_t ptd_triggers_missed(const struct ptd_triggers *t)
{
	return t->skel->bss ? __atomic_load_n(&t->skel->bss->missed,
					      __ATOMIC_RELAXED)
			    : 0;
}

int ptd_triggers_attach(struct ptd_triggers *t, const char *path,
			uint64_t offset, pid_t pid, uint32_t id,
			struct ptd_uprobe **ret, struct ptd_diag *diag)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = PTD_TRIGGER_COOKIE(pid, id));
	struct ptd_uprobe *u;
	int r;

	*ret = NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->link = bpf_program__attach_uprobe_opts(t->skel->progs.ptd_on_trigger,
						  pid, path, (size_t)offset,
						  &o);
	if (!u->link) {
		r = -errno;
		free(u);
		/* The program is loaded (CAP_BPF, CAP_PERFMON): the kernel
		 * refuses the uprobe itself, as it has since "perf: Require
		 * CAP_SYS_ADMIN for uprobes" (2025, backported to the
		 * stable kernels). */
		if (r == -EACCES && !ptd_cred_has_cap(CAP_SYS_ADMIN))
			return ptd_diagf(diag, -EPERM, "the kernel refused the "
					 "uprobe: placing one needs "
					 "CAP_SYS_ADMIN (kernels with the "
					 "2025 fix 'perf: Require "
					 "CAP_SYS_ADMIN for uprobes', also "
					 "in the stable ones), which ptd does not hold; "
					 "ptd.service leaves it out: grant it "
					 "with a drop-in (ptd(8), 'Triggers "
					 "on functions'), or use a tracepoint "
					 "trigger, which CAP_PERFMON allows");
		if (r == -EPERM || r == -EACCES)
			return ptd_bpf_refusal(r, "triggers", diag);
		return ptd_diagf(diag, r, "the kernel refused the uprobe at "
				 "offset %#" PRIx64 ": %s", offset,
				 strerror(-r));
	}
	*ret = u;
	return 0;
}

int ptd_triggers_attach_tracepoint(struct ptd_triggers *t,
				   const char *category, const char *name,
				   pid_t pid, uint32_t id,
				   struct ptd_uprobe **ret,
				   struct ptd_diag *diag)
{
	LIBBPF_OPTS(bpf_tracepoint_opts, o,
		    .bpf_cookie = PTD_TRIGGER_COOKIE(pid, id));
	struct ptd_uprobe *u;
	int r;

	*ret = NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->link = bpf_program__attach_tracepoint_opts(
		t->skel->progs.ptd_on_tracepoint, category, name, &o);
	if (!u->link) {
		r = -errno;
		free(u);
		if (r == -EPERM || r == -EACCES)
			return ptd_bpf_refusal(r, "triggers", diag);
		if (r == -ENOENT)
			return ptd_diagf(diag, r, "the kernel has no "
					 "tracepoint %s:%s (tracefs lists them "
					 "under events/)", category, name);
		return ptd_diagf(diag, r, "the kernel refused the tracepoint "
				 "%s:%s: %s", category, name, strerror(-r));
	}
	*ret = u;
	return 0;
}

void ptd_uprobe_free(struct ptd_uprobe *u)
{
	if (!u)
		return;
	bpf_link__destroy(u->link);
	free(u);
}

int ptd_triggers_drain(struct ptd_triggers *t,
		       void (*fn)(void *ctx, const struct ptd_trigger_hit *h),
		       void *ctx)
{
	if (!t->rb)
		return 0;
	t->fn = fn;
	t->ctx = ctx;
	return ring_buffer__consume(t->rb);
}

#else /* !PTD_HAVE_BPF */

int ptd_triggers_new(struct ptd_triggers **ret, struct ptd_diag *diag)
{
	*ret = NULL;
	return ptd_diagf(diag, -PTD_EUNSUPPORTED,
			 "this ptd was built without its BPF programs (clang "
			 "or bpftool was missing at build time, or "
			 "-Dbpf=disabled): triggers need them");
}

void ptd_triggers_free(struct ptd_triggers *t)
{
}

int ptd_triggers_fd(const struct ptd_triggers *t)
{
	return -1;
}

uint64_t ptd_triggers_missed(const struct ptd_triggers *t)
{
	return 0;
}

int ptd_triggers_attach(struct ptd_triggers *t, const char *path,
			uint64_t offset, pid_t pid, uint32_t id,
			struct ptd_uprobe **ret, struct ptd_diag *diag)
{
	*ret = NULL;
	return -ENOSYS;
}

int ptd_triggers_attach_tracepoint(struct ptd_triggers *t,
				   const char *category, const char *name,
				   pid_t pid, uint32_t id,
				   struct ptd_uprobe **ret,
				   struct ptd_diag *diag)
{
	*ret = NULL;
	return -ENOSYS;
}

void ptd_uprobe_free(struct ptd_uprobe *u)
{
}

int ptd_triggers_drain(struct ptd_triggers *t,
		       void (*fn)(void *ctx, const struct ptd_trigger_hit *h),
		       void *ctx)
{
	return -ENOSYS;
}

#endif
