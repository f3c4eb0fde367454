/* SPDX-License-Identifier: MIT */
/*
 * Address filters: perf's --filter grammar in, the kernel's
 * PERF_EVENT_IOC_SET_FILTER string and libipt's filter config out.
 */
#include "perf/addrfilter.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/strutil.h"

/* A cursor over the filter text; columns are 1-based byte offsets. */
struct cur {
	const char *text;
	const char *p;
};

static size_t col(const struct cur *c, const char *at)
{
	return (size_t)(at - c->text) + 1;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n';
}

static bool is_sep(char ch)
{
	return is_space(ch) || ch == ',';
}

/* A number ends at a separator, '/', '@' or the end. */
static bool ends_number(char ch)
{
	return ch == '\0' || is_sep(ch) || ch == '/' || ch == '@';
}

static void skip_spaces(struct cur *c)
{
	while (is_space(*c->p))
		c->p++;
}

static int parse_number(struct cur *c, const char *what, uint64_t *ret,
			struct ptd_diag *diag)
{
	const char *s = c->p;
	size_t n = 0;
	int err;

	while (!ends_number(s[n]))
		n++;
	if (n == 0)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: expected the %s", col(c, s),
				 what);
	err = ptd_parse_u64n(s, n, 0, ret);
	if (err == -ERANGE)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: %s '%.*s' is larger than 64 bits",
				 col(c, s), what, (int)(n > 64 ? 64 : n), s);
	if (err < 0)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: %s '%.*s' is not a number "
				 "(decimal or 0x-hex; symbol names are not "
				 "supported)", col(c, s), what,
				 (int)(n > 64 ? 64 : n), s);
	c->p = s + n;
	return 0;
}

/* The action word: returns 0 = filter, 1 = start, 2 = stop, 3 = tracestop,
 * or a negative error. */
static int parse_action(struct cur *c, struct ptd_diag *diag)
{
	static const char *const names[] = { "filter", "start", "stop",
					     "tracestop" };
	const char *s = c->p;
	size_t n = 0, i;

	while (s[n] && !is_sep(s[n]))
		n++;
	for (i = 0; i < PTD_ARRAY_SIZE(names); i++) {
		if (strlen(names[i]) == n && memcmp(s, names[i], n) == 0) {
			c->p = s + n;
			return (int)i;
		}
	}
	return ptd_diagf(diag, -PTD_EFORMAT,
			 "column %zu: unknown action '%.*s' (expected filter, "
			 "start, stop or tracestop)", col(c, s),
			 (int)(n > 32 ? 32 : n), s);
}

static int parse_file(struct cur *c, char **ret, struct ptd_diag *diag)
{
	const char *s = c->p;
	size_t n = 0;

	while (s[n] && !is_sep(s[n]))
		n++;
	if (n == 0)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: expected a file name after '@'",
				 col(c, s));
	if (n >= PTD_ADDRFILTER_FILE_MAX)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "column %zu: file name longer than %d bytes",
				 col(c, s), PTD_ADDRFILTER_FILE_MAX - 1);
	*ret = strndup(s, n);
	if (!*ret)
		return -ENOMEM;
	c->p = s + n;
	return 0;
}

/* Check what Intel PT can do with one parsed filter. */
static int check_entry(const struct cur *c, int action, bool has_size,
		       struct ptd_addrfilter_entry *e, struct ptd_diag *diag)
{
	if (action == 1)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: 'start' (trace from an address) "
				 "is not supported by Intel PT, which filters "
				 "address ranges only: use 'filter "
				 "START/SIZE'", e->column);
	if (!has_size)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: '%s' needs a size ('%s "
				 "START/SIZE[@FILE]'): Intel PT filters "
				 "address ranges only", e->column,
				 action == 0 ? "filter" : action == 2
					 ? "stop" : "tracestop",
				 action == 0 ? "filter" : "tracestop");
	if (e->size == 0)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: size must not be 0", e->column);
	if (e->start > UINT64_MAX - (e->size - 1))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: range 0x%" PRIx64 "/0x%" PRIx64
				 " goes past the end of the address space",
				 e->column, e->start, e->size);
	(void)c;
	e->action = action == 0 ? PTD_ADDRFILTER_FILTER
				: PTD_ADDRFILTER_TRACESTOP;
	return 0;
}

/* Parse one filter at c->p (at its action word). */
static int parse_one(struct cur *c, struct ptd_addrfilter_entry *e,
		     struct ptd_diag *diag)
{
	bool has_size = false;
	int action, err;

