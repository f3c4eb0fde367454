/* SPDX-License-Identifier: MIT */
/*
 * record (srv.h): a recorded session's bundle into the client's directory.
 * The session's capture is spooled by ptd (srv_record_spool); once the
 * session has ended, a thread of its own, with the client's file-system
 * rights (cred.h), writes the bundle (bundle.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bundle/bundle.h"
#include "common/strutil.h"
#include "daemon/cred.h"
#include "daemon/log.h"
#include "daemon/server/srv.h"

/* A recorded session's instructions at most, unless max_insns says: the
 * spool holds about 3 bytes of capture per instruction. */
#define PTD_RECORD_MAX_INSNS 50000000u

/* A record request (loop only, except what the save thread writes before
 * `done`).  The save runs on its own thread once the session has ended:
 * it hashes and copies files, which the loop must not wait for. */
struct srv_record {
	struct ptd_server *srv;
	const char *spool;		/* the session's */
	int fd;				/* the client's directory */
	uid_t uid;
	gid_t gid;
	gid_t *groups;			/* the client's supplementary groups */
	size_t ngroups;
	struct srv_pending wait;	/* the request, if it waits for the
					 * bundle ("wait") */
	bool started, answered;
	pthread_t th;
	atomic_bool done;		/* err and diag written (release) */
	int err;
	struct ptd_diag diag;
};
static void *record_main(void *arg)
{
	struct srv_record *rc = arg;
	struct ptd_bundle_save_opts o = PTD_BUNDLE_SAVE_OPTS_INIT;
	struct ptd_cred cr = { rc->uid, rc->gid, rc->groups,
				       rc->ngroups };

	/* Every file written is the client's, written where the client may
	 * write (this thread takes the client's fsuid): ptd.service has no
	 * CAP_DAC_OVERRIDE, and must not lend it to a client. */
	o.set_owner = true;
	o.uid = rc->uid;
	o.gid = rc->gid;
	rc->err = ptd_cred_become_writer(&cr, &rc->diag);
	if (rc->err == 0)
		rc->err = ptd_bundle_save_at(rc->spool, rc->fd, &o, &rc->diag);
	atomic_store_explicit(&rc->done, true, memory_order_release);
	srv_wake(rc->srv);
	return NULL;
}

/* The session has ended: start writing the bundle. */
void srv_record_start(struct srv_session *ss)
{
	struct srv_record *rc = ss->rec;
	int r;

	if (!rc || rc->started)
		return;
	rc->started = true;
	r = pthread_create(&rc->th, NULL, record_main, rc);
	if (r) {
		rc->started = false;
		rc->err = ptd_diagf(&rc->diag, -r,
				    "cannot start writing the bundle: %s",
				    strerror(r));
		atomic_store(&rc->done, true);
	}
}

/* Forget @ss's record request (its thread, if any, joined). */
static void record_free(struct srv_session *ss)
{
	struct srv_record *rc = ss->rec;

	if (!rc)
		return;
	if (rc->started)
		(void)pthread_join(rc->th, NULL);
	if (rc->fd >= 0)
		close(rc->fd);
	srv_pending_clear(&rc->wait);
	free(rc->groups);
	free(rc);
	ss->rec = NULL;
}

/* Forget @ss's record request and spool (the session is being freed). */
void srv_record_forget(struct srv_session *ss)
{
	int r;

	record_free(ss);
	if (ss->spool) {
		r = ptd_rm_rf(ss->spool);
		if (r < 0)
			ptd_log_err(PTD_LOG_WARNING, r,
				    "failed to remove spool '%s', ignoring",
				    ss->spool);
		free(ss->spool);
		ss->spool = NULL;
	}
}

/* options.record: the session's capture goes into ptd's spool,
 * SPOOL/session-ID beside the control socket (the directory made 0700),
 * removed when the session is forgotten.  Its size is bounded by the
 * session's max_insns, PTD_RECORD_MAX_INSNS when the client gave none. */
int srv_record_spool(struct ptd_server *s, struct srv_session *ss,
		     struct ptd_session_opts *o, struct ptd_diag *diag)
{
	char dir[PATH_MAX];
	char *slash;
	int n;

