/* SPDX-License-Identifier: MIT */
/*
 * The listening sockets (srv.h): the ones systemd passed ($LISTEN_FDS,
 * sdnotify.h), or our own socket at socket_path, and closing them when
 * shutdown begins.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/strutil.h"
#include "daemon/log.h"
#include "daemon/sdnotify.h"
#include "daemon/server/srv.h"

int srv_ep_add(struct ptd_server *s, struct ep_tag *t, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = t };

	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, t->fd, &e) < 0 ? -errno : 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Is something listening on @path?  Returns 1 yes, 0 no (stale: connect
 * refused), -errno when unsure. */
static int socket_alive(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(a.sun_path, path, strlen(path) + 1);
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	r = r == 0 ? 1 : errno == ECONNREFUSED ? 0 : -errno;
	close(fd);
	return r;
}

static int make_parent(const char *path, struct ptd_diag *diag)
{
	char dir[PTD_CONF_PATH_MAX];
	char *slash;

	(void)ptd_strlcpy(dir, path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = 0;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return ptd_diagf(diag, -errno,
				 "failed to create directory '%s': %s", dir,
				 strerror(errno));
	return 0;
}

/* Bind @fd to @path, removing a stale socket first if nothing listens on
 * it.  A path that exists and is not a socket is never removed. */
static int bind_path(int fd, const char *path, struct ptd_diag *diag)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int r, alive;

	memcpy(a.sun_path, path, strlen(path) + 1);
	/* Created 0600; chmod sets socket_mode once it is ours. */
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&a, sizeof(a));
	if (r < 0 && errno == EADDRINUSE) {
		if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			umask(old);
			return ptd_diagf(diag, -EEXIST,
					 "'%s' exists and is not a socket; "
					 "not removing it",
					 path);
		}
		alive = socket_alive(path);
		if (alive != 0) {
			umask(old);
			if (alive > 0)
				return ptd_diagf(diag, -EADDRINUSE,
						 "another ptd is listening on "
						 "'%s'",
						 path);
			return ptd_diagf(diag, alive,
					 "cannot tell whether '%s' is in use: "
					 "%s",
					 path, strerror(-alive));
		}
		(void)unlink(path);
		r = bind(fd, (struct sockaddr *)&a, sizeof(a));
	}
	r = r < 0 ? -errno : 0;
	umask(old);
	if (r < 0)
		return ptd_diagf(diag, r, "failed to bind '%s': %s", path,
				 strerror(-r));
	return 0;
}

static int socket_create(struct ptd_server *s, struct ptd_diag *diag)
{
	const char *path = s->cfg.socket_path;
	struct group *g;
	_cleanup_close_ int fd = -1;
	int r;

	if (!path[0] || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return ptd_diagf(diag, -ENAMETOOLONG,
				 "socket path '%s' is empty or too long",
				 path);
	r = make_parent(path, diag);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ptd_diagf(diag, -errno, "failed to create a socket: %s",
				 strerror(errno));
	r = bind_path(fd, path, diag);
	if (r < 0)
		return r;
	s->created_socket = true;
	/* Listen at once: a client that sees the socket appear (a script
	 * waiting for it) must not be refused while we set its mode and
	 * group; until then it is 0600, ours alone. */
	if (listen(fd, 128) < 0)
		return ptd_diagf(diag, -errno, "failed to listen on '%s': %s",
				 path, strerror(errno));
	if (chmod(path, s->cfg.socket_mode) < 0)
		return ptd_diagf(diag, -errno, "failed to chmod '%s' to %04o: %s",
				 path, s->cfg.socket_mode, strerror(errno));
	g = s->cfg.socket_group[0] ? getgrnam(s->cfg.socket_group) : NULL;
	if (!g && s->cfg.socket_group[0])
		ptd_log_warning("socket group '%s' does not exist, socket '%s' "
				"keeps group %u",
				s->cfg.socket_group, path, (unsigned)getegid());
	else if (g && chown(path, (uid_t)-1, g->gr_gid) < 0)
		ptd_log_err(PTD_LOG_WARNING, -errno,
			    "failed to give socket '%s' to group '%s', "
			    "ignoring",
			    path, s->cfg.socket_group);
	s->listen[0].kind = EP_LISTEN;
	s->listen[0].fd = PTD_TAKE_FD(fd);
	s->nlisten = 1;
	return 0;
}

int srv_listen_open(struct ptd_server *s, struct ptd_diag *diag)
{
	int fds[MAX_LISTEN];
	int n, i, r;

	n = ptd_sd_listen_fds(fds, MAX_LISTEN, diag);
	if (n < 0)
		return n;
	if (n == 0)
		return socket_create(s, diag);
	for (i = 0; i < n; i++) {
		s->listen[i].kind = EP_LISTEN;
		s->listen[i].fd = fds[i];
		s->nlisten++;
		r = set_nonblock(fds[i]);
		if (r < 0)
			return ptd_diagf(diag, r,
					 "socket-activated fd %d: %s", fds[i],
					 strerror(-r));
	}
	ptd_log_info("using %d socket-activated socket(s)", n);
	return 0;
}

/* No new client: the listening sockets closed, our socket removed. */
void srv_listen_close(struct ptd_server *s)
{
	unsigned i;

	for (i = 0; i < s->nlisten; i++) {
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->listen[i].fd, NULL);
		close(s->listen[i].fd);
		s->listen[i].fd = -1;
	}
	s->nlisten = 0;
	if (s->created_socket) {
		(void)unlink(s->cfg.socket_path);
		s->created_socket = false;
	}
}
