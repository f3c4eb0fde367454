/* SPDX-License-Identifier: MIT */
/*
 * Symbols of address spaces (sym/symbols.h): a table per file, loaded on
 * first use and kept (a failure too, so a bad file is read once), and a
 * table per process's perf map.  Lookups of a file's table go through a
 * small hash of paths; they happen once per distinct instruction.
 */
#include "sym/symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aspace/elf.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "sym/symtab.h"

#define NBUCKETS 256u
/* Most distinct files (and processes' perf maps) kept; past it, code of
 * further files resolves to nothing. */
#define MAX_FILES 65536u

struct symfile {
	struct symfile *next;
	/* "F" + the file's path, or "M" + the pid of a perf map: a path
	 * never names a perf map. */
	char *key;
	struct ptd_symtab *t;	/* NULL: unusable (see failure) */
	char *debug_file;	/* "" if none */
	char *path;		/* the file (NULL: a perf map) */
	char *name;		/* the first module name it resolved for */
};

struct ptd_symbols {
	pthread_mutex_t lock;
	char *debug_root, *perfmap_dir;
	struct ptd_symbols_opts o;	/* hooks and perfmap uid */
	uid_t perfmap_uid;
	struct symfile *bucket[NBUCKETS];
	size_t nfiles;
	char **fail;		/* messages */
	int *fail_code;
	size_t nfail, fail_cap;
	atomic_size_t nfail_pub;	/* nfail, read without the lock */
	uint64_t nresolves;
	uint64_t bytes;		/* of the tables kept */
};