	memset(e, 0, sizeof(*e));
	e->column = col(c, c->p);
	action = parse_action(c, diag);
	if (action < 0)
		return action;
	if (!is_space(*c->p))
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: expected a space and the start "
				 "address after the action", col(c, c->p));
	skip_spaces(c);
	if ((err = parse_number(c, "start address", &e->start, diag)) < 0)
		return err;
	skip_spaces(c);
	if (*c->p == '/') {
		c->p++;
		skip_spaces(c);
		if ((err = parse_number(c, "size", &e->size, diag)) < 0)
			return err;
		has_size = true;
		skip_spaces(c);
	}
	if (*c->p == '@') {
		c->p++;
		skip_spaces(c);
		if ((err = parse_file(c, &e->file, diag)) < 0)
			return err;
	}
	/* What follows must start the next filter. */
	if (*c->p && !is_sep(*c->p) && c->p[-1] != ' ' && c->p[-1] != '\t' &&
	    c->p[-1] != '\n')
		err = ptd_diagf(diag, -PTD_EFORMAT,
				"column %zu: unexpected '%c'", col(c, c->p),
				*c->p);
	else
		err = check_entry(c, action, has_size, e, diag);
	if (err < 0) {
		free(e->file);
		e->file = NULL;
	}
	return err;
}

void ptd_addrfilter_fini(struct ptd_addrfilter *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->n && i < PTD_ADDRFILTER_MAX; i++) {
		free(f->v[i].file);
		f->v[i].file = NULL;
	}
	f->n = 0;
}

int ptd_addrfilter_parse(const char *text, uint32_t nr_addr_filters,
			 struct ptd_addrfilter *ret, struct ptd_diag *diag)
{
	struct ptd_addrfilter f;
	struct cur c;
	size_t count = 0, cap;
	int err;

	if (!text || !ret)
		return ptd_diagf(diag, -EINVAL, "no filter text");
	if (strlen(text) > PTD_ADDRFILTER_TEXT_MAX)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "filter text longer than %d bytes",
				 PTD_ADDRFILTER_TEXT_MAX);
	memset(&f, 0, sizeof(f));
	c.text = c.p = text;
	cap = nr_addr_filters < PTD_ADDRFILTER_MAX ? nr_addr_filters
						   : PTD_ADDRFILTER_MAX;
	for (;;) {
		struct ptd_addrfilter_entry e;

		while (is_sep(*c.p))
			c.p++;
		if (!*c.p)
			break;
		err = parse_one(&c, &e, diag);
		if (err < 0)
			goto fail;
		/* Keep parsing past the capacity so the message can say how
		 * many there are; only the first @cap are kept. */
		if (count < cap)
			f.v[f.n++] = e;
		else
			free(e.file);
		count++;
	}
	if (count == 0) {
		err = ptd_diagf(diag, -PTD_EFORMAT,
				"column 1: empty filter (expected 'filter "
				"START/SIZE[@FILE]')");
		goto fail;
	}
	if (count > cap) {
		err = ptd_diagf(diag, -PTD_ELIMIT,
				"%zu filter%s but this CPU supports %zu%s",
				count, count == 1 ? "" : "s", cap,
				nr_addr_filters > PTD_ADDRFILTER_MAX
					? " (ptd's limit)" : "");
		goto fail;
	}
	*ret = f;
	return 0;
fail:
	ptd_addrfilter_fini(&f);
	return err;
}

int ptd_addrfilter_kernel_string(const struct ptd_addrfilter *f, char *buf,
				 size_t cap)
{
	size_t len = 0, i;

	if (!f || !buf || cap == 0)
		return -EINVAL;
	buf[0] = '\0';
	for (i = 0; i < f->n; i++) {
		const struct ptd_addrfilter_entry *e = &f->v[i];
		/* perf writes "tracestop" as the kernel's "stop" + size. */
		const char *act = e->action == PTD_ADDRFILTER_FILTER ? "filter"
								      : "stop";
		int n = snprintf(buf + len, cap - len,
				 "%s%s 0x%" PRIx64 "/0x%" PRIx64 "%s%s",
				 i ? "," : "", act, e->start, e->size,
				 e->file ? "@" : "", e->file ? e->file : "");

		if (n < 0 || (size_t)n >= cap - len) {
			buf[0] = '\0';
			return -ENAMETOOLONG;
		}
		len += (size_t)n;
	}
	return 0;
}

/* Whether @m maps code of @file. */
static bool exec_map_of(const struct ptd_map *m, const char *file)
{
	return (m->prot & PTD_MAP_PROT_X) && m->kind == PTD_MAP_FILE &&
	       strcmp(m->path, file) == 0;
}

/* The executable mapping of @file whose file offsets hold @off. */
static const struct ptd_map *find_file_map(const struct ptd_maps *maps,
					   const char *file, uint64_t off)
{
	size_t i;

	for (i = 0; i < maps->n; i++) {
		const struct ptd_map *m = &maps->v[i];

		if (!exec_map_of(m, file))
			continue;
		if (off >= m->offset && off - m->offset < m->end - m->start)
			return m;
	}
	return NULL;
}

