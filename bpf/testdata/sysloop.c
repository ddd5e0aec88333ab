// Test helper for bpf/syscalls: a single-threaded process that, after a
// line on stdin, makes exactly N nanosleep(SLEEP_US) and N getpid system
// calls and prints the wall time the nanosleep loop took, in ns.
//
//   sysloop N SLEEP_US
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	char line[16];
	long n, us, i;
	long long t0, t1;

	if (argc != 3)
		return 2;
	n = atol(argv[1]);
	us = atol(argv[2]);
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 3;
	struct timespec req = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
	t0 = now_ns();
	for (i = 0; i < n; i++)
		syscall(SYS_nanosleep, &req, NULL);
	t1 = now_ns();
	for (i = 0; i < n; i++)
		syscall(SYS_getpid);
	printf("%lld\n", t1 - t0);
	return 0;
}
