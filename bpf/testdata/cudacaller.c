// Test program for bpf/cuda: dlopens a (fake) CUDA library and calls its
// API, timing each call itself so the test can compare the probe's numbers
// with the caller's own.
//
//   cudacaller LIB calls ROUNDS   after a line on stdin, call every symbol
//                                 ROUNDS times; print one line per call:
//                                 name tid start_mono_ns dur_ns stream start_real_ns
//   cudacaller LIB bench N        no sleeping; time N cudaStreamSynchronize
//                                 calls and print the total ns
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

typedef struct {
	unsigned int x, y, z;
} dim3;
typedef int (*launch_fn)(const void *, dim3, dim3, void **, size_t, void *);
typedef int (*graph_fn)(void *, void *);
typedef int (*sync_fn)(void *);
typedef int (*devsync_fn)(void);
typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*memcpy_async_fn)(void *, const void *, size_t, int, void *);
typedef int (*cu_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
			    void **, void **);
typedef void (*scale_fn)(int);

static long long clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *lib;

static void *sym(const char *name)
{
	return dlsym(lib, name);
}

/* Streams are opaque pointers; distinct recognisable values per symbol. */
#define STREAM(i) ((void *)(0x5000UL + (i)))

#define TIMED(name, stream, call)                                                                          \
	do {                                                                                               \
		long long real = clock_ns(CLOCK_REALTIME), t0 = clock_ns(CLOCK_MONOTONIC);                 \
		call;                                                                                      \
		long long t1 = clock_ns(CLOCK_MONOTONIC);                                                  \
		printf("%s %ld %lld %lld %lu %lld\n", name, (long)syscall(SYS_gettid), t0, t1 - t0,        \
		       (unsigned long)(stream), real);                                                     \
	} while (0)

int main(int argc, char **argv)
{
	char line[16];
	int rounds, r;

	if (argc != 4)
		return 2;
	lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	if (strcmp(argv[2], "bench") == 0) {
		long n = atol(argv[3]);
		sync_fn f = (sync_fn)sym("cudaStreamSynchronize");
		((scale_fn)sym("fakecuda_set_scale"))(0);
		long long t0 = clock_ns(CLOCK_MONOTONIC);
		for (long i = 0; i < n; i++)
			f(STREAM(0));
		printf("%lld\n", clock_ns(CLOCK_MONOTONIC) - t0);
		return 0;
	}
	rounds = atoi(argv[3]);
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 3;

	dim3 g = {1, 2, 3}, b = {32, 1, 1};
	char buf[64];
	for (r = 0; r < rounds; r++) {
		void *f;
		if ((f = sym("cudaLaunchKernel")))
			TIMED("cudaLaunchKernel", STREAM(1), ((launch_fn)f)(main, g, b, NULL, 128, STREAM(1)));
		if ((f = sym("cudaGraphLaunch")))
			TIMED("cudaGraphLaunch", STREAM(2), ((graph_fn)f)((void *)0x99, STREAM(2)));
		if ((f = sym("cudaStreamSynchronize")))
			TIMED("cudaStreamSynchronize", STREAM(3), ((sync_fn)f)(STREAM(3)));
		if ((f = sym("cudaDeviceSynchronize")))
			TIMED("cudaDeviceSynchronize", 0, ((devsync_fn)f)());
		if ((f = sym("cudaMemcpy")))
			TIMED("cudaMemcpy", 0, ((memcpy_fn)f)(buf, buf + 32, 32, 4));
		if ((f = sym("cudaMemcpyAsync")))
			TIMED("cudaMemcpyAsync", STREAM(6), ((memcpy_async_fn)f)(buf, buf + 32, 32, 4, STREAM(6)));
		if ((f = sym("cuLaunchKernel")))
			TIMED("cuLaunchKernel", STREAM(7),
			      ((cu_launch_fn)f)((void *)0x77, 1, 2, 3, 4, 5, 6, 256, STREAM(7), NULL, NULL));
		if ((f = sym("cuGraphLaunch")))
			TIMED("cuGraphLaunch", STREAM(8), ((graph_fn)f)((void *)0x88, STREAM(8)));
		if ((f = sym("cuStreamSynchronize")))
			TIMED("cuStreamSynchronize", STREAM(9), ((sync_fn)f)(STREAM(9)));
	}
	fflush(stdout);
	return 0;
}
