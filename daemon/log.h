/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log (the library never logs): one line per message on
 * stderr.  When stderr is connected to the journal ($JOURNAL_STREAM names
 * its device:inode) each line starts with the syslog priority "<N>" the
 * journal understands; otherwise it reads "ptd: LEVEL: message".
 * Newlines inside a message become spaces, so a client-supplied string
 * cannot forge log lines.  Messages above the configured level are
 * dropped.  errno is preserved by every call.
 */
#ifndef PTD_DAEMON_LOG_H
#define PTD_DAEMON_LOG_H

#include "daemon/config.h"

/* Log to stderr at @level (decides journal mode once, now). */
void ptd_log_init(enum ptd_log_level level);
/* Same, to @fd (tests); journal mode if $JOURNAL_STREAM matches @fd. */
void ptd_log_init_fd(enum ptd_log_level level, int fd);
void ptd_log_set_level(enum ptd_log_level level);
enum ptd_log_level ptd_log_get_level(void);

void ptd_log(enum ptd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Same, appending ": " and the text of @err (a negative errno or
 * -PTD_E* code, as ptd_strerror gives it). */
void ptd_log_err(enum ptd_log_level level, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define ptd_log_error(...) ptd_log(PTD_LOG_ERROR, __VA_ARGS__)
#define ptd_log_warning(...) ptd_log(PTD_LOG_WARNING, __VA_ARGS__)
#define ptd_log_info(...) ptd_log(PTD_LOG_INFO, __VA_ARGS__)
#define ptd_log_debug(...) ptd_log(PTD_LOG_DEBUG, __VA_ARGS__)

#endif
