package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseFull(t *testing.T) {
	b, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("node", c.Node, "gpu-node-7")
	check("external cluster", c.ExternalLabels["cluster"], "prod-eu")
	check("server.url", c.Server.URL, "http://tailroot.monitoring:9490")
	check("server.timeout", c.Server.Timeout.D(), 15*time.Second)
	check("header", c.Server.Headers["X-Scope-OrgID"], "inference")
	check("queue.max_bytes", int64(c.Queue.MaxBytes), int64(2<<30))
	check("queue.segment_bytes", int64(c.Queue.SegmentBytes), int64(32<<20))
	check("queue.fsync", c.Queue.Fsync, "interval")
	check("queue.fsync_interval", c.Queue.FsyncInterval.D(), 500*time.Millisecond)
	check("queue.flush_interval", c.Queue.FlushInterval.D(), 2*time.Second)
	check("queue.max_backoff", c.Queue.MaxBackoff.D(), time.Minute)
	check("processes.pids", c.Procs.PIDs[0], 4242)
	check("comm regexps", len(c.Procs.CommRegexps()), 3)
	check("comm anchored: python3 matches", c.Procs.CommRegexps()[0].MatchString("python3"), true)
	check("comm anchored: xpython3 does not", c.Procs.CommRegexps()[0].MatchString("xpython3"), false)
	check("ebpf on", c.EBPF.On(), true)
	check("ebpf.interval", c.EBPF.Interval.D(), 5*time.Second)
	check("runqueue on", c.EBPF.RunQueue.On(), true)
	check("per-cgroup off", c.EBPF.PerCgroup(), false)
	check("syscalls off", c.EBPF.Syscalls.On(), false)
	check("cuda symbols", strings.Join(c.EBPF.CUDA.Symbols, ","), "cudaStreamSynchronize,cudaDeviceSynchronize")
	check("gpu.sample_interval", c.GPU.SampleInterval.D(), 50*time.Millisecond)
	check("gpu.process_interval default", c.GPU.ProcessInterval.D(), time.Second)
	check("targets", len(c.Scrape.Targets), 2)
	check("target 0 interval", c.Scrape.Targets[0].Interval.D(), 5*time.Second)
	check("target 0 timeout = scrape.timeout", c.Scrape.Targets[0].Timeout.D(), 5*time.Second)
	check("target 1 interval = scrape.interval", c.Scrape.Targets[1].Interval.D(), 10*time.Second)
	check("target 0 label", c.Scrape.Targets[0].Labels["model"], "llama-3-70b")
	check("evidence.top_n", c.Evidence.TopN, 16)
	check("evidence.stack_min_latency", c.Evidence.StackMinLatency.D(), 2*time.Millisecond)
	check("evidence.url derived", c.Evidence.URL, "http://tailroot.monitoring:9490/api/v1/evidence")
}

func TestParseEmptyIsDefault(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.Queue.MaxBytes != d.Queue.MaxBytes || c.GPU.SampleInterval.D() != 100*time.Millisecond || c.Node == "" || c.Listen != d.Listen {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown key", "queue:\n  max_byte: 1GiB\n", "max_byte"},
		{"bad duration", "scrape:\n  interval: 10 seconds\n", "10 seconds"},
		{"negative duration", "scrape:\n  interval: -1s\n", "negative"},
		{"bad size", "queue:\n  max_bytes: lots\n", "lots"},
		{"max below segments", "queue:\n  max_bytes: 10MiB\n  segment_bytes: 8MiB\n", "queue.max_bytes"},
		{"fsync", "queue:\n  fsync: sometimes\n", "sometimes"},
		{"server url", "server:\n  url: tailroot:9490\n", "server.url"},
		{"comm regexp", "processes:\n  comm: ['(']\n", "processes.comm"},
		{"pid", "processes:\n  pids: [0]\n", "processes.pids"},
		{"cgroup", "processes:\n  cgroups: [kubepods]\n", "processes.cgroups"},
		{"backend", "gpu:\n  backend: dcgm\n", "gpu.backend"},
		{"job", "scrape:\n  targets:\n    - url: http://a/metrics\n", "job is empty"},
		{"target url", "scrape:\n  targets:\n    - job: a\n      url: ':::'\n", "scrape.targets[0].url"},
		{"duplicate target", "scrape:\n  targets:\n    - {job: a, url: 'http://a/m'}\n    - {job: a, url: 'http://a/m'}\n", "twice"},
		{"timeout over interval", "scrape:\n  targets:\n    - {job: a, url: 'http://a/m', interval: 1s, timeout: 2s}\n", "longer than"},
		{"label name", "external_labels:\n  '1x': y\n", "1x"},
		{"reserved label", "scrape:\n  targets:\n    - {job: a, url: 'http://a/m', labels: {__name__: x}}\n", "__name__"},
		{"zero interval", "ebpf:\n  interval: 0s\n", "ebpf.interval"},
		{"negative stack latency", "evidence:\n  stack_min_latency: -1ms\n", "negative"},
		{"backoff order", "queue:\n  min_backoff: 10s\n  max_backoff: 1s\n", "max_backoff"},
		{"not yaml", "queue: [\n", "config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", c.yaml)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %q", err, c.want)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"512KiB", 512 << 10},
		{"64MiB", 64 << 20},
		{"1GiB", 1 << 30},
		{"10MB", 10_000_000},
		{"2 GB", 2_000_000_000},
		{"7B", 7},
		{"1TiB", 1 << 40},
	} {
		got, err := ParseBytes(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5GiB", "GiB", "9999999999TiB", "1 PiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("testdata/full.yaml")
	f.Add(b)
	f.Add([]byte("queue:\n  max_bytes: 1GiB\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		// Whatever parses must be valid.
		if c.Queue.MaxBytes < 2*c.Queue.SegmentBytes || c.Node == "" || c.Evidence.URL == "" {
			t.Fatalf("invalid config accepted: %+v", c)
		}
	})
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1GiB", "10MB", "0", "-5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseBytes(s); err == nil && n < 0 {
			t.Fatalf("%q -> %d", s, n)
		}
	})
}

func TestPlainIntegerSizes(t *testing.T) {
	c, err := Parse([]byte("queue:\n  max_bytes: 1073741824\n  segment_bytes: 1048576\n"))
	if err != nil || c.Queue.MaxBytes != 1<<30 || c.Queue.SegmentBytes != 1<<20 {
		t.Fatalf("%v %d %d", err, c.Queue.MaxBytes, c.Queue.SegmentBytes)
	}
}
