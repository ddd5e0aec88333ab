#!/bin/sh
# Regenerates the BPF objects and their Go bindings and fails when they
# differ from what is checked in. Run from anywhere; `make check-generated`
# calls it. Needs the pinned toolchain (see README.md): Debian clang 14.0.6
# (clang-14, llvm-14 for llvm-strip-14) and libbpf-dev 1.1.2 headers.
set -eu

cd "$(dirname "$0")"

want_clang="14.0.6"
if ! command -v clang-14 >/dev/null 2>&1; then
	echo "check-generated: clang-14 not found; apt-get install clang-14 llvm-14 libbpf-dev" >&2
	exit 2
fi
have_clang=$(clang-14 --version | sed -n 's/.*clang version \([0-9.]*\).*/\1/p' | head -n 1)
if [ "$have_clang" != "$want_clang" ]; then
	echo "check-generated: clang-14 is $have_clang, want $want_clang (objects differ between compiler versions)" >&2
	exit 2
fi
want_libbpf="1.1"
have_libbpf=$(sed -n 's/^#define LIBBPF_MINOR_VERSION \([0-9]*\)/1.\1/p' /usr/include/bpf/libbpf_version.h 2>/dev/null || true)
if [ "$have_libbpf" != "$want_libbpf" ]; then
	echo "check-generated: libbpf headers are ${have_libbpf:-missing}, want $want_libbpf (libbpf-dev)" >&2
	exit 2
fi

go generate ./...

# Changed tracked files and new untracked ones both count.
changed=$(git status --porcelain --untracked-files=all -- . | grep -E '_bpfel(_test)?\.(go|o)$' || true)
if [ -n "$changed" ]; then
	echo "check-generated: generated BPF files are out of date; run 'go generate ./bpf/...' and commit:" >&2
	echo "$changed" >&2
	exit 1
fi
echo "check-generated: BPF objects up to date"
