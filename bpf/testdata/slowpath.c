// Test helper for slow-event stacks: a known slow path in a named function.
//
//   slowpath N MS
//
// prints the runtime address of slow_path_sleep in hexadecimal, waits for a
// line on stdin (or its end), then calls slow_path_sleep N times (0: until
// killed), each sleeping MS milliseconds, and prints "done".
//
// slow_path_sleep makes the nanosleep system call itself (a syscall
// instruction, no libc wrapper), so the user registers at the kernel entry
// point into it; built with -fno-omit-frame-pointer the frame-pointer walk
// then gives slow_path_sleep, its caller run_slow_path, and main. Through a
// libc wrapper without a frame of its own, the walk would skip the wrapper's
// caller: the one function the test looks for.
//
// x86-64 only (the system call convention is written out).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/syscall.h>

__attribute__((noinline)) void slow_path_sleep(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	long ret;

	// Retried on EINTR (-4) with the same request: never shorter than ms.
	do {
		__asm__ volatile("syscall"
				 : "=a"(ret)
				 : "0"((long)SYS_nanosleep), "D"(&ts), "S"(0L)
				 : "rcx", "r11", "memory");
	} while (ret == -4);
}

__attribute__((noinline)) void run_slow_path(long n, long ms)
{
	for (long i = 0; n == 0 || i < n; i++)
		slow_path_sleep(ms);
}

int main(int argc, char **argv)
{
	char line[16];

	if (argc != 3)
		return 2;
	printf("%lx\n", (unsigned long)&slow_path_sleep);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) && ferror(stdin))
		return 3;
	run_slow_path(atol(argv[1]), atol(argv[2]));
	printf("done\n");
	return 0;
}
