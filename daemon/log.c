/* SPDX-License-Identifier: MIT */
#include "daemon/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/diag.h"
#include "common/fileio.h"

/* The log is the one piece of process-wide state the daemon keeps outside
 * its manager: every module logs, and messages must not interleave. */
static struct {
	enum ptd_log_level level;
	int fd;
	bool journal;
} log_state = { PTD_LOG_INFO, STDERR_FILENO, false };

/* systemd sets JOURNAL_STREAM=DEV:INO for the stream it connected to
 * stdout/stderr; if @fd is still that stream, the journal reads "<N>"
 * prefixes as priorities (sd-daemon(3)). */
static bool fd_is_journal(int fd)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int n = 0;

	if (!e || sscanf(e, "%llu:%llu%n", &dev, &ino, &n) != 2 ||
	    e[n] != '\0')
		return false;
	if (fstat(fd, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void ptd_log_init_fd(enum ptd_log_level level, int fd)
{
	int saved = errno;

	log_state.level = level;
	log_state.fd = fd;
	log_state.journal = fd_is_journal(fd);
	errno = saved;
}

void ptd_log_init(enum ptd_log_level level)
{
	ptd_log_init_fd(level, STDERR_FILENO);
}

void ptd_log_set_level(enum ptd_log_level level)
{
	log_state.level = level;
}

enum ptd_log_level ptd_log_get_level(void)
{
	return log_state.level;
}

static int syslog_priority(enum ptd_log_level l)
{
	switch (l) {
	case PTD_LOG_ERROR:
		return 3;	/* LOG_ERR */
	case PTD_LOG_WARNING:
		return 4;	/* LOG_WARNING */
	case PTD_LOG_INFO:
		return 6;	/* LOG_INFO */
	case PTD_LOG_DEBUG:
		return 7;	/* LOG_DEBUG */
	}
	return 6;
}

/* Format the whole line first and write it with one write(2), so lines
 * from different threads do not interleave. */
static void __attribute__((format(printf, 3, 0)))
log_emit(enum ptd_log_level level, int err, const char *fmt, va_list ap)
{
	char line[2048];
	size_t n;
	int k;

	if (level > log_state.level)
		return;
	if (log_state.journal)
		k = snprintf(line, sizeof(line), "<%d>",
			     syslog_priority(level));
	else
		k = snprintf(line, sizeof(line), "ptd: %s: ",
			     ptd_log_level_name(level));
	n = k > 0 ? (size_t)k : 0;
	k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (k > 0)
		n = n + (size_t)k < sizeof(line) ? n + (size_t)k
						 : sizeof(line) - 1;
	if (err && n < sizeof(line) - 1) {
		k = snprintf(line + n, sizeof(line) - n, ": %s",
			     ptd_strerror(err));
		if (k > 0)
			n = n + (size_t)k < sizeof(line) ? n + (size_t)k
							 : sizeof(line) - 1;
	}
	/* One message, one line: embedded newlines (a client's string, a
	 * path) must not start a forged line. */
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[n++] = '\n';
	(void)ptd_write_all(log_state.fd, line, n);
}

void ptd_log(enum ptd_log_level level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_emit(level, 0, fmt, ap);
	va_end(ap);
	errno = saved;
}

void ptd_log_err(enum ptd_log_level level, int err, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_emit(level, err, fmt, ap);
	va_end(ap);
	errno = saved;
}