static int resolve(const struct ptd_addrfilter_entry *e,
		   const struct ptd_maps *maps, uint64_t *ret_a,
		   uint64_t *ret_b, struct ptd_diag *diag)
{
	const struct ptd_map *m;
	uint64_t len, last;

	if (!e->file) {
		*ret_a = e->start;
		*ret_b = e->start + (e->size - 1);
		return 0;
	}
	if (!maps)
		return ptd_diagf(diag, -EINVAL,
				 "column %zu: file range needs the process's "
				 "maps", e->column);
	m = find_file_map(maps, e->file, e->start);
	if (!m)
		return ptd_diagf(diag, -PTD_ENOIMAGE,
				 "column %zu: no executable mapping of '%s' "
				 "holds file offset 0x%" PRIx64, e->column,
				 e->file, e->start);
	len = m->end - m->start;
	last = e->start + (e->size - 1);
	if (last - m->offset >= len)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "column %zu: range 0x%" PRIx64 "/0x%" PRIx64
				 " of '%s' is not inside one mapping (the "
				 "mapping at 0x%" PRIx64 "-0x%" PRIx64
				 " holds file offsets 0x%" PRIx64 "-0x%" PRIx64
				 "): the kernel may not configure it; split or "
				 "narrow it", e->column, e->start, e->size,
				 e->file, m->start, m->end, m->offset,
				 m->offset + len);
	*ret_a = m->start + (e->start - m->offset);
	*ret_b = *ret_a + (e->size - 1);
	return 0;
}

/* Whether @maps has an executable mapping of @file. */
static bool file_mapped(const struct ptd_maps *maps, const char *file)
{
	for (size_t i = 0; maps && i < maps->n; i++)
		if (exec_map_of(&maps->v[i], file))
			return true;
	return false;
}

static void set_range(struct pt_conf_addr_filter *c, size_t i, uint32_t cfg,
		      uint64_t a, uint64_t b)
{
	switch (i) {
	case 0:
		c->config.ctl.addr0_cfg = cfg & 0xf;
		c->addr0_a = a;
		c->addr0_b = b;
		break;
	case 1:
		c->config.ctl.addr1_cfg = cfg & 0xf;
		c->addr1_a = a;
		c->addr1_b = b;
		break;
	case 2:
		c->config.ctl.addr2_cfg = cfg & 0xf;
		c->addr2_a = a;
		c->addr2_b = b;
		break;
	default:
		c->config.ctl.addr3_cfg = cfg & 0xf;
		c->addr3_a = a;
		c->addr3_b = b;
		break;
	}
}

int ptd_addrfilter_resolve(const struct ptd_addrfilter *f,
			   const struct ptd_maps *maps, const char *root,
			   struct pt_conf_addr_filter *ret,
			   unsigned *ret_pending, struct ptd_diag *diag)
{
	struct pt_conf_addr_filter c;
	unsigned pending = 0;
	size_t i;
	int err;

	if (!f || !ret || f->n > PTD_ADDRFILTER_MAX)
		return ptd_diagf(diag, -EINVAL, "bad filter argument");
	memset(&c, 0, sizeof(c));
	for (i = 0; i < f->n; i++) {
		const struct ptd_addrfilter_entry *e = &f->v[i];
		uint32_t cfg = e->action == PTD_ADDRFILTER_FILTER ? 1 : 2;
		uint64_t a = 0, b = 0;

		if (ret_pending && e->file && maps &&
		    !file_mapped(maps, e->file)) {
			char path[PTD_ADDRFILTER_FILE_MAX + 64];

			/* as the kernel: the file must exist, mapped or not */
			(void)snprintf(path, sizeof(path), "%s%s",
				       root ? root : "", e->file);
			if (root && access(path, F_OK) < 0)
				return ptd_diagf(diag, -PTD_ENOIMAGE,
						 "column %zu: '%s': %s",
						 e->column, e->file,
						 strerror(errno));
			pending |= 1u << i;
		} else if ((err = resolve(e, maps, &a, &b, diag)) < 0) {
			return err;
		}
		set_range(&c, i, cfg, a, b);
	}
	*ret = c;
	if (ret_pending)
		*ret_pending = pending;
	return 0;
}

int ptd_addrfilter_to_config(const struct ptd_addrfilter *f,
			     const struct ptd_maps *maps,
			     struct pt_conf_addr_filter *ret,
			     struct ptd_diag *diag)
{
	return ptd_addrfilter_resolve(f, maps, NULL, ret, NULL, diag);
}

int ptd_addrfilter_apply(int fd, const char *kernel_string,
			 struct ptd_diag *diag)
{
	int err;

	if (!kernel_string)
		return ptd_diagf(diag, -EINVAL, "no filter string");
	if (ioctl(fd, PERF_EVENT_IOC_SET_FILTER, kernel_string) == 0)
		return 0;
	err = -errno;
	switch (err) {
	case -EINVAL:
		return ptd_diagf(diag, err,
				 "the kernel refused address filter '%s': a "
				 "user-space range needs a regular file and a "
				 "per-thread event, a kernel range needs "
				 "kernel tracing, and the count must not exceed "
				 "nr_addr_filters (%s)", kernel_string,
				 ptd_strerror(err));
	case -EOPNOTSUPP:
		return ptd_diagf(diag, err,
				 "address filter '%s' not supported: this "
				 "event's PMU cannot filter addresses, or a "
				 "range has no size (%s)", kernel_string,
				 ptd_strerror(err));
	default:
		return ptd_diagf(diag, err,
				 "failed to set address filter '%s': %s",
				 kernel_string, ptd_strerror(err));
	}
}
