/* execve in the middle of a traced run: the image is replaced where the
 * trace shows the thread in the kernel. */
#include <unistd.h>
int main(int argc, char **argv)
{
	volatile int s = 0;
	for (int i = 0; i < 10; i++)
		s += i;
	if (argc == 1) {
		char *args[] = { argv[0], "again", NULL };
		execv("/proc/self/exe", args);
		return 2;
	}
	return s == 45 ? 0 : 1;
}