int ptd_symbols_new(const struct ptd_symbols_opts *o,
		    struct ptd_symbols **ret)
{
	struct ptd_symbols *s;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	(void)pthread_mutex_init(&s->lock, NULL);
	if (o)
		s->o = *o;
	s->o.debug_root = s->o.perfmap_dir = NULL;
	s->perfmap_uid = o && o->perfmap_uid_set ? o->perfmap_uid
						 : geteuid();
	s->debug_root = strdup(o && o->debug_root ? o->debug_root
						  : "/usr/lib/debug");
	s->perfmap_dir = strdup(o && o->perfmap_dir ? o->perfmap_dir : "/tmp");
	if (!s->debug_root || !s->perfmap_dir) {
		ptd_symbols_free(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

void ptd_symbols_free(struct ptd_symbols *s)
{
	if (!s)
		return;
	for (size_t b = 0; b < NBUCKETS; b++) {
		struct symfile *f = s->bucket[b];

		while (f) {
			struct symfile *n = f->next;

			ptd_symtab_free(f->t);
			free(f->key);
			free(f->debug_file);
			free(f->path);
			free(f->name);
			free(f);
			f = n;
		}
	}
	for (size_t i = 0; i < s->nfail; i++)
		free(s->fail[i]);
	free(s->fail);
	free(s->fail_code);
	free(s->debug_root);
	free(s->perfmap_dir);
	(void)pthread_mutex_destroy(&s->lock);
	free(s);
}

static void add_failure(struct ptd_symbols *s, int code, const char *msg)
{
	char *m;

	if (s->nfail == s->fail_cap) {
		size_t n = s->fail_cap ? 2 * s->fail_cap : 8;
		char **v = reallocarray(s->fail, n, sizeof(*v));
		int *c;

		if (!v)
			return;
		s->fail = v;
		c = reallocarray(s->fail_code, n, sizeof(*c));
		if (!c)
			return;
		s->fail_code = c;
		s->fail_cap = n;
	}
	m = strdup(msg);
	if (m) {
		s->fail_code[s->nfail] = code < 0 ? code : -EINVAL;
		s->fail[s->nfail++] = m;
		atomic_store(&s->nfail_pub, s->nfail);
	}
}

/* Open @path through the caller's hook (symbols.h, opts.open). */
static int open_file(const struct ptd_symbols *s, const char *path,
		     bool snapshot, struct stat *ret_st, struct ptd_diag *diag)
{
	if (s->o.open)
		return s->o.open(s->o.open_ctx, path, snapshot, ret_st, diag);
	return ptd_file_open_regular(AT_FDCWD, path, 0, ret_st, diag);
}

/* Keep @t (loaded from @path) if the caller's charge allows; else free
 * it, say why, and return NULL. */
static struct ptd_symtab *charged(struct ptd_symbols *s, const char *path,
				  struct ptd_symtab *t)
{
	uint64_t n = ptd_symtab_bytes(t);
	struct ptd_diag d = { "" };
	int r;

	if (!t || !s->o.charge)
		goto keep;
	r = s->o.charge(s->o.charge_ctx, n);
	if (r < 0) {
		(void)ptd_diagf(&d, r, "'%s': its symbols (%llu bytes) were "
				"refused: %s", path, (unsigned long long)n,
				r == -PTD_ELIMIT ? "over the memory limit"
						 : ptd_strerror(r));
		add_failure(s, r, d.msg);
		ptd_symtab_free(t);
		return NULL;
	}
keep:
	if (t)
		s->bytes += n;
	return t;
}

static size_t hash_str(const char *p)
{
	uint64_t h = 1469598103934665603ull;

	for (; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	return (size_t)(h % NBUCKETS);
}

static struct symfile *find(struct ptd_symbols *s, const char *key)
{
	for (struct symfile *f = s->bucket[hash_str(key)]; f; f = f->next)
		if (!strcmp(f->key, key))
			return f;
	return NULL;
}

/* ---- debug files ---------------------------------------------------- */

/* CRC-32 (IEEE 802.3, reflected), as .gnu_debuglink's. */
static uint32_t crc32_fd(int fd, bool *ok)
{
	uint32_t tab[256], crc = 0xffffffffu;
	uint8_t buf[65536];
	off_t pos = 0;

	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		tab[i] = c;
	}
	*ok = false;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), pos);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 0;
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			crc = tab[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
		pos += n;
	}
	*ok = true;
	return crc ^ 0xffffffffu;
}

/* Open @path if it is the debug file wanted: its build-id @build_id (if
 * not NULL), or its CRC @crc (if @check_crc).  -1 if not. */
static int open_debug(const struct ptd_symbols *s, const char *path,
		      const char *build_id, bool check_crc, uint32_t crc)
{
	char hex[2 * PTD_ELF_BUILD_ID_MAX + 1];
	/* Opened with the caller's hook: a daemon's client learns a CRC
	 * (by the symbols it gets) only of a file it may read. */
	int fd = open_file(s, path, false, NULL, NULL);
	bool ok = true;

	if (fd < 0)
		return -1;
	if (build_id)
		ok = ptd_elf_build_id_fd(fd, hex, sizeof(hex)) &&
		     !strcmp(hex, build_id);
	if (ok && check_crc) {
		bool read_ok;

		ok = crc32_fd(fd, &read_ok) == crc && read_ok;
	}
	if (!ok) {
		(void)close(fd);
		return -1;
	}
	return fd;
}

/* The debug file of @path (which said @info), open, its name in @out; -1
 * if there is none. */
static int find_debug(const struct ptd_symbols *s, const char *path,
		      const struct ptd_elf_syminfo *info, char *out,
		      size_t outsz)
{
	char dir[PATH_MAX];
	const char *slash;
	int fd, n;

	if (strlen(info->build_id) > 2) {
		n = snprintf(out, outsz, "%s/.build-id/%.2s/%s.debug",
			     s->debug_root, info->build_id,
			     info->build_id + 2);
		if (n > 0 && (size_t)n < outsz &&
		    (fd = open_debug(s, out, info->build_id, false, 0)) >= 0)
			return fd;
	}
	if (!info->debuglink[0])
		return -1;
	slash = strrchr(path, '/');
	n = snprintf(dir, sizeof(dir), "%.*s",
		     slash ? (int)(slash - path) : 1, slash ? path : ".");
	if (n < 0 || (size_t)n >= sizeof(dir))
		return -1;
	{
		/* the file's directory, its .debug/, DEBUG_ROOT + it */
		const char *pre[3] = { "", "", s->debug_root };
		const char *sub[3] = { "", "/.debug", "" };

		for (int i = 0; i < 3; i++) {
			n = snprintf(out, outsz, "%s%s%s/%s", pre[i], dir,
				     sub[i], info->debuglink);
			/* never the file itself */
			if (n <= 0 || (size_t)n >= outsz || !strcmp(out, path))
				continue;
			fd = open_debug(s, out, NULL, true,
					info->debuglink_crc);
			if (fd >= 0)
				return fd;
		}
	}
	return -1;
}

/* ---- loading -------------------------------------------------------- */

static struct ptd_symtab *load_elf(struct ptd_symbols *s, const char *path,
				   bool snapshot, char **ret_debug)
{
	char dbg[PATH_MAX];
	struct ptd_elf_syminfo info;
	struct ptd_diag d = { "" };
	struct ptd_symtab *t = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	*ret_debug = NULL;
	fd = open_file(s, path, snapshot, NULL, &d);
	if (fd < 0) {
		r = fd;
		goto fail;
	}
	r = ptd_symtab_new(&t);
	if (r < 0) {
		(void)ptd_diagf(&d, r, "'%s': %s", path, ptd_strerror(r));
		goto fail;
	}
	r = ptd_symtab_add_elf(t, fd, path, 0, &info, &d);
	if (r < 0)
		goto fail;
	dbg[0] = '\0';
	if (!info.has_symtab) {
		int dfd = find_debug(s, path, &info, dbg, sizeof(dbg));

		if (dfd >= 0) {
			/* A bad debug file costs its symbols only. */
			r = ptd_symtab_add_elf(t, dfd, dbg,
					       PTD_SYMTAB_DEBUG_FILE, NULL,
					       &d);
			if (r < 0) {
				add_failure(s, r, d.msg);
				dbg[0] = '\0';
			}
			(void)close(dfd);
		} else {
			dbg[0] = '\0';
		}
	}
	*ret_debug = strdup(dbg);
	ptd_symtab_seal(t);
	return charged(s, path, t);
fail:
	add_failure(s, r, d.msg[0] ? d.msg : path);
	ptd_symtab_free(t);
	return NULL;
}

static struct ptd_symtab *load_perfmap(struct ptd_symbols *s, pid_t pid)
{
	char path[PATH_MAX];
	struct ptd_diag d = { "" };
	struct ptd_symtab *t = NULL;
	char *text = NULL;
	size_t len = 0;
	unsigned bad = 0;
	int r;

