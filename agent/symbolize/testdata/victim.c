/* Prints the runtime addresses of a few functions (its own and one from
 * a shared library next to it), then waits for stdin to close so the test
 * can read its /proc/PID/maps. */
#include <stdio.h>
#include <unistd.h>

extern int lib_func(int);

__attribute__((noinline)) int alpha_func(int x) { return x * 3 + 1; }
__attribute__((noinline)) int beta_func(int x) { return alpha_func(x) - 7; }

int main(void) {
	printf("alpha_func %lx\n", (unsigned long)&alpha_func);
	printf("beta_func %lx\n", (unsigned long)&beta_func);
	printf("lib_func %lx\n", (unsigned long)&lib_func);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0) {
	}
	return beta_func(lib_func(1)) == 0;
}
