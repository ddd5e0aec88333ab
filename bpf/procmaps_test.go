package bpf

import (
	"os"
	"strings"
	"testing"
)

const mapsSample = `55d4c6a00000-55d4c6a02000 r--p 00000000 fd:01 1835080                    /usr/bin/python3.11
7f3e8c000000-7f3e8c021000 rw-p 00000000 00:00 0 
7f3e90a00000-7f3e90a28000 r--p 00000000 fd:01 1311490                    /usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127
7f3e90a28000-7f3e90bbd000 r-xp 00028000 fd:01 1311490                    /usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127
7f3e91000000-7f3e92000000 r-xp 00100000 fd:01 1311777                    /opt/my libs/libcuda.so.1 (deleted)
7ffd1d5e2000-7ffd1d603000 rw-p 00000000 00:00 0                          [stack]
7ffd1d7a8000-7ffd1d7aa000 r-xp 00000000 00:00 0
`

func TestParseMaps(t *testing.T) {
	ms, err := ParseMaps(strings.NewReader(mapsSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("%d mappings, want 7", len(ms))
	}
	m := ms[3]
	if m.Start != 0x7f3e90a28000 || m.End != 0x7f3e90bbd000 || m.Perms != "r-xp" || m.Offset != 0x28000 ||
		m.Inode != 1311490 || m.Path != "/usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127" {
		t.Fatalf("line 4 = %+v", m)
	}
	if ms[4].Path != "/opt/my libs/libcuda.so.1 (deleted)" {
		t.Fatalf("path with space: %q", ms[4].Path)
	}
	if ms[1].Path != "" || ms[1].Inode != 0 || ms[5].Path != "[stack]" || ms[6].Path != "" {
		t.Fatalf("anonymous: %+v %+v %+v", ms[1], ms[5], ms[6])
	}
	for _, bad := range []string{
		"zz-10 r-xp 0 fd:01 1 /x",
		"10-5 r-xp 0 fd:01 1 /x",
		"5-10 r-x 0 fd:01 1 /x",
		"5-10 r-xp 0 fd:01",
		"5-10 r-xp 0 fd:01 abc /x",
		"510 r-xp 0 fd:01 1 /x",
	} {
		if _, err := ParseMaps(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestLibraryBase(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127": "libcudart",
		"/usr/lib/libcuda.so.1":                           "libcuda",
		"/usr/lib/libcuda.so":                             "libcuda",
		"/usr/lib/libcudafoo.so.1":                        "libcudafoo",
		"/usr/lib/libcuda.sox":                            "",
		"/usr/bin/python3":                                "",
	} {
		if got := LibraryBase(in); got != want {
			t.Errorf("LibraryBase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMappedFilesSelf finds the test binary's own libc or executable in
// its maps; it needs only /proc.
func TestMappedFilesSelf(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got, err := MappedFiles(os.Getpid(), func(p string) bool { return p == exe })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != exe {
		t.Fatalf("MappedFiles = %v, want [%s]", got, exe)
	}
	if p := ProcRootPath(42, "/usr/lib/libcuda.so.1"); p != "/proc/42/root/usr/lib/libcuda.so.1" {
		t.Fatalf("ProcRootPath = %q", p)
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add(mapsSample)
	f.Add("0-1 ---p 0 0:0 0")
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseMaps(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.End < m.Start || len(m.Perms) != 4 {
				t.Fatalf("invalid mapping accepted: %+v", m)
			}
		}
	})
}