	_cleanup_close_ int fd = -1;
	char self[64];
	struct stat st;

	(void)snprintf(path, sizeof(path), "%s/perf-%d.map", s->perfmap_dir,
		       (int)pid);
	fd = open_file(s, path, false, &st, &d);
	if (fd == -ENOENT)
		return NULL;
	if (fd < 0) {
		add_failure(s, fd, d.msg);
		return NULL;
	}
	/* Anyone may write a file of that name in /tmp: as perf does, only
	 * one of the user's own (opts.perfmap_uid: a daemon's traced
	 * process's) or root's is believed. */
	if (st.st_uid != s->perfmap_uid && st.st_uid != 0) {
		(void)ptd_diagf(&d, -EPERM, "'%s' is owned by uid %u, not by "
				"uid %u or root: ignored", path,
				(unsigned)st.st_uid,
				(unsigned)s->perfmap_uid);
		add_failure(s, -EPERM, d.msg);
		return NULL;
	}
	(void)snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	r = ptd_file_read_all(self, PTD_PERFMAP_MAX_BYTES, &text, &len);
	if (r < 0) {
		(void)ptd_diagf(&d, r, "'%s': %s", path, ptd_strerror(r));
		add_failure(s, r, d.msg);
		return NULL;
	}
	r = ptd_symtab_new(&t);
	if (r == 0)
		r = ptd_symtab_add_perfmap(t, path, text, len, &bad, &d);
	free(text);
	if (r < 0 || bad)
		add_failure(s, r < 0 ? r : -PTD_EFORMAT,
			    d.msg[0] ? d.msg : path);
	if (r < 0) {
		ptd_symtab_free(t);
		return NULL;
	}
	ptd_symtab_seal(t);
	return charged(s, path, t);
}

/* The entry of @key, loaded on first use; NULL when out of memory or past
 * MAX_FILES. */
static struct symfile *get(struct ptd_symbols *s, const char *key,
			   const char *path, bool snapshot, pid_t pid)
{
	struct symfile *f = find(s, key);
	size_t b;

	if (f)
		return f;
	if (s->nfiles >= MAX_FILES)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->key = strdup(key))) {
		free(f);
		return NULL;
	}
	if (path)
		f->t = load_elf(s, path, snapshot, &f->debug_file);
	else
		f->t = load_perfmap(s, pid);
	b = hash_str(key);
	f->next = s->bucket[b];
	s->bucket[b] = f;
	s->nfiles++;
	return f;
}

/* Modules that are files, or snapshots of a vDSO (an ELF image). */
static bool is_elf_module(const struct ptd_module *m)
{
	return m->name[0] != '[' || !strcmp(m->name, "[vdso]");
}

