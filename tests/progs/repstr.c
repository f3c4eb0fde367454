/* REP MOVS / REP STOS: one instruction however many iterations. */
#include <stddef.h>
static char src[4096], dst[4096];
int main(void)
{
	size_t n = sizeof(src);
	void *d = dst, *s = src;
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	n = sizeof(dst) / 8;
	d = dst;
	__asm__ volatile("rep stosq" : "+D"(d), "+c"(n) : "a"(0x1122334455667788UL) : "memory");
	n = 0; /* zero iterations: still one instruction */
	d = dst;
	__asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(0) : "memory");
	return dst[7] == 0x11 ? 0 : 1;
}
