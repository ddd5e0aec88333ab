package procinfo

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

const containerID = "4b825dc642cb6eb9a060e54bf8d69288fbee4904c6a4d1d4f24e2d5f6e4a5b9c"

// fixture writes a fake /proc with three processes.
func fixture(t *testing.T) string {
	root := t.TempDir()
	for pid, p := range map[int][2]string{
		100: {"python3", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b1f2c3d_1111_2222_3333_444455556666.slice/cri-containerd-" + containerID + ".scope\n"},
		200: {"vllm-worker", "12:cpu:/\n0::/system.slice/vllm.service\n"},
		300: {"bash", "1:name=systemd:/\n"}, // cgroup v1 only
	} {
		dir := filepath.Join(root, strconv.Itoa(pid))
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "comm"), []byte(p[0]+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "cgroup"), []byte(p[1]), 0o644)
	}
	os.MkdirAll(filepath.Join(root, "self"), 0o755)
	return root
}

func TestLookup(t *testing.T) {
	r := Reader{Root: fixture(t)}
	in, err := r.Lookup(100)
	if err != nil {
		t.Fatal(err)
	}
	if in.Comm != "python3" || in.Container.ID != containerID || in.Container.PodUID != "6b1f2c3d-1111-2222-3333-444455556666" || in.Container.QoS != "burstable" {
		t.Fatalf("info %+v", in)
	}
	in, _ = r.Lookup(200)
	if in.Cgroup != "/system.slice/vllm.service" || in.Container.ID != "" {
		t.Fatalf("info %+v", in)
	}
	in, _ = r.Lookup(300)
	if in.Cgroup != "" || in.Comm != "bash" {
		t.Fatalf("v1-only process: %+v", in)
	}
	if _, err := r.Lookup(999); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing process: %v", err)
	}
}

func TestScanSelect(t *testing.T) {
	r := Reader{Root: fixture(t)}
	for _, c := range []struct {
		name string
		sel  Selector
		want []int
	}{
		{"none", Selector{}, nil},
		{"comm anchored", Selector{Comm: []*regexp.Regexp{regexp.MustCompile("^(?:vllm.*)$")}}, []int{200}},
		{"pid", Selector{PIDs: []int{300}}, []int{300}},
		{"cgroup prefix", Selector{Cgroups: []string{"/kubepods.slice"}}, []int{100}},
		{"cgroup element boundary", Selector{Cgroups: []string{"/system.slice/vllm"}}, nil},
		{"cgroup exact", Selector{Cgroups: []string{"/system.slice/vllm.service/"}}, []int{200}},
		{"union", Selector{PIDs: []int{100}, Comm: []*regexp.Regexp{regexp.MustCompile("^(?:bash)$")}}, []int{100, 300}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.Scan(c.sel)
			if err != nil {
				t.Fatal(err)
			}
			var pids []int
			for _, in := range got {
				pids = append(pids, in.PID)
			}
			if len(pids) != len(c.want) {
				t.Fatalf("selected %v, want %v", pids, c.want)
			}
			for i := range pids {
				if pids[i] != c.want[i] {
					t.Fatalf("selected %v, want %v", pids, c.want)
				}
			}
		})
	}
}

func TestLookupSelf(t *testing.T) {
	in, err := Reader{}.Lookup(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("/proc/self/comm")
	if in.Comm+"\n" != string(want) {
		t.Fatalf("comm %q, want %q", in.Comm, want)
	}
}

func FuzzParseCgroupFile(f *testing.F) {
	f.Add([]byte("0::/a/b\n"))
	f.Add([]byte("12:cpu:/x\n0::/\n"))
	f.Add([]byte("0::relative\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseCgroupFile(b)
		if err == nil && (len(p) == 0 || p[0] != '/') {
			t.Fatalf("path %q", p)
		}
	})
}
