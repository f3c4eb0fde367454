/* clock_gettime through the vDSO: code that no file backs. */
#include <time.h>
int main(void)
{
	struct timespec ts;
	long s = 0;
	for (int i = 0; i < 5; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s += ts.tv_nsec & 1;
	}
	return s < 0;
}
