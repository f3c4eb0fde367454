/* SPDX-License-Identifier: MIT */
/*
 * A live session must decode with the file the process mapped, not with
 * whatever has its path when ptd reads it.  The target dlopen()s a copy of
 * libptdtarget.so from a directory of the test's own; the test then renames
 * another file over that copy -- the library with its code replaced by
 * int3 bytes -- and only then attaches.  /proc/PID/maps still names the
 * mapped file by device and inode (and the software source passes them on
 * in its MMAP2 records), so ptd must refuse the file at the path, say so in
 * an error record (context "image", PTD_EIDENTITY, naming the file and both
 * identities) and in the session's status, and decode the library's
 * instructions from the process's own memory: every instruction decoded in
 * it has the original bytes at its module offset, none the replacement's.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "target.h"
#include "aspace/maps.h"
#include "common/fileio.h"
#include "daemon/session.h"
#include "record/jsonw.h"

static const char *progs_dir;
static char workdir[256];
static struct ptd_config cfg;

struct seen {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ended;
	struct ptd_session_end end;
	const char *lib;
	const uint8_t *orig;
	size_t origlen;
	uint64_t lib_insns, lib_wrong, insns;
	uint64_t mismatch_errors, other_errors, snapshots;
	char detail[1024];
	char json[PTD_JSON_MAX_RECORD];
	char wrong[160];
};

static void on_record(void *ctx, const struct ptd_record *rec)
{
	struct seen *s = ctx;

	(void)pthread_mutex_lock(&s->lock);
	if (rec->type == PTD_REC_INSN) {
		const struct ptd_rec_insn *in = &rec->u.insn;

		s->insns++;
		if (in->module && strcmp(in->module, s->lib) == 0) {
			s->lib_insns++;
			if (in->modoff + in->size > s->origlen ||
			    memcmp(in->raw, s->orig + in->modoff, in->size)) {
				if (!s->lib_wrong++)
					(void)snprintf(s->wrong,
						       sizeof(s->wrong),
						       "ip 0x%" PRIx64
						       " modoff 0x%" PRIx64
						       " raw[0] 0x%02x", in->ip,
						       in->modoff, in->raw[0]);
			}
		}
	} else if (rec->type == PTD_REC_ERROR) {
		const struct ptd_rec_error *e = &rec->u.error;

		if (e->code == -PTD_EIDENTITY &&
		    strcmp(e->context, "image") == 0) {
			if (!s->mismatch_errors++) {
				(void)snprintf(s->detail, sizeof(s->detail),
					       "%s", e->detail ? e->detail
							       : "(none)");
				(void)ptd_json_record(s->json, sizeof(s->json),
						      rec);
			}
		} else {
			s->other_errors++;
		}
	}
	(void)pthread_mutex_unlock(&s->lock);
}

static void on_ended(void *ctx, const struct ptd_session_end *end)
{
	struct seen *s = ctx;

	(void)pthread_mutex_lock(&s->lock);
	s->end = *end;
	s->ended = true;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->lock);
}

static void on_snapshot(void *ctx, const struct ptd_snapshot_info *info,
			bool done)
{
	struct seen *s = ctx;

	(void)info;
	if (!done)
		return;
	(void)pthread_mutex_lock(&s->lock);
	s->snapshots++;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->lock);
}

/* The target's executable mapping of @path, from its maps. */
static bool exec_map(pid_t pid, const char *path, struct ptd_map *ret)
{
	struct ptd_diag diag = { "" };
	struct ptd_maps maps;
	bool found = false;

	if (ptd_maps_read_pid("/proc", pid, &maps, &diag) < 0)
		return false;
	for (size_t i = 0; i < maps.n && !found; i++)
		if ((maps.v[i].prot & PTD_MAP_PROT_X) &&
		    strcmp(maps.v[i].path, path) == 0) {
			*ret = maps.v[i];
			ret->path = NULL;
			found = true;
		}
	ptd_maps_fini(&maps);
	return found;
}

/* Read the target's stdout up to and including @line. */
static bool read_line(struct target *t, const char *line)
{
	char buf[256];
	size_t len = 0;

	while (len + 1 < sizeof(buf)) {
		ssize_t n = read(t->out, buf + len, 1);

		if (n <= 0)
			return false;
		if (buf[len++] == '\n') {
			buf[len] = 0;
			return strcmp(buf, line) == 0;
		}
	}
	return false;
}

/* Attached in snapshot mode, nothing is decoded -- and no file read --
 * until the snapshot: the library the target dlopen()ed after the attach
 * (its MMAP2 carrying device and inode) has by then been replaced at its
 * path by the target itself.  Deterministic: the file is swapped before
 * the snapshot is asked for. */
