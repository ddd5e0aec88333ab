// Test stand-in for libcudart/libcuda, built by bpf/cuda's tests with
//   gcc -O2 -shared -fPIC -o libcudart.so.12 fakecuda.c
// Each function has the real CUDA ABI (so the probes read the stream
// argument from the same register or stack slot as with the real library)
// and sleeps a known time instead of talking to a GPU. cuGraphLaunch is
// deliberately absent: the probe must report it as missing.
#define _GNU_SOURCE
#include <stddef.h>
#include <time.h>

typedef int cudaError_t;
typedef int CUresult;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUstream_st *CUstream;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUfunc_st *CUfunction;
typedef struct {
	unsigned int x, y, z;
} dim3;

/* Sleep times, ns, at 100 % (fakecuda_set_scale). */
#define LAUNCH_NS 2000000L /* kernel and graph launches: 2 ms */
#define SYNC_NS 5000000L   /* synchronisation: 5 ms */
#define COPY_NS 3000000L   /* copies: 3 ms */

static int scale = 100; /* percent */

void fakecuda_set_scale(int percent)
{
	scale = percent;
}

static void fake_work(long ns)
{
	ns = ns * scale / 100;
	if (ns <= 0)
		return;
	struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

__attribute__((noinline)) cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
							size_t shared_mem, cudaStream_t stream)
{
	(void)func, (void)grid, (void)block, (void)args, (void)shared_mem, (void)stream;
	fake_work(LAUNCH_NS);
	return 0;
}

__attribute__((noinline)) cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
	(void)exec, (void)stream;
	fake_work(LAUNCH_NS);
	return 0;
}

__attribute__((noinline)) cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	(void)stream;
	fake_work(SYNC_NS);
	return 0;
}

__attribute__((noinline)) cudaError_t cudaDeviceSynchronize(void)
{
	fake_work(SYNC_NS);
	return 0;
}

__attribute__((noinline)) cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind)
{
	(void)dst, (void)src, (void)count, (void)kind;
	fake_work(COPY_NS);
	return 0;
}

__attribute__((noinline)) cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind,
						       cudaStream_t stream)
{
	(void)dst, (void)src, (void)count, (void)kind, (void)stream;
	fake_work(COPY_NS);
	return 0;
}

__attribute__((noinline)) CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
						   unsigned int bx, unsigned int by, unsigned int bz,
						   unsigned int shared_mem, CUstream stream, void **params, void **extra)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz;
	(void)shared_mem, (void)stream, (void)params, (void)extra;
	fake_work(LAUNCH_NS);
	return 0;
}

__attribute__((noinline)) CUresult cuStreamSynchronize(CUstream stream)
{
	(void)stream;
	fake_work(SYNC_NS);
	return 0;
}
