package syscalls

//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel syscalls syscalls.bpf.c -- -I../include
