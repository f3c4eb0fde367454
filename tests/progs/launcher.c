/* SPDX-License-Identifier: MIT */
/*
 * launcher THREADS RUNS PROG [ARGS...]: THREADS threads, each starting
 * PROG (fork + exec) RUNS times in a row, all at once.  Each thread
 * reads the child's output through a pipe and waits for it with
 * waitpid(WUNTRACED | WCONTINUED), as a job-control shell does, and
 * counts what it saw: stops (with their signal), continues, the exit
 * status.  Prints one line:
 *   runs=N ok=N stops=N sigstop=N continues=N output=TEXT status=S
 * (TEXT and S: the first run's output, its last line, and exit status),
 * and exits 0 if every run gave the same output and exit status as the
 * first, 1 otherwise.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char **prog_argv;
static int runs_per_thread;
static atomic_int runs, ok, stops, sigstops, continues;
static pthread_mutex_t first_lock = PTHREAD_MUTEX_INITIALIZER;
static char first_out[256];
static int first_status = -1;

static int run_once(char *out, size_t cap, int *status)
{
	int p[2], st;
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(prog_argv[0], prog_argv);
		_exit(127);
	}
	close(p[1]);
	while (len + 1 < cap && (n = read(p[0], out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(p[0]);
	for (;;) {
		if (waitpid(pid, &st, WUNTRACED | WCONTINUED) != pid)
			return -1;
		if (WIFSTOPPED(st)) {
			stops++;
			sigstops += WSTOPSIG(st) == SIGSTOP;
			continue;
		}
		if (WIFCONTINUED(st)) {
			continues++;
			continue;
		}
		break;
	}
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

static void *worker(void *arg)
{
	for (int i = 0; i < runs_per_thread; i++) {
		char out[256];
		int status;

		if (run_once(out, sizeof(out), &status) < 0)
			continue;
		runs++;
		pthread_mutex_lock(&first_lock);
		if (first_status < 0) {
			first_status = status;
			snprintf(first_out, sizeof(first_out), "%s", out);
		}
		if (status == first_status && !strcmp(out, first_out))
			ok++;
		pthread_mutex_unlock(&first_lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	int n;

	if (argc < 4 || (n = atoi(argv[1])) < 1 || n > 64 ||
	    (runs_per_thread = atoi(argv[2])) < 1) {
		fprintf(stderr, "usage: launcher THREADS RUNS PROG [ARGS...]\n");
		return 2;
	}
	prog_argv = argv + 3;
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	first_out[strcspn(first_out, "\n")] = 0;
	printf("runs=%d ok=%d stops=%d sigstop=%d continues=%d output=%s "
	       "status=%d\n", (int)runs, (int)ok, (int)stops, (int)sigstops,
	       (int)continues, first_out, first_status);
	return ok == n * runs_per_thread ? 0 : 1;
}
