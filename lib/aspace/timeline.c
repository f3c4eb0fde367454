/* SPDX-License-Identifier: MIT */
/*
 * The memory-map timeline: event list, JSON-lines form, and the per-thread
 * cursor that applies events to an image at their stream positions.
 *
 * Timeline files are untrusted: every line is bounded, every field is
 * type-checked, unknown and duplicate fields are refused, and snapshot file
 * names must stay inside the capture directory.
 */
#include "aspace/timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "aspace/fileid.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/strutil.h"

/* Integers in JSON numbers must survive a double: at most 2^53. */
#define TL_MAX_JSON_INT (UINT64_C(1) << 53)
#define TL_MAX_NAME 255u

static const char *const op_names[] = {
	[PTD_TL_MAP] = "map",
	[PTD_TL_SNAPSHOT] = "snapshot",
	[PTD_TL_UNMAP] = "unmap",
	[PTD_TL_EXEC] = "exec",
};

static const char *op_name(enum ptd_tl_op op)
{
	if ((size_t)op < PTD_ARRAY_SIZE(op_names))
		return op_names[op];
	return "?";
}

void ptd_timeline_init(struct ptd_timeline *tl)
{
	memset(tl, 0, sizeof(*tl));
}

static void event_free(struct ptd_tl_event *ev)
{
	free(ev->path);
	free(ev->name);
	free(ev->file);
	free(ev->pos);
	memset(ev, 0, sizeof(*ev));
}

void ptd_timeline_fini(struct ptd_timeline *tl)
{
	if (!tl)
		return;
	for (size_t i = 0; i < tl->n; i++)
		event_free(&tl->ev[i]);
	free(tl->ev);
	ptd_timeline_init(tl);
}

