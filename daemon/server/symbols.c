/* SPDX-License-Identifier: MIT */
/*
 * Symbols of a session (srv.h): attach's options.symbols and replay's
 * "symbols" make the session decode with symbols (sym/symbols.h), so that
 * subscribers asking for them ("symbols": true, or "sym" among "fields")
 * get "sym" on insn records.
 *
 * Decisions, each for a reason:
 *  - A session option fixed at its start, not turned on by a subscriber:
 *    a symbol is resolved once per instruction of the session's
 *    instruction cache and rendered into that instruction's JSON body,
 *    so turning symbols on later would have to forget every entry (or
 *    check a generation on every lookup, the hot path) -- and the files
 *    would be read with the rights of whoever subscribed last.  A
 *    session's symbols are read with one client's rights: its owner's.
 *    Subscribers that do not ask get the same bytes as from a session
 *    without symbols (fanout.c leaves sym out of their field set).
 *  - Files are opened with the client's rights (daemon/cred.h): a live
 *    session's decode thread keeps ptd's, so it opens each file through
 *    ptd_cred_open, on a thread that takes the client's; a replay's
 *    thread has taken them already.  A user learns symbols only of files
 *    they may read, and a .gnu_debuglink candidate's CRC (which, matched
 *    or not, tells something of a file's bytes) is computed only on a
 *    file they may read.  The one exception: a vDSO's snapshot, a file
 *    ptd wrote into its session directory from the process's memory,
 *    which the client may read anyway (it may trace the process).
 *  - A perf map (PERF_MAP_DIR/perf-PID.map, anyone may create one in
 *    /tmp) is believed only when owned by root or the traced process's
 *    uid (a replay: the client's, there is no process).
 *  - The tables a session keeps are charged to its owner's
 *    user_memory_limit (memlimit.h), given back with the session's other
 *    charges.  A table refused is not kept: its file's code names no
 *    symbol, and the stream says so in an error record (below).
 *  - Every file whose symbols could not be had (unreadable, malformed,
 *    a perf map of another user, over the memory limit) becomes one
 *    error record, context "symbols", before the record that needed it:
 *    a missing "sym" is explained in the stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "daemon/cred.h"
#include "daemon/server/srv.h"
#include "sym/symbols.h"

struct srv_symbols {
	struct ptd_symbols *syms;
	struct ptd_cred cred;	/* whose rights open the files */
	gid_t *groups;
	struct ptd_memacct *acct;
	size_t reported;	/* decode thread: failures delivered */
};

/* opts.open of a live session: the client's rights, but for ptd's own
 * snapshot of a vDSO. */
static int open_as_client(void *ctx, const char *path, bool snapshot,
			  struct stat *ret_st, struct ptd_diag *diag)
{
	struct srv_symbols *y = ctx;

	if (snapshot)
		return ptd_file_open_regular(AT_FDCWD, path, 0, ret_st, diag);
	return ptd_cred_open(&y->cred, path, ret_st, diag);
}

static int charge(void *ctx, uint64_t bytes)
{
	struct srv_symbols *y = ctx;

	return ptd_memacct_charge(y->acct, bytes, NULL);
}

int srv_symbols_new(struct ptd_server *s, struct srv_session *ss, int fd,
		    const struct ptd_peer *peer, pid_t live_pid,
		    struct ptd_diag *diag)
{
	struct ptd_symbols_opts o;
	struct srv_symbols *y = calloc(1, sizeof(*y));
	char proc[PATH_MAX + 16];
	struct stat st;
	int r;

