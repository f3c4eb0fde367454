/* SPDX-License-Identifier: MIT */
/*
 * Strict /proc/PID/maps parser.
 *
 * The kernel prints (fs/proc/task_mmu.c show_map_vma):
 *   "%08lx-%08lx %c%c%c%c %08llx %02x:%02x %lu " then, if there is a name,
 *   padding spaces and the name.
 * Every field is parsed with the strict number parsers of common/strutil.h;
 * fields are separated by exactly one space, and whatever follows the inode
 * after padding is the pathname (it may contain spaces; the kernel escapes
 * newlines in it as "\012", so a line never holds a raw newline).
 */
#include "aspace/maps.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "common/strutil.h"

/* A pathname longer than this cannot come from the kernel (d_path works in a
 * page, and escaping at most quadruples a byte). */
#define MAPS_MAX_PATH (4u * 4096u)

static const char deleted_suffix[] = " (deleted)";

/* A cursor over one line, for the field parsers below. */
struct line {
	const char *p;		/* next unread byte */
	const char *end;	/* one past the line's last byte */
	const char *origin;
	size_t lineno;
};

static int line_err(const struct line *l, struct ptd_diag *diag,
		    const char *what)
{
	return ptd_diagf(diag, -PTD_EFORMAT, "%s:%zu: %s", l->origin,
			 l->lineno, what);
}

/* Take the bytes up to (not including) @stop, or to the line end if @stop
 * is 0; they must be non-empty.  Advances past @stop. */
static int take_field(struct line *l, char stop, const char **ret_s,
		      size_t *ret_len)
{
	const char *s = l->p, *q = s;

	while (q < l->end && *q != stop && *q != ' ')
		q++;
	if (stop) {
		if (q >= l->end || *q != stop)
			return -1;
	}
	if (q == s)
		return -1;
	*ret_s = s;
	*ret_len = (size_t)(q - s);
	l->p = stop ? q + 1 : q;
	return 0;
}

static int take_hex(struct line *l, char stop, uint64_t *ret)
{
	const char *s;
	size_t n;

	if (take_field(l, stop, &s, &n) < 0)
		return -1;
	return ptd_parse_u64n(s, n, 16, ret) < 0 ? -1 : 0;
}

static int parse_perms(struct line *l, struct ptd_map *m)
{
	const char *s;
	size_t n;

	if (take_field(l, ' ', &s, &n) < 0 || n != 4)
		return -1;
	m->prot = 0;
	if (s[0] == 'r')
		m->prot |= PTD_MAP_PROT_R;
	else if (s[0] != '-')
		return -1;
	if (s[1] == 'w')
		m->prot |= PTD_MAP_PROT_W;
	else if (s[1] != '-')
		return -1;
	if (s[2] == 'x')
		m->prot |= PTD_MAP_PROT_X;
	else if (s[2] != '-')
		return -1;
	if (s[3] == 's')
		m->shared = true;
	else if (s[3] == 'p')
		m->shared = false;
	else
		return -1;
	return 0;
}

/* Classify @path (as printed, with any " (deleted)" still on it) and set
 * m->kind; returns the length of the path without the suffix. */
static size_t classify(const char *path, size_t len, struct ptd_map *m)
{
	static const struct {
		const char *name;
		enum ptd_map_kind kind;
	} special[] = {
		{ "[heap]", PTD_MAP_HEAP },
		{ "[stack]", PTD_MAP_STACK },
		{ "[vdso]", PTD_MAP_VDSO },
		{ "[vvar]", PTD_MAP_VVAR },
		{ "[vsyscall]", PTD_MAP_VSYSCALL },
	};
	size_t sl = sizeof(deleted_suffix) - 1;

	if (len == 0) {
		m->kind = PTD_MAP_ANON;
		return 0;
	}
	if (path[0] == '/') {
		if (len > sl && memcmp(path + len - sl, deleted_suffix, sl) == 0) {
			m->kind = PTD_MAP_DELETED;
			return len - sl;
		}
		m->kind = PTD_MAP_FILE;
		return len;
	}
	for (size_t i = 0; i < PTD_ARRAY_SIZE(special); i++) {
		if (strlen(special[i].name) == len &&
		    memcmp(special[i].name, path, len) == 0) {
			m->kind = special[i].kind;
			return len;
		}
	}
	m->kind = PTD_MAP_OTHER;
	return len;
}

/* The pathname: after the inode, nothing, or one space, padding spaces and
 * the name (which keeps any inner or trailing spaces it has). */
static int parse_path(struct line *l, struct ptd_map *m,
		      struct ptd_diag *diag)
{
	size_t len;

	if (l->p < l->end) {
		if (*l->p != ' ')
			return line_err(l, diag, "junk after the inode");
		while (l->p < l->end && *l->p == ' ')
			l->p++;
	}
	len = (size_t)(l->end - l->p);
	if (len > MAPS_MAX_PATH)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s:%zu: pathname longer than %u bytes",
				 l->origin, l->lineno, MAPS_MAX_PATH);
	len = classify(l->p, len, m);
	m->path = strndup(l->p, len);
	if (!m->path)
		return -ENOMEM;
	return 0;
}

/* Parse one line (without its newline) into *m. */
static int parse_line(struct line *l, struct ptd_map *m,
		      struct ptd_diag *diag)
{
	uint64_t v;

