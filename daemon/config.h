/* SPDX-License-Identifier: MIT */
/*
 * ptd's configuration: /etc/ptd/ptd.conf (conf/ptd.conf documents every
 * setting with its default).
 *
 * Format: one `key = value` per line; `#` starts a comment line; blank lines
 * are ignored; whitespace around key and value is ignored.  Parsing is
 * strict: an unknown key, a repeated key, a bad value or an out-of-range
 * number is refused with "FILE:LINE: what was wrong" in the diag.
 * Sizes are written with a unit: 4096k, 4M, 1G (k = 1024 bytes; a plain
 * number is bytes).  Booleans: yes/no/true/false/1/0.
 */
#ifndef PTD_DAEMON_CONFIG_H
#define PTD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/diag.h"

enum ptd_log_level {
	PTD_LOG_ERROR,
	PTD_LOG_WARNING,
	PTD_LOG_INFO,
	PTD_LOG_DEBUG,
};

#define PTD_CONF_PATH_MAX 108	/* sun_path */

struct ptd_config {
	/* socket_path: the control socket (default /run/ptd/ptd.sock) */
	char socket_path[PTD_CONF_PATH_MAX];
	/* socket_group: group owning the socket (default "ptd"; if the group
	 * does not exist the socket keeps the daemon's group, with a
	 * warning) */
	char socket_group[64];
	/* socket_mode: octal permission bits (default 0660) */
	unsigned socket_mode;
	/* aux_buffer_size: AUX area per traced thread/CPU, a power of two
	 * of pages (default 4M) */
	size_t aux_buffer_size;
	/* data_buffer_size: perf data (sideband) ring, power of two of pages
	 * (default 512k) */
	size_t data_buffer_size;
	/* software_source: may the software PT source stand in where the
	 * CPU has no Intel PT (default yes) */
	bool software_source;
	/* intel_pt_sysfs: where the intel_pt PMU is looked up (default
	 * /sys/bus/event_source/devices/intel_pt; tests point it elsewhere) */
	char intel_pt_sysfs[256];
	/* debug_dir: where separate debug files are looked up for symbols
	 * (by build-id, and .gnu_debuglink's name under it; default
	 * /usr/lib/debug); perf_map_dir: where JITs write perf-PID.map
	 * (default /tmp; tests point both elsewhere) */
	char debug_dir[256];
	char perf_map_dir[256];
	/* max_sessions_per_user (default 8), max_subscribers_per_session
	 * (default 16), max_connections (default 128) */
	unsigned max_sessions_per_user;
	/* max_watch_rules_per_user (default 4, 1 to 64): watch rules one
	 * user may have at once (ptd has 64 in all) */
	unsigned max_watch_rules_per_user;
	/* max_triggers_per_user (default 8, 1 to PTD_TRIGGERS_MAX): triggers
	 * (uprobes on the sessions' processes) one user may have at once */
	unsigned max_triggers_per_user;
	/* max_decode_jobs (default 4, 1 to PTD_DECODE_MAX_JOBS): the most
	 * threads one replay may decode each of its threads' trace on (the
	 * replay request's "jobs", decode/parallel.h) */
	unsigned max_decode_jobs;
	unsigned max_subscribers_per_session;
	unsigned max_connections;
	/* subscriber_queue_size: queued record bytes per subscriber before
	 * records are dropped and counted (default 4M) */
	size_t subscriber_queue_size;
	/* subscriber_stall_ms: how long a paced stream (a snapshot's
	 * decode, a lossless replay) waits for a subscriber whose queue is
	 * full and who reads nothing, before it goes on without it -- a
	 * snapshot cuts it off (bye "stalled"), a replay drops its records
	 * until it reads again (default 30000, 10 to 3600000) */
	unsigned subscriber_stall_ms;
	/* max_request_size: longest request line in bytes (default 64k) */
	size_t max_request_size;
	/* user_memory_limit: bytes all of one user's sessions may hold
	 * (daemon/memlimit.h says what is counted; default 1G, 1M to 1T;
	 * at least one traced thread's buffers and one subscriber's) */
	uint64_t user_memory_limit;
	/* log_level: error, warning, info, debug (default info) */
	enum ptd_log_level log_level;
};

/* Fill @c with the defaults above. */
void ptd_config_defaults(struct ptd_config *c);

/* Parse @text (@len bytes; need not be NUL-terminated) over the values
 * already in @c (call ptd_config_defaults first).  @origin names the input
 * in messages ("/etc/ptd/ptd.conf").
 * Returns 0, or -PTD_EFORMAT with "origin:LINE: ..." in @diag (unknown key,
 * repeated key, missing '=', bad value), or -PTD_ELIMIT (line longer than
 * 4096 bytes, file larger than 1 MiB). @c is unchanged on failure. */
int ptd_config_parse(const char *text, size_t len, const char *origin,
		     struct ptd_config *c, struct ptd_diag *diag);

/* Read and parse @path.  A missing file is -ENOENT with a message (the
 * caller decides whether defaults are fine: ptd uses defaults when the
 * default path is missing, but not when -c names a missing file). */
int ptd_config_load(const char *path, struct ptd_config *c,
		    struct ptd_diag *diag);

const char *ptd_log_level_name(enum ptd_log_level l);

#endif
