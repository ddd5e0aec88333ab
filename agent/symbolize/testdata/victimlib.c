__attribute__((noinline)) int lib_func(int x) { return x + 41; }