const char *ptd_symbols_resolve(struct ptd_symbols *s,
				const struct ptd_module *m, pid_t pid,
				uint64_t ip, uint64_t *ret_off)
{
	const struct ptd_sym *sym = NULL;
	struct symfile *f;
	uint64_t addr = ip, off = 0;
	char key[32], *fkey;

	if (!s)
		return NULL;
	(void)pthread_mutex_lock(&s->lock);
	s->nresolves++;
	if (m && m->path && m->name && is_elf_module(m)) {
		f = NULL;
		if (asprintf(&fkey, "F%s", m->path) >= 0) {
			/* a vDSO's bytes: the snapshot the decoder's
			 * owner wrote, not a file the program named */
			f = get(s, fkey, m->path, m->name[0] == '[', 0);
			free(fkey);
		}
		if (f && !f->name) {
			/* views/coverage.h finds the file by the name
			 * records carry (ptd_symbols_module_file) */
			f->name = strdup(m->name);
			f->path = strdup(m->path);
			if (!f->name || !f->path) {
				free(f->name);
				free(f->path);
				f->name = f->path = NULL;
			}
		}
		if (f && f->t &&
		    ip - m->vaddr < m->size &&
		    ptd_symtab_vaddr_of(f->t, m->offset + (ip - m->vaddr),
					&addr) == 0)
			sym = ptd_symtab_lookup(f->t, addr, &off);
	} else if (pid > 0) {
		(void)snprintf(key, sizeof(key), "M%d", (int)pid);
		f = get(s, key, NULL, false, pid);
		if (f && f->t)
			sym = ptd_symtab_lookup(f->t, ip, &off);
	}
	(void)pthread_mutex_unlock(&s->lock);
	if (!sym)
		return NULL;
	if (ret_off)
		*ret_off = off;
	return sym->name;
}

void ptd_symbols_get_stats(struct ptd_symbols *s,
			   struct ptd_symbols_stats *ret)
{
	if (!s || !ret)
		return;
	(void)pthread_mutex_lock(&s->lock);
	ret->resolves = s->nresolves;
	ret->files = s->nfiles;
	ret->bytes = s->bytes;
	ret->failures = s->nfail;
	(void)pthread_mutex_unlock(&s->lock);
}

const char *ptd_symbols_failure(struct ptd_symbols *s, size_t i)
{
	const char *m;

	if (!s)
		return NULL;
	(void)pthread_mutex_lock(&s->lock);
	m = i < s->nfail ? s->fail[i] : NULL;
	(void)pthread_mutex_unlock(&s->lock);
	return m;
}

int ptd_symbols_failure_code(struct ptd_symbols *s, size_t i)
{
	int c;

	if (!s)
		return 0;
	(void)pthread_mutex_lock(&s->lock);
	c = i < s->nfail ? s->fail_code[i] : 0;
	(void)pthread_mutex_unlock(&s->lock);
	return c;
}

size_t ptd_symbols_nfailures(struct ptd_symbols *s)
{
	return s ? atomic_load(&s->nfail_pub) : 0;
}

const char *ptd_symbols_debug_file(struct ptd_symbols *s, const char *path)
{
	struct symfile *f;
	char *key;

	if (!s || !path || asprintf(&key, "F%s", path) < 0)
		return NULL;
	(void)pthread_mutex_lock(&s->lock);
	f = find(s, key);
	(void)pthread_mutex_unlock(&s->lock);
	free(key);
	if (!f)
		return NULL;
	return f->debug_file ? f->debug_file : "";
}

int ptd_symbols_module_file(struct ptd_symbols *s, const char *name,
			    const char **ret_path,
			    const struct ptd_symtab **ret_table,
			    const char **ret_debug)
{
	const struct symfile *best = NULL;

	if (!s || !name)
		return -ENOENT;
	(void)pthread_mutex_lock(&s->lock);
	for (size_t b = 0; b < NBUCKETS; b++)
		for (const struct symfile *f = s->bucket[b]; f; f = f->next)
			if (f->name && !strcmp(f->name, name) &&
			    (!best || strcmp(f->key, best->key) < 0))
				best = f;
	(void)pthread_mutex_unlock(&s->lock);
	if (!best)
		return -ENOENT;
	if (ret_path)
		*ret_path = best->path;
	if (ret_table)
		*ret_table = best->t;
	if (ret_debug)
		*ret_debug = best->debug_file ? best->debug_file : "";
	return 0;
}