	if (!y)
		return -ENOMEM;
	memset(&o, 0, sizeof(o));
	o.debug_root = s->cfg.debug_dir;
	o.perfmap_dir = s->cfg.perf_map_dir;
	o.perfmap_uid_set = true;
	o.perfmap_uid = peer->uid;
	o.charge = charge;
	o.charge_ctx = y;
	y->acct = &ss->acct;
	if (live_pid > 0) {
		/* a child's session (fd < 0): its parent's, kept for it */
		r = fd >= 0 ? srv_peer_groups(fd, &y->groups)
			    : srv_groups_copy(ss->groups, ss->ngroups,
					      &y->groups);
		if (r < 0) {
			free(y);
			return ptd_diagf(diag, r, "cannot take your groups: %s",
					 ptd_strerror(r));
		}
		y->cred.uid = peer->uid;
		y->cred.gid = peer->gid;
		y->cred.groups = y->groups;
		y->cred.ngroups = (size_t)r;
		o.open = open_as_client;
		o.open_ctx = y;
		/* the traced process's owner (root may trace anyone's) */
		r = snprintf(proc, sizeof(proc), "%s/%d", s->procroot,
			     (int)live_pid);
		if (r > 0 && (size_t)r < sizeof(proc) && stat(proc, &st) == 0)
			o.perfmap_uid = st.st_uid;
	}
	r = ptd_symbols_new(&o, &y->syms);
	if (r < 0) {
		free(y->groups);
		free(y);
		return ptd_diagf(diag, r, "cannot set up symbols: %s",
				 ptd_strerror(r));
	}
	/* followed children decode with symbols read with these groups,
	 * whenever they come (the connection may have gone by then) */
	if (live_pid > 0 && ss->creq && !ss->groups) {
		r = srv_groups_copy(y->cred.groups, y->cred.ngroups,
				    &ss->groups);
		if (r < 0) {
			ptd_symbols_free(y->syms);
			free(y->groups);
			free(y);
			return ptd_diagf(diag, r, "out of memory");
		}
		ss->ngroups = (size_t)r;
	}
	ss->sym = y;
	ss->had_symbols = true;
	return 0;
}

struct ptd_symbols *srv_symbols_of(const struct srv_session *ss)
{
	return ss->sym ? ss->sym->syms : NULL;
}

void srv_symbols_report(struct srv_session *ss, const struct ptd_record *rec)
{
	struct srv_symbols *y = ss->sym;
	size_t n = ptd_symbols_nfailures(y->syms);

	while (y->reported < n) {
		size_t i = y->reported++;
		struct ptd_record e;

		memset(&e, 0, sizeof(e));
		e.type = PTD_REC_ERROR;
		e.pid = rec->pid;
		e.tid = rec->tid;
		e.u.error.code = ptd_symbols_failure_code(y->syms, i);
		e.u.error.ptd_code = true;
		e.u.error.context = "symbols";
		e.u.error.detail = ptd_symbols_failure(y->syms, i);
		ptd_fanout_record(ss->fan, &e);
	}
}

void srv_symbols_summary(const struct srv_session *ss, cJSON *o)
{
	struct ptd_symbols_stats st = { 0 };
	cJSON *y;

	if (!ss->had_symbols)
		return;
	if (ss->sym) {
		ptd_symbols_get_stats(ss->sym->syms, &st);
	} else {
		st.files = ss->sym_files;
		st.bytes = ss->sym_bytes;
		st.failures = ss->sym_failures;
	}
	y = cJSON_AddObjectToObject(o, "symbols");
	if (!y)
		return;
	cJSON_AddNumberToObject(y, "files", (double)st.files);
	cJSON_AddNumberToObject(y, "bytes", (double)st.bytes);
	cJSON_AddNumberToObject(y, "failures", (double)st.failures);
}

void srv_symbols_free(struct srv_session *ss)
{
	struct srv_symbols *y = ss->sym;
	struct ptd_symbols_stats st;

	if (!y)
		return;
	ptd_symbols_get_stats(y->syms, &st);
	ss->sym_files = st.files;
	ss->sym_bytes = st.bytes;
	ss->sym_failures = st.failures;
	ptd_symbols_free(y->syms);
	free(y->groups);
	free(y);
	ss->sym = NULL;
}
