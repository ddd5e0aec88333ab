package bpf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindCgroup2Mount(t *testing.T) {
	cases := []struct {
		name, in, want string
		err            error
	}{
		{"unified", "29 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", nil},
		{"hybrid", "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
			"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
			"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified", nil},
		{"escaped space", `50 1 0:40 / /mnt/my\040cg rw - cgroup2 none rw` + "\n", "/mnt/my cg", nil},
		{"none", "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n", "", ErrNoCgroup2},
		{"truncated", "41 31 - cgroup2 cgroup2 rw\n", "", errors.New("any")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FindCgroup2Mount(strings.NewReader(c.in))
			if c.err != nil {
				if err == nil || (errors.Is(c.err, ErrNoCgroup2) && !errors.Is(err, ErrNoCgroup2)) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestCgroupResolverTree resolves inode numbers of a directory tree, which
// is exactly what a cgroup2 hierarchy looks like to the resolver.
func TestCgroupResolverTree(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"kubepods.slice/kubepods-pod1.slice", "system.slice/.hidden"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewCgroupResolver(root)
	if err != nil {
		t.Fatal(err)
	}
	r.MinRewalk = 0
	for _, rel := range []string{"", "kubepods.slice/kubepods-pod1.slice", "system.slice/.hidden"} {
		id, err := CgroupID(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Path(id)
		if err != nil {
			t.Fatal(err)
		}
		if want := "/" + rel; got != want {
			t.Fatalf("Path(%d) = %q, want %q", id, got, want)
		}
	}
	// A directory created after the first walk is found by the re-walk.
	late := filepath.Join(root, "late")
	if err := os.Mkdir(late, 0o755); err != nil {
		t.Fatal(err)
	}
	id, _ := CgroupID(late)
	if got, err := r.Path(id); err != nil || got != "/late" {
		t.Fatalf("Path(late) = %q, %v", got, err)
	}
	if _, err := r.Path(1 << 62); !errors.Is(err, ErrUnknownCgroup) {
		t.Fatalf("unknown id: err = %v, want ErrUnknownCgroup", err)
	}
}

func FuzzFindCgroup2Mount(f *testing.F) {
	f.Add("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
	f.Add(`50 1 0:40 / /mnt/a\134b rw - cgroup2 none rw`)
	f.Add(" - cgroup2")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := FindCgroup2Mount(strings.NewReader(s))
		if err == nil && m == "" && !strings.Contains(s, " - cgroup2") {
			t.Fatalf("empty mount without error for %q", s)
		}
	})
}