	(void)ptd_strlcpy(dir, s->cfg.socket_path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash)
		return ptd_diagf(diag, -EINVAL, "no spool directory for "
				 "socket '%s'", s->cfg.socket_path);
	(void)ptd_strlcpy(slash + 1, "spool", sizeof(dir) - (size_t)(slash + 1 - dir));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ptd_diagf(diag, -errno, "failed to create spool "
				 "directory '%s': %s", dir, strerror(errno));
	n = snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir),
		     "/session-%" PRIu64, ss->id);
	if (n < 0 || !(ss->spool = strdup(dir)))
		return ptd_diagf(diag, -ENOMEM, "out of memory");
	/* a stale one of an earlier ptd */
	(void)ptd_rm_rf(ss->spool);
	o->capture_dir = ss->spool;
	o->source = PTD_SOURCE_SOFTWARE;
	if (!o->max_insns)
		o->max_insns = PTD_RECORD_MAX_INSNS;
	return 0;
}

/* A recorded session's record request, for its owner to see in status:
 * a failure found once the session ended (the record request may have
 * been answered long before) is told here, not only logged. */
void srv_record_status(const struct srv_session *ss, cJSON *res)
{
	const struct srv_record *rc = ss->rec;
	const char *state = "not_asked";

	if (rc && atomic_load_explicit(&rc->done, memory_order_acquire))
		state = rc->err < 0 ? "failed" : "written";
	else if (rc)
		state = rc->started ? "writing" : "pending";
	cJSON_AddStringToObject(res, "record_state", state);
	if (rc && !strcmp(state, "failed"))
		cJSON_AddStringToObject(res, "record_error", rc->diag.msg[0]
					? rc->diag.msg : ptd_strerror(rc->err));
}

/* Is the directory open at @fd one ptd may write @c's bundle into?
 * A directory, the client's own (unless the client is root), empty. */
static int record_check_dir(const struct conn *c, int fd, char *msg,
			    size_t cap)
{
	struct dirent *e;
	struct statvfs vfs;
	struct stat st;
	DIR *d;
	int dfd, n = 0;

	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		(void)snprintf(msg, cap, "the file descriptor passed is not "
			       "a directory (open it with O_DIRECTORY)");
		return -ENOTDIR;
	}
	if (c->peer.uid != 0 && st.st_uid != c->peer.uid) {
		(void)snprintf(msg, cap, "the directory belongs to uid %u, "
			       "you are uid %u", (unsigned)st.st_uid,
			       (unsigned)c->peer.uid);
		return -EPERM;
	}
	/* Refused now, while the client waits for the answer, rather than
	 * when the session ends and nobody may be asking: the bundle is
	 * written with the client's rights (record_main). */
	if (c->peer.uid != 0 && (st.st_mode & (S_IWUSR | S_IXUSR)) !=
					(S_IWUSR | S_IXUSR)) {
		(void)snprintf(msg, cap, "the directory is not writable by "
			       "you (mode %04o)", (unsigned)(st.st_mode & 07777));
		return -EACCES;
	}
	if (fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) {
		(void)snprintf(msg, cap, "the directory is on a read-only "
			       "file system");
		return -EROFS;
	}
	/* A second descriptor to list it: readdir consumes the position. */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		n = -errno;
		if (dfd >= 0)
			close(dfd);
		(void)snprintf(msg, cap, "cannot list the directory: %s",
			       strerror(-n));
		return n;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	if (n) {
		(void)snprintf(msg, cap, "the directory is not empty (%d "
			       "entries)", n);
		return -EEXIST;
	}
	return 0;
}

static cJSON *record_result(const struct srv_session *ss, const char *state)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddStringToObject(res, "state", state);
	return res;
}

/* Save a recorded session's bundle into the directory the client passed
 * with the request (SCM_RIGHTS) once the session has ended.  With "wait"
 * (the default) the response comes when the bundle is written and the
 * connection's later requests wait for it; without, at once ("pending"). */