static int dup_str(const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

/* Deep copy of @src into *dst (seq included). */
static int event_copy(struct ptd_tl_event *dst, const struct ptd_tl_event *src)
{
	struct ptd_tl_event e = *src;

	e.path = e.name = e.file = NULL;
	e.pos = NULL;
	if (dup_str(src->path, &e.path) < 0 || dup_str(src->name, &e.name) < 0 ||
	    dup_str(src->file, &e.file) < 0)
		goto nomem;
	if (src->npos) {
		e.pos = calloc(src->npos, sizeof(*e.pos));
		if (!e.pos)
			goto nomem;
		memcpy(e.pos, src->pos, src->npos * sizeof(*e.pos));
	}
	*dst = e;
	return 0;
nomem:
	event_free(&e);
	return -ENOMEM;
}

static int timeline_reserve(struct ptd_timeline *tl)
{
	size_t cap;
	struct ptd_tl_event *v;

	if (tl->n < tl->cap)
		return 0;
	cap = tl->cap ? tl->cap * 2 : 64;
	v = reallocarray(tl->ev, cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	tl->ev = v;
	tl->cap = cap;
	return 0;
}

int64_t ptd_timeline_add(struct ptd_timeline *tl,
			 const struct ptd_tl_event *ev)
{
	struct ptd_tl_event *e;
	int r;

	if (!tl || !ev || (ev->npos && !ev->pos))
		return -EINVAL;
	if (tl->next_seq > INT64_MAX)
		return -ERANGE;
	r = timeline_reserve(tl);
	if (r < 0)
		return r;
	e = &tl->ev[tl->n];
	r = event_copy(e, ev);
	if (r < 0)
		return r;
	e->seq = tl->next_seq++;
	tl->n++;
	return (int64_t)e->seq;
}

int64_t ptd_tl_event_pos(const struct ptd_tl_event *ev, pid_t tid)
{
	for (size_t i = 0; i < ev->npos; i++) {
		if (ev->pos[i].tid == tid)
			return ev->pos[i].pos > INT64_MAX ?
				       INT64_MAX : (int64_t)ev->pos[i].pos;
	}
	return -1;
}

/* ---- writing ---- */

/* Write @s as a JSON string. */
static void write_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void write_hex(FILE *f, const char *key, uint64_t v)
{
	fprintf(f, ",\"%s\":\"0x%" PRIx64 "\"", key, v);
}

static int write_event(const struct ptd_tl_event *ev, FILE *f)
{
	if (ev->seq > TL_MAX_JSON_INT || (size_t)ev->op >= PTD_ARRAY_SIZE(op_names))
		return -ERANGE;
	fprintf(f, "{\"seq\":%" PRIu64 ",\"op\":\"%s\"", ev->seq,
		op_name(ev->op));
	if (ev->op != PTD_TL_EXEC) {
		write_hex(f, "start", ev->start);
		write_hex(f, "end", ev->end);
	}
	if (ev->op == PTD_TL_MAP)
		write_hex(f, "pgoff", ev->pgoff);
	if (ev->op == PTD_TL_MAP && ptd_file_id_known(&ev->id)) {
		fprintf(f, ",\"dev\":\"%02x:%02x\"", ev->id.dev_major,
			ev->id.dev_minor);
		write_hex(f, "ino", ev->id.ino);
	}
	if (ev->op == PTD_TL_MAP || ev->op == PTD_TL_EXEC) {
		if (!ev->path)
			return -EINVAL;
		fputs(",\"path\":", f);
		write_str(f, ev->path);
	}
	if (ev->op == PTD_TL_SNAPSHOT) {
		if (!ev->name || !ev->file)
			return -EINVAL;
		fputs(",\"name\":", f);
		write_str(f, ev->name);
		fputs(",\"file\":", f);
		write_str(f, ev->file);
	}
	fputs(",\"pos\":{", f);
	for (size_t i = 0; i < ev->npos; i++) {
		if (ev->pos[i].pos > TL_MAX_JSON_INT)
			return -ERANGE;
		fprintf(f, "%s\"%d\":%" PRIu64, i ? "," : "",
			(int)ev->pos[i].tid, ev->pos[i].pos);
	}
	fputs("}}\n", f);
	return 0;
}

int ptd_timeline_write(const struct ptd_timeline *tl, FILE *f)
{
	if (!tl || !f)
		return -EINVAL;
	for (size_t i = 0; i < tl->n; i++) {
		int r = write_event(&tl->ev[i], f);

		if (r < 0)
			return r;
	}
	if (fflush(f) != 0 || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}

int ptd_timeline_check_file(const struct ptd_timeline *tl, const char *path,
			    int fd, struct ptd_diag *diag)
{
	struct ptd_file_found found;
	struct stat st;
	bool have = false;

	if (!tl || !path)
		return -EINVAL;
	for (size_t i = 0; i < tl->n; i++) {
		const struct ptd_tl_event *ev = &tl->ev[i];
		int r;

		if (ev->op != PTD_TL_MAP || !ptd_file_id_known(&ev->id) ||
		    !ev->path || strcmp(ev->path, path))
			continue;
		if (!have) {
			if (fstat(fd, &st) < 0)
				return ptd_diagf(diag, -errno,
						 "cannot stat '%s': %s", path,
						 strerror(errno));
			ptd_file_id_of(fd, &st, &found);
			have = true;
		}
		r = ptd_file_id_check(&ev->id, &found, path, diag);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- parsing ---- */

enum tl_field {
	F_SEQ, F_OP, F_START, F_END, F_PGOFF, F_PATH, F_NAME, F_FILE, F_POS,
	F_DEV, F_INO, F_COUNT,
};

static const char *const field_names[F_COUNT + 1] = {
	[F_SEQ] = "seq", [F_OP] = "op", [F_START] = "start", [F_END] = "end",
	[F_PGOFF] = "pgoff", [F_PATH] = "path", [F_NAME] = "name",
	[F_FILE] = "file", [F_POS] = "pos", [F_DEV] = "dev", [F_INO] = "ino",
	[F_COUNT] = NULL,
};

#define BIT(f) (1u << (f))
#define COMMON (BIT(F_SEQ) | BIT(F_OP) | BIT(F_POS))
#define RANGE (BIT(F_START) | BIT(F_END))

/* Fields each op must have; it may have no others. */
static const unsigned op_fields[] = {
	[PTD_TL_MAP] = COMMON | RANGE | BIT(F_PGOFF) | BIT(F_PATH),
	[PTD_TL_SNAPSHOT] = COMMON | RANGE | BIT(F_NAME) | BIT(F_FILE),
	[PTD_TL_UNMAP] = COMMON | RANGE,
	[PTD_TL_EXEC] = COMMON | BIT(F_PATH),
};

/* Fields each op may have besides. */
static const unsigned op_optional[] = {
	[PTD_TL_MAP] = BIT(F_DEV) | BIT(F_INO),
	[PTD_TL_SNAPSHOT] = 0,
	[PTD_TL_UNMAP] = 0,
	[PTD_TL_EXEC] = 0,
};

/* Positions and seq are JSON numbers a double holds exactly (the writer
 * refuses more); start, end and pgoff are "0x" hex strings. */
#define INT (PTD_JSON_REQUIRED | PTD_JSON_INT_WHOLE)
#define HEX (PTD_JSON_REQUIRED | PTD_JSON_HEX)

/* A thread id: decimal, no sign or leading zero, 1..INT_MAX. */
static bool parse_tid(const char *s, pid_t *ret)
{
	uint64_t v;

	if (!s || s[0] == '0' || ptd_parse_u64(s, 10, &v) < 0 || v > INT_MAX)
		return false;
	*ret = (pid_t)v;
	return true;
}

static int parse_pos(const struct ptd_json_reader *r, const cJSON *obj,
		     struct ptd_tl_event *ev)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *j = NULL, *it;
	size_t n = 0;
	int e = ptd_json_get_object(r, obj, "", "pos", PTD_JSON_REQUIRED, &j);

	if (e < 0)
		return e;
	cJSON_ArrayForEach(it, j)
		n++;
	if (n == 0)
		return 0;
	ev->pos = calloc(n, sizeof(*ev->pos));
	if (!ev->pos)
		return -ENOMEM;
	cJSON_ArrayForEach(it, j) {
		struct ptd_tl_pos p;

		if (!parse_tid(it->string, &p.tid))
			return ptd_json_bad(r, "pos", "keys must be thread ids "
					    "(decimal, > 0)");
		e = ptd_json_read_u64(r, it,
				      ptd_json_path(path, "pos", it->string),
				      INT, 0, TL_MAX_JSON_INT, &p.pos);
		if (e < 0)
			return e;
		for (size_t i = 0; i < ev->npos; i++)
			if (ev->pos[i].tid == p.tid)
				return ptd_json_bad(r, "pos",
						    "duplicate thread id");
		ev->pos[ev->npos++] = p;
	}
	return 0;
}

static int parse_op(const struct ptd_json_reader *r, const cJSON *obj,
		    enum ptd_tl_op *ret)
{
	const char *s;
	int e = ptd_json_get_str(r, obj, "", "op", PTD_JSON_REQUIRED, &s);

	if (e < 0)
		return e;
	for (size_t i = 0; i < PTD_ARRAY_SIZE(op_names); i++) {
		if (strcmp(s, op_names[i]) == 0) {
			*ret = (enum ptd_tl_op)i;
			return 0;
		}
	}
	return ptd_json_bad(r, "op", "expected map, snapshot, unmap or exec");
}

/* Check that the op's fields, and only those, are present. */
static int check_fields(const struct ptd_json_reader *r, const cJSON *obj,
			enum ptd_tl_op op)
{
	unsigned want = op_fields[op];

	for (size_t k = 0; k < F_COUNT; k++) {
		bool have = cJSON_GetObjectItemCaseSensitive(
				    obj, field_names[k]) != NULL;

		if ((want & BIT(k)) && !have)
			return ptd_json_badf(r, -PTD_EFORMAT, field_names[k],
					     "missing (required for op '%s')",
					     op_name(op));
		if (!((want | op_optional[op]) & BIT(k)) && have)
			return ptd_json_badf(r, -PTD_EFORMAT, field_names[k],
					     "not allowed for op '%s'",
					     op_name(op));
	}
	return 0;
}

/* An optional member: absent is fine. */
static int optional(int e)
{
	return e == -ENOENT ? 0 : e;
}

/* "dev":"MAJ:MIN" (hex, as /proc/PID/maps prints it) and "ino":"0x..",
 * both or neither. */
static int parse_file_id(const struct ptd_json_reader *r, const cJSON *obj,
			 struct ptd_tl_event *ev)
{
	const char *dev = NULL, *colon;
	uint64_t maj, min, ino;
	int e = ptd_json_get_strn(r, obj, "", "dev", 0, 16, &dev);

	if (e == -ENOENT) {
		if (cJSON_GetObjectItemCaseSensitive(obj, "ino"))
			return ptd_json_bad(r, "ino", "given without dev");
		return 0;
	}
	if (e < 0)
		return e;
	colon = strchr(dev, ':');
	if (!colon || colon == dev ||
	    ptd_parse_u64n(dev, (size_t)(colon - dev), 16, &maj) < 0 ||
	    ptd_parse_u64(colon + 1, 16, &min) < 0 || maj > 0xfff ||
	    min > 0xfffff)
		return ptd_json_bad(r, "dev", "expected MAJOR:MINOR in hex, "
				    "as /proc/PID/maps has it (major up to "
				    "fff, minor up to fffff)");
	e = ptd_json_get_u64(r, obj, "", "ino", HEX, 1, UINT64_MAX, &ino);
	if (e < 0)
		return e;
	ev->id.dev_major = (uint32_t)maj;
	ev->id.dev_minor = (uint32_t)min;
	ev->id.ino = ino;
	return 0;
}

/* Parse the fields of one event object. */
static int parse_event(const struct ptd_json_reader *r, const cJSON *obj,
		       struct ptd_tl_event *ev)
{
	int e;

	if (!cJSON_IsObject(obj))
		return ptd_json_bad(r, "", "expected a JSON object");
	if ((e = ptd_json_check_keys(r, obj, "", field_names)) < 0 ||
	    (e = parse_op(r, obj, &ev->op)) < 0 ||
	    (e = check_fields(r, obj, ev->op)) < 0 ||
	    (e = ptd_json_get_u64(r, obj, "", "seq", INT, 0, TL_MAX_JSON_INT,
				  &ev->seq)) < 0 ||
	    (e = optional(ptd_json_get_u64(r, obj, "", "start",
					   PTD_JSON_HEX, 0, UINT64_MAX,
					   &ev->start))) < 0 ||
	    (e = optional(ptd_json_get_u64(r, obj, "", "end", PTD_JSON_HEX,
					   0, UINT64_MAX, &ev->end))) < 0)
		return e;
	if ((op_fields[ev->op] & RANGE) && ev->start >= ev->end)
		return ptd_json_bad(r, "end", "must be above start");
	if (op_fields[ev->op] & BIT(F_PGOFF)) {
		e = ptd_json_get_u64(r, obj, "", "pgoff", HEX, 0, UINT64_MAX,
				     &ev->pgoff);
		if (e < 0)
			return e;
		if (ev->pgoff > UINT64_MAX - (ev->end - ev->start))
			return ptd_json_bad(r, "pgoff",
					    "mapping runs past 2^64");
	}
	if (op_fields[ev->op] & BIT(F_PATH)) {
		e = ptd_json_get_strdup(r, obj, "", "path",
					PTD_JSON_REQUIRED | PTD_JSON_NONEMPTY,
					PATH_MAX - 1, &ev->path);
		if (e < 0)
			return e;
		if (ev->op == PTD_TL_MAP && ev->path[0] != '/')
			return ptd_json_bad(r, "path",
					    "expected an absolute path");
	}
	if ((e = parse_file_id(r, obj, ev)) < 0)
		return e;
	if (op_fields[ev->op] & BIT(F_NAME)) {
		e = ptd_json_get_strdup(r, obj, "", "name",
					PTD_JSON_REQUIRED | PTD_JSON_NONEMPTY,
					TL_MAX_NAME, &ev->name);
		if (e < 0)
			return e;
	}
	if (op_fields[ev->op] & BIT(F_FILE)) {
		e = ptd_json_get_strdup(r, obj, "", "file",
					PTD_JSON_REQUIRED | PTD_JSON_NONEMPTY,
					TL_MAX_NAME, &ev->file);
		if (e < 0)
			return e;
		if (!ptd_filename_is_plain(ev->file))
			return ptd_json_bad(r, "file",
					    "expected a plain file name (no "
					    "'/', not '.' or '..')");
	}
	return parse_pos(r, obj, ev);
}

/* Parse line @lineno (@len bytes, no newline) of @origin into *ev. */
static int parse_line(const char *origin, size_t lineno, const char *line,
		      size_t len, struct ptd_tl_event *ev,
		      struct ptd_diag *diag)
{
	char where[PATH_MAX + 32];
	struct ptd_json_reader r = { NULL, where, diag };
	struct ptd_json *doc = NULL;
	int e;

	(void)snprintf(where, sizeof(where), "%s:%zu", origin, lineno);
	if (len == 0)
		return ptd_json_bad(&r, "", "empty line");
	if (memchr(line, '\0', len))
		return ptd_json_bad(&r, "", "NUL byte in line");
	e = ptd_json_parse_all(line, len, where, &doc, diag);
	if (e < 0)
		return e;
	r.doc = doc;
	e = parse_event(&r, ptd_json_root(doc), ev);
	ptd_json_free(doc);
	return e;
}

int ptd_timeline_parse(const char *text, size_t len, const char *origin,
		       struct ptd_timeline *ret, struct ptd_diag *diag)
{
	struct ptd_timeline tl;
	const char *p = text, *end = text + len;
	size_t lineno = 0;
	int r = 0;

	if (!ret || (!text && len))
		return -EINVAL;
	origin = origin ? origin : "timeline";
	ptd_timeline_init(&tl);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		struct ptd_tl_event ev = { 0 };

		lineno++;
		if (n > PTD_TL_MAX_LINE) {
			r = ptd_diagf(diag, -PTD_ELIMIT,
				      "%s:%zu: line longer than %u bytes",
				      origin, lineno, PTD_TL_MAX_LINE);
			goto fail;
		}
		if (tl.n >= PTD_TL_MAX_EVENTS) {
			r = ptd_diagf(diag, -PTD_ELIMIT,
				      "%s:%zu: more than %u events", origin,
				      lineno, PTD_TL_MAX_EVENTS);
			goto fail;
		}
		r = parse_line(origin, lineno, p, n, &ev, diag);
		if (r == 0 && tl.n && ev.seq <= tl.ev[tl.n - 1].seq)
			r = ptd_diagf(diag, -PTD_EFORMAT,
				      "%s:%zu: seq: not above the previous "
				      "event's", origin, lineno);
		if (r == 0)
			r = timeline_reserve(&tl);
		if (r < 0) {
			event_free(&ev);
			goto fail;
		}
		tl.ev[tl.n++] = ev;
		p = nl ? nl + 1 : end;
	}
	tl.next_seq = tl.n ? tl.ev[tl.n - 1].seq + 1 : 0;
	*ret = tl;
	return 0;
fail:
	ptd_timeline_fini(&tl);
	return r;
}

/* ---- applying ---- */

static int apply_snapshot(const struct ptd_tl_event *ev, struct ptd_image *img,
			  const char *dir, struct ptd_diag *diag)
{
	_cleanup_free_ char *path = NULL;

	if (!ev->file || !ptd_filename_is_plain(ev->file))
		return -EINVAL;
	if (asprintf(&path, "%s/%s", dir ? dir : ".", ev->file) < 0) {
		path = NULL;
		return -ENOMEM;
	}
	return ptd_image_map_file(img, path, 0, ev->end - ev->start, ev->start,
				  ev->name ? ev->name : ev->file, diag);
}

int ptd_tl_event_apply(const struct ptd_tl_event *ev, struct ptd_image *img,
		       const char *dir, struct ptd_diag *diag)
{
	struct ptd_diag d = { "" };
	int r = -EINVAL;

	if (!ev || !img)
		return -EINVAL;
	switch (ev->op) {
	case PTD_TL_MAP:
		if (ev->path && ev->start < ev->end)
			r = ptd_image_map_file_id(img, ev->path, ev->pgoff,
						  ev->end - ev->start,
						  ev->start, NULL, &ev->id,
						  &d);
		break;
	case PTD_TL_SNAPSHOT:
		if (ev->start < ev->end)
			r = apply_snapshot(ev, img, dir, &d);
		break;
	case PTD_TL_UNMAP:
		r = ptd_image_unmap(img, ev->start, ev->end);
		break;
	case PTD_TL_EXEC:
		r = ptd_image_clear(img);
		break;
	}
	if (r >= 0)
		return 0;
	return ptd_diagf(diag, r, "timeline event %" PRIu64 " (%s 0x%" PRIx64
			 "-0x%" PRIx64 "): %s", ev->seq, op_name(ev->op),
			 ev->start, ev->end, d.msg[0] ? d.msg : ptd_strerror(r));
}

/* Set c->next_pos from the event at c->next.  Every thread alive at an
 * event has a position in it, so an event without one for the thread
 * (from c->next on, past its first_seq) happened after the thread's
 * stream had ended: it is not the thread's, and is passed over.  (It was
 * once applied at once: a library unmapped after a thread ended vanished
 * from the image the rest of that thread's trace was decoded with.) */
static void cursor_update(struct ptd_tl_cursor *c)
{
	int64_t pos = -1;
	bool left;

	while ((left = c->next < c->tl->n &&
			c->tl->ev[c->next].seq < c->end_seq) &&
	       (pos = ptd_tl_event_pos(&c->tl->ev[c->next], c->tid)) < 0)
		c->next++;
	c->next_pos = left ? (uint64_t)pos : UINT64_MAX;
}

int ptd_tl_cursor_init(struct ptd_tl_cursor *c, const struct ptd_timeline *tl,
		       const char *dir, pid_t tid, uint64_t first_seq,
		       uint64_t end_seq, struct ptd_image *img,
		       struct ptd_diag *diag)
{
	int err = 0;

	if (!c || !tl || !img || end_seq < first_seq)
		return -EINVAL;
	c->tl = tl;
	c->dir = dir;
	c->tid = tid;
	c->end_seq = end_seq;
	c->next = 0;
	/* Apply what was in effect when the thread started; a failed event is
	 * skipped (the cursor stays usable) and the first error returned. */
	while (c->next < tl->n && tl->ev[c->next].seq < first_seq) {
		int r = ptd_tl_event_apply(&tl->ev[c->next], img, dir,
					   err ? NULL : diag);

		if (r < 0 && err == 0)
			err = r;
		c->next++;
	}
	cursor_update(c);
	return err;
}

int ptd_tl_cursor_advance(struct ptd_tl_cursor *c, uint64_t offset,
			  struct ptd_image *img, struct ptd_diag *diag)
{
	int applied = 0;

	if (!c || !c->tl || !img)
		return -EINVAL;
	/* Events appended since the last call (a live timeline) count too. */
	cursor_update(c);
	while (c->next < c->tl->n && c->next_pos <= offset) {
		int r = ptd_tl_event_apply(&c->tl->ev[c->next], img, c->dir,
					   diag);

		c->next++;
		cursor_update(c);
		if (r < 0)
			return r;
		applied++;
	}
	return applied;
}

const struct ptd_tl_event *ptd_tl_cursor_peek(struct ptd_tl_cursor *c)
{
	if (!c || !c->tl)
		return NULL;
	cursor_update(c);
	return c->next_pos != UINT64_MAX ? &c->tl->ev[c->next] : NULL;
}

int ptd_tl_cursor_apply_next(struct ptd_tl_cursor *c, struct ptd_image *img,
			     struct ptd_diag *diag)
{
	int r;

	if (!c || !c->tl || !img)
		return -EINVAL;
	cursor_update(c);
	if (c->next_pos == UINT64_MAX)
		return 0;
	r = ptd_tl_event_apply(&c->tl->ev[c->next], img, c->dir, diag);
	c->next++;
	cursor_update(c);
	return r < 0 ? r : 1;
}

int ptd_tl_add_sections(struct ptd_iscache *ic, const struct ptd_timeline *tl,
			const char *dir, pid_t tid, uint64_t first_seq,
			uint64_t end_seq)
{
	struct ptd_tl_cursor cur;
	struct ptd_image *img = NULL;
	struct ptd_diag diag;

	memset(&cur, 0, sizeof(cur));
	(void)ptd_image_new(ic, "sections", &img);
	if (!img)
		return -ENOMEM;
	(void)ptd_tl_cursor_init(&cur, tl, dir, tid, first_seq, end_seq, img,
				 &diag);
	while (cur.tl &&
	       ptd_tl_cursor_advance(&cur, UINT64_MAX, img, &diag) < 0)
		;
	ptd_image_free(img);
	return 0;
}
