package pagefault

//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel pagefault pagefault.bpf.c -- -I../include
