/* A signal handler: asynchronous entry (FUP + TIP.PGD, TIP.PGE at the
 * handler) and the return through rt_sigreturn. */
#include <signal.h>
#include <string.h>
#include <unistd.h>
static volatile sig_atomic_t hits;
static void handler(int sig)
{
	(void)sig;
	hits++;
}
int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 3; i++)
		raise(SIGUSR1);
	/* a timer signal that interrupts a plain loop in user space */
	sigaction(SIGALRM, &sa, NULL);
	alarm(1);
	volatile unsigned long spin = 0;
	while (hits < 4)
		spin++;
	return hits == 4 ? 0 : 1;
}
