package fsutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestWriteFileAtomicReplaces(t *testing.T) {
	dir := t.TempDir()
	for _, want := range []string{"first", "second, longer"} {
		if err := WriteFileAtomic(dir, "f", []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "f"))
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "f.tmp")); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing"), "f", nil); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestLockDirExcludes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("flock is exercised on linux")
	}
	dir := t.TempDir()
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir); err == nil {
		t.Fatal("second lock on a locked directory succeeded")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	unlock, err = LockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	_ = unlock()
}