	memset(m, 0, sizeof(*m));
	if (memchr(l->p, '\0', (size_t)(l->end - l->p)))
		return line_err(l, diag, "NUL byte in line");
	if (take_hex(l, '-', &m->start) < 0)
		return line_err(l, diag,
				"field 'start': expected hex digits and '-'");
	if (take_hex(l, ' ', &m->end) < 0)
		return line_err(l, diag,
				"field 'end': expected hex digits and ' '");
	if (m->start >= m->end)
		return line_err(l, diag, "field 'end': not above start");
	if (parse_perms(l, m) < 0)
		return line_err(l, diag,
				"field 'perms': expected [r-][w-][x-][ps]");
	if (take_hex(l, ' ', &m->offset) < 0)
		return line_err(l, diag, "field 'offset': expected hex digits");
	if (take_hex(l, ':', &v) < 0 || v > UINT32_MAX)
		return line_err(l, diag, "field 'dev': bad major number");
	m->dev_major = (uint32_t)v;
	if (take_hex(l, ' ', &v) < 0 || v > UINT32_MAX)
		return line_err(l, diag, "field 'dev': bad minor number");
	m->dev_minor = (uint32_t)v;
	{
		const char *s;
		size_t n;

		if (take_field(l, 0, &s, &n) < 0 ||
		    ptd_parse_u64n(s, n, 10, &m->inode) < 0)
			return line_err(l, diag,
					"field 'inode': expected decimal digits");
	}
	return parse_path(l, m, diag);
}

void ptd_maps_fini(struct ptd_maps *maps)
{
	if (!maps)
		return;
	for (size_t i = 0; i < maps->n; i++)
		free(maps->v[i].path);
	free(maps->v);
	maps->v = NULL;
	maps->n = 0;
}

static int maps_push(struct ptd_maps *m, size_t *cap, const struct ptd_map *e)
{
	if (m->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct ptd_map *v = reallocarray(m->v, ncap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->v = v;
		*cap = ncap;
	}
	m->v[m->n++] = *e;
	return 0;
}

int ptd_maps_parse(const char *text, size_t len, const char *origin,
		   struct ptd_maps *ret, struct ptd_diag *diag)
{
	struct ptd_maps maps = { 0 };
	size_t cap = 0, lineno = 0;
	const char *p = text, *end = text + len;
	int r;

	if (!ret || (!text && len))
		return -EINVAL;
	if (!origin)
		origin = "maps";
	if (len > PTD_MAPS_MAX_BYTES)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "%s: %zu bytes, more than the limit of %u",
				 origin, len, PTD_MAPS_MAX_BYTES);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct line l = { p, nl ? nl : end, origin, ++lineno };
		struct ptd_map m;

		if (lineno > PTD_MAPS_MAX_LINES) {
			r = ptd_diagf(diag, -PTD_ELIMIT,
				      "%s:%zu: more than %u lines", origin,
				      lineno, PTD_MAPS_MAX_LINES);
			goto fail;
		}
		r = parse_line(&l, &m, diag);
		if (r < 0)
			goto fail;
		if (maps.n && m.start < maps.v[maps.n - 1].end) {
			free(m.path);
			r = line_err(&l, diag,
				     "field 'start': overlaps or precedes the "
				     "previous mapping");
			goto fail;
		}
		r = maps_push(&maps, &cap, &m);
		if (r < 0) {
			free(m.path);
			goto fail;
		}
		p = nl ? nl + 1 : end;
	}
	*ret = maps;
	return 0;
fail:
	ptd_maps_fini(&maps);
	return r;
}

int ptd_maps_read_pid(const char *procroot, pid_t pid, struct ptd_maps *ret,
		      struct ptd_diag *diag)
{
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];
	size_t len;
	int r;

	if (!procroot || pid <= 0 || !ret)
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/%d/maps", procroot, (int)pid) >=
	    (int)sizeof(path))
		return ptd_diagf(diag, -ENAMETOOLONG, "'%s/%d/maps': %s",
				 procroot, (int)pid, ptd_strerror(-ENAMETOOLONG));
	r = ptd_file_read_all(path, PTD_MAPS_MAX_BYTES, &text, &len);
	if (r < 0)
		return ptd_diagf(diag, r, "failed to read '%s': %s", path,
				 ptd_strerror(r));
	return ptd_maps_parse(text, len, path, ret, diag);
}

const struct ptd_map *ptd_maps_find(const struct ptd_maps *maps,
				    uint64_t addr)
{
	size_t lo = 0, hi;

	if (!maps)
		return NULL;
	hi = maps->n;
	/* Sorted and disjoint (the parser refuses anything else). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ptd_map *m = &maps->v[mid];

		if (addr < m->start)
			hi = mid;
		else if (addr >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

const char *ptd_map_kind_name(enum ptd_map_kind kind)
{
	switch (kind) {
	case PTD_MAP_FILE:
		return "file";
	case PTD_MAP_DELETED:
		return "deleted";
	case PTD_MAP_ANON:
		return "anon";
	case PTD_MAP_HEAP:
		return "heap";
	case PTD_MAP_STACK:
		return "stack";
	case PTD_MAP_VDSO:
		return "vdso";
	case PTD_MAP_VVAR:
		return "vvar";
	case PTD_MAP_VSYSCALL:
		return "vsyscall";
	case PTD_MAP_OTHER:
		return "other";
	}
	return "unknown";
}