void srv_cmd_record(struct ptd_server *s, struct conn *c,
		    const struct ptd_request *req)
{
	struct srv_session *ss = srv_session_find_ready(s, c, req);
	struct srv_record *rc;
	char msg[256];
	int r;

	if (!ss)
		return;
	if (!ss->spool) {
		srv_reply_error(c, req->id, PTD_ERR_NOT_RECORDING,
				"session %" PRIu64 " was not attached with "
				"record (attach with \"options\": {\"record\": "
				"true})", ss->id);
		return;
	}
	if (c->pass_fd < 0) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"no directory file descriptor was passed with "
				"the request (SCM_RIGHTS)");
		return;
	}
	if (ss->rec && !ss->rec->answered) {
		srv_reply_error(c, req->id, PTD_ERR_LIMIT,
				"session %" PRIu64 " is already being recorded",
				ss->id);
		return;
	}
	r = record_check_dir(c, c->pass_fd, msg, sizeof(msg));
	if (r < 0) {
		srv_reply_error(c, req->id, r == -EEXIST || r == -ENOTDIR ||
					r == -EPERM || r == -EACCES ||
					r == -EROFS ? PTD_ERR_BAD_DIRECTORY
						    : PTD_ERR_INTERNAL,
				"%s", msg);
		return;
	}
	rc = calloc(1, sizeof(*rc));
	r = rc ? srv_peer_groups(c->tag.fd, &rc->groups) : -ENOMEM;
	if (r < 0) {
		free(rc);
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL,
				"cannot take your groups: %s", ptd_strerror(r));
		return;
	}
	rc->ngroups = (size_t)r;
	/* a bundle written before: the spool is still there to write
	 * another (a second view of the session, as long as it lingers) */
	record_free(ss);
	rc->srv = s;
	rc->spool = ss->spool;
	rc->fd = c->pass_fd;
	c->pass_fd = -1;
	rc->uid = c->peer.uid;
	rc->gid = c->peer.gid;
	ss->rec = rc;
	if (req->record_wait) {
		srv_pending_wait(&rc->wait, c, req->id);
	} else {
		srv_reply_ok(c, req->id, record_result(ss, "pending"));
	}
	if (ss->reaped)
		srv_record_start(ss);
}

/* The error code for a bundle that could not be written: a traced file
 * that changed or went since it was traced is the trace's, named in the
 * message. */
static const char *record_code(int err)
{
	switch (err) {
	case -EEXIST:
		return PTD_ERR_BAD_DIRECTORY;
	case -ENOENT:
		return PTD_ERR_NO_SUCH_FILE;
	case -EACCES:
	case -EPERM:
		return PTD_ERR_PERMISSION;
	case -PTD_ENOTREG:
	case -PTD_ETRUNC:
	case -PTD_EIDENTITY:
		return PTD_ERR_BAD_TRACE;
	default:
		return PTD_ERR_INTERNAL;
	}
}

/* Answer the record requests whose bundle has been written. */
void srv_records_answer(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		struct srv_record *rc = ss->rec;

		if (!rc || rc->answered ||
		    !atomic_load_explicit(&rc->done, memory_order_acquire))
			continue;
		rc->answered = true;
		if (rc->err < 0)
			ptd_log_info("session %" PRIu64 ": record failed: %s",
				     ss->id, rc->diag.msg);
		else
			ptd_log_info("session %" PRIu64 ": bundle written for "
				     "uid %u", ss->id, (unsigned)rc->uid);
		if (rc->err < 0)
			srv_pending_error(s, &rc->wait, record_code(rc->err),
					  "session %" PRIu64 ": %s", ss->id,
					  rc->diag.msg[0]
						  ? rc->diag.msg
						  : ptd_strerror(rc->err));
		else
			srv_pending_ok(s, &rc->wait,
				       record_result(ss, "written"));
	}
}

/* No record request of @ss waits for its bundle. */
bool srv_record_settled(const struct srv_session *ss)
{
	return !ss->rec || ss->rec->answered;
}

void srv_record_drop_conn(struct srv_session *ss, const struct conn *c)
{
	if (ss->rec)
		srv_pending_drop(&ss->rec->wait, c);
}
