package bpf

// The test-only program testdata/slot.bpf.c checks include/hist.h in the
// kernel; bpf2go names its output *_bpfel_test.go because this file is a
// test file, so it is not part of the package proper.

//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel slotTest testdata/slot.bpf.c -- -I./include
