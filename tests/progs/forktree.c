/* SPDX-License-Identifier: MIT */
/*
 * A process tree for options.children (test-children): waits for a byte
 * on stdin (the test attaches first), then forks N children (argv[1]),
 * the first of which forks a grandchild, then vforks a child that execs
 * argv[2] (prog-tiny, which exits with 41).  Each exits with a status of
 * its own, checked by its parent; prints what it saw and exits 0 only if
 * every status was the expected one.  With a third argument "orphan":
 * forks one child (exit status 7) and exits at once, not waiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned long work(unsigned n)
{
	volatile unsigned long x = 0;

	for (unsigned i = 0; i < n; i++)
		x += i;
	return x;
}

static int status_of(pid_t p)
{
	int st;

	if (waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
	pid_t kids[8], v;
	int n, st;
	volatile int bad = 0;	/* (vfork) */
	char c;

	if (argc < 3 || (n = atoi(argv[1])) < 1 || n > 8)
		return 2;
	if (read(0, &c, 1) != 1)
		return 2;
	/* "orphan": a child left to run on as its parent exits at once, as
	 * a daemon's is */
	if (argc > 3 && !strcmp(argv[3], "orphan")) {
		pid_t o = fork();

		if (o == 0)
			_exit(work(3000) == 4498500 ? 7 : 1);
		return o < 0 ? 3 : 0;
	}
	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 3;
		if (kids[i] == 0) {
			if (i == 0) {
				pid_t g = fork();

				if (g == 0)
					_exit(work(1000) == 499500 ? 50 : 1);
				if (g < 0 || status_of(g) != 50)
					_exit(1);
			}
			_exit(work(500u * (i + 1)) ==
				      250u * (i + 1) * (500u * (i + 1) - 1)
				      ? 10 + i : 1);
		}
	}
	v = vfork();
	if (v == 0) {
		execl(argv[2], argv[2], (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < n; i++) {
		st = status_of(kids[i]);
		printf("child %d: %d\n", i, st);
		bad += st != 10 + i;
	}
	st = v < 0 ? -1 : status_of(v);
	printf("vfork child: %d\n", st);
	bad += st != 41;
	printf("%s\n", bad ? "wrong" : "ok");
	return bad ? 1 : 0;
}