static void test_identity_renamed_library(void)
{
	char src[PATH_MAX], lib[PATH_MAX], other[PATH_MAX];
	char want[PATH_MAX + 512], out[64];
	char *then[] = { lib, other, NULL };
	struct ptd_session_opts o = { 0 };
	struct ptd_session_stats st;
	struct ptd_session_sink sink = { 0 };
	struct ptd_diag diag = { "" };
	struct ptd_session *sess = NULL;
	struct seen s;
	struct target t = { 0 };
	struct ptd_map m;
	struct stat lst, ost;
	char *orig = NULL;
	uint8_t *bad;
	size_t len = 0;
	uint64_t seq = 0;
	int r;

	(void)snprintf(src, sizeof(src), "%s/libptdtarget.so", progs_dir);
	(void)snprintf(lib, sizeof(lib), "%s/lib.so", workdir);
	(void)snprintf(other, sizeof(other), "%s/other.so", workdir);
	REQUIRE(ptd_file_read_all(src, 64u << 20, &orig, &len) == 0);
	REQUIRE(ptd_file_write_atomic(lib, orig, len) == 0);
	/* the replacement: the same library with every byte after its ELF
	 * header made int3 (code included, wherever it is) */
	bad = malloc(len);
	REQUIRE(bad);
	memcpy(bad, orig, len);
	for (size_t i = 64; i < len; i++)
		bad[i] = 0xcc;
	REQUIRE(ptd_file_write_atomic(other, bad, len) == 0);
	free(bad);
	REQUIRE(stat(lib, &lst) == 0);
	REQUIRE(stat(other, &ost) == 0);
	REQUIRE(target_spawn(progs_dir, "prog-identity", 300, (uid_t)-1, then,
			     NULL, &t) == 0);

	memset(&s, 0, sizeof(s));
	(void)pthread_mutex_init(&s.lock, NULL);
	(void)pthread_cond_init(&s.cond, NULL);
	s.lib = lib;
	s.orig = (const uint8_t *)orig;
	s.origlen = len;
	sink.record = on_record;
	sink.ended = on_ended;
	sink.snapshot = on_snapshot;
	sink.ctx = &s;
	o.pid = t.pid;
	o.config = &cfg;
	o.mode = PTD_MODE_SNAPSHOT;
	o.snapshot_size = 1u << 20;	/* all of the trace after dlopen */
	r = ptd_session_start(&o, &sink, &sess, &diag);
	if (r < 0) {
		CHECK_FAIL_("start: %s (%s)", diag.msg, ptd_strerror(r));
		(void)kill(t.pid, SIGKILL);
		free(orig);
		return;
	}
	CHECK_EQ_INT(target_tell(t.pid), 0);	/* dlopen, call, swap */
	if (!read_line(&t, "swapped\n")) {
		CHECK_FAIL_("prog-identity did not say it swapped %s", lib);
		ptd_session_free(sess);
		(void)kill(t.pid, SIGKILL);
		free(orig);
		return;
	}
	/* mapped (by device and inode), its path now the other file */
	CHECK(exec_map(t.pid, lib, &m));
	CHECK_EQ_INT(ptd_session_snapshot(sess, &seq), 0);
	(void)pthread_mutex_lock(&s.lock);
	while (s.snapshots < 1 && !s.ended)
		(void)pthread_cond_wait(&s.cond, &s.lock);
	(void)pthread_mutex_unlock(&s.lock);
	CHECK_EQ_INT(target_tell(t.pid), 0);	/* end */
	(void)pthread_mutex_lock(&s.lock);
	while (!s.ended)
		(void)pthread_cond_wait(&s.cond, &s.lock);
	(void)pthread_mutex_unlock(&s.lock);
	ptd_session_get_stats(sess, &st);

	CHECK_EQ_INT(s.end.reason, PTD_END_EXITED);
	CHECK_EQ_INT(s.end.exit_code, 0);
	/* told, named with both identities, in the record and its JSON */
	CHECK(s.mismatch_errors >= 1);
	(void)snprintf(want, sizeof(want),
		       "'%s' is not the file the process mapped: expected dev "
		       "%02x:%02x inode %llu, found dev %02x:%02x inode "
		       "%llu; decoded from process %d's memory instead", lib,
		       major(lst.st_dev), minor(lst.st_dev),
		       (unsigned long long)lst.st_ino, major(ost.st_dev),
		       minor(ost.st_dev), (unsigned long long)ost.st_ino,
		       (int)t.pid);
	if (!strstr(s.detail, want))
		CHECK_FAIL_("detail '%s' does not say '%s'", s.detail, want);
	CHECK(strstr(s.json, "\"error\":\"PTD_EIDENTITY\"") != NULL);
	CHECK(strstr(s.json, "\"context\":\"image\"") != NULL);
	CHECK(strstr(s.json, "\"detail\":\"") != NULL);
	CHECK_EQ_INT(st.identity_mismatches, 1);
	/* and decoded with the right code: the process's */
	CHECK(s.lib_insns >= 20);
	if (s.lib_wrong)
		CHECK_FAIL_("%" PRIu64 " of %" PRIu64 " instructions in %s "
			    "are not the mapped file's bytes (first: %s)",
			    s.lib_wrong, s.lib_insns, lib, s.wrong);
	fprintf(stderr, "  %" PRIu64 " instructions, %" PRIu64 " in the "
		"library; %" PRIu64 " identity error record(s), %" PRIu64
		" other errors: %s\n", s.insns, s.lib_insns,
		s.mismatch_errors, s.other_errors, s.json);
	ptd_session_free(sess);
	/* (its exit status went to the session's tracer) */
	target_output(&t, out, sizeof(out));
	CHECK_EQ_STR(out, "ok 20\n");
	free(orig);
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-identity-test-XXXXXX";

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	if (!mkdtemp(tmpl))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s", tmpl);
	ptd_config_defaults(&cfg);
	cfg.aux_buffer_size = 64u << 10;
	cfg.data_buffer_size = 16u << 10;
	strcpy(cfg.intel_pt_sysfs, "/nonexistent/intel_pt");	/* software */
	RUN(test_identity_renamed_library);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
