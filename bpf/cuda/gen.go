package cuda

//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3 -D__TARGET_ARCH_x86" -target bpfel cuda cuda.bpf.c -- -I../include
