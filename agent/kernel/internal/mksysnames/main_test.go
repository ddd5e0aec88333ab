package main

import (
	"os"
	"strings"
	"testing"
)

// TestCommittedTableIsGenerated: the committed sysnames_amd64.go is what
// this generator writes from the installed header.
func TestCommittedTableIsGenerated(t *testing.T) {
	const header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
	src, err := os.ReadFile(header)
	if err != nil {
		t.Skipf("%s: %v (linux-libc-dev is not installed)", header, err)
	}
	got, err := generate(src)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../sysnames_amd64.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("agent/kernel/sysnames_amd64.go differs from the installed header's table: run go generate ./agent/kernel and commit")
	}
}

func TestGenerate(t *testing.T) {
	got, err := generate([]byte("#define __NR_read 0\n#define __NR_write 1\n#define __NR_x __NR_read\n#define __NR_open 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`0: "read",`, `1: "write",`, `3: "open",`, "DO NOT EDIT."} {
		if !strings.Contains(string(got), want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "2:") {
		t.Errorf("a gap was filled:\n%s", got)
	}
	if _, err := generate([]byte("#define __NR_a 1\n#define __NR_b 1\n")); err == nil {
		t.Error("a number defined twice was accepted")
	}
}
