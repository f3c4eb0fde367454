/* SPDX-License-Identifier: MIT */
/*
 * The smallest program a watch rule can trace: static, no C library, a
 * dozen instructions from the ELF entry to exit (test-watch runs it
 * hundreds of times under single-stepping).  Writes "tiny N\n" (N: its
 * argument count) and exits with 40 + N.
 */
static long sys3(long n, long a, long b, long c)
{
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}

__attribute__((used, noreturn)) void tiny_main(long *sp);

__attribute__((used, noreturn)) void tiny_main(long *sp)
{
	char msg[8] = { 't', 'i', 'n', 'y', ' ', '0', '\n', 0 };
	long argc = sp[0];

	msg[5] = (char)('0' + (argc & 7));
	sys3(1, 1, (long)msg, 7);
	sys3(231, 40 + argc, 0, 0);	/* exit_group */
	for (;;)
		;
}

/* The entry: the stack pointer holds argc, argv... */
__asm__(".globl _start\n"
	"_start:\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call tiny_main\n");
