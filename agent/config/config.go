// Package config reads the agent's YAML configuration.
//
// In: YAML bytes (agent/README.md documents every key). Out: a validated
// Config with defaults filled in. Unknown keys are errors, so a typo does
// not silently turn a feature off; every error names the key and value.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as "250ms", "10s", "1m".
type Duration time.Duration

// UnmarshalYAML parses Go duration syntax.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: duration %q: %w", n.Line, s, err)
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %q is negative", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes Go duration syntax.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Bytes is a size written as 1048576, "512KiB", "64MiB", "1GiB", "10MB".
type Bytes int64

// UnmarshalYAML parses a byte size.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := ParseBytes(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = Bytes(v)
	return nil
}

// MarshalYAML writes the size in bytes.
func (b Bytes) MarshalYAML() (any, error) { return int64(b), nil }

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
	{"TiB", 1 << 40},
	{"KB", 1e3},
	{"MB", 1e6},
	{"GB", 1e9},
	{"TB", 1e12},
	{"B", 1},
}

// ParseBytes parses a non-negative size with an optional unit suffix
// (B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of
// 1024).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative integer with an optional unit (KiB, MiB, GiB, KB, MB, GB)", s)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("size %q overflows", s)
	}
	return n * mult, nil
}

// Config is the agent configuration.
type Config struct {
	// Node names this machine; it becomes the "node" external label.
	// Empty means the host name.
	Node string `yaml:"node"`
	// ExternalLabels are added to every series that lacks them.
	ExternalLabels map[string]string `yaml:"external_labels"`
	// Listen is where the agent serves its own /metrics. Empty disables.
	Listen   string   `yaml:"listen"`
	Server   Server   `yaml:"server"`
	Queue    Queue    `yaml:"queue"`
	Procs    Procs    `yaml:"processes"`
	EBPF     EBPF     `yaml:"ebpf"`
	GPU      GPU      `yaml:"gpu"`
	Scrape   Scrape   `yaml:"scrape"`
	Evidence Evidence `yaml:"evidence"`
}

// Server is where the agent pushes.
type Server struct {
	// URL is tailroot's base URL (http://host:9490); remote write goes to
	// URL + /api/v1/write, evidence to URL + /api/v1/evidence.
	URL      string            `yaml:"url"`
	Timeout  Duration          `yaml:"timeout"`
	Headers  map[string]string `yaml:"headers"`
	Username string            `yaml:"username"`
	// PasswordFile holds the basic-auth password (the file, not the
	// secret, goes in the configuration).
	PasswordFile string `yaml:"password_file"`
	// HTTPClientConfig is Prometheus' HTTP client configuration, inline as
	// in a Prometheus remote_write entry: tls_config (ca_file, cert_file,
	// key_file, server_name, insecure_skip_verify), authorization,
	// bearer_token_file, basic_auth, oauth2, proxy_url, http_headers. The
	// push to the server and the evidence posts both use it. Relative file
	// names are relative to the configuration file.
	HTTPClientConfig promconfig.HTTPClientConfig `yaml:",inline"`
}

// Queue configures the disk queue and the sender.
type Queue struct {
	Dir           string   `yaml:"dir"`
	MaxBytes      Bytes    `yaml:"max_bytes"`
	SegmentBytes  Bytes    `yaml:"segment_bytes"`
	Fsync         string   `yaml:"fsync"`
	FsyncInterval Duration `yaml:"fsync_interval"`
	// FlushInterval is how often collected samples are written to the
	// queue as one request; a crash loses at most this much.
	FlushInterval Duration `yaml:"flush_interval"`
	// MaxSamplesPerRequest flushes early when a batch reaches it.
	MaxSamplesPerRequest int      `yaml:"max_samples_per_request"`
	MinBackoff           Duration `yaml:"min_backoff"`
	MaxBackoff           Duration `yaml:"max_backoff"`
	MaxRetryAfter        Duration `yaml:"max_retry_after"`
}

// Procs selects the processes that get per-process series. A process is
// selected when any rule matches.
type Procs struct {
	Comm    []string `yaml:"comm"`    // regular expressions on /proc/PID/comm (anchored)
	PIDs    []int    `yaml:"pids"`    // process ids
	Cgroups []string `yaml:"cgroups"` // cgroup v2 path prefixes ("/kubepods.slice/...")
	// RescanInterval is how often /proc is walked for new processes.
	RescanInterval Duration `yaml:"rescan_interval"`

	commRE []*regexp.Regexp
}

// CommRegexps returns the compiled comm patterns.
func (p Procs) CommRegexps() []*regexp.Regexp { return p.commRE }

// Probe switches one eBPF program.
type Probe struct {
	Enabled *bool `yaml:"enabled"`
}

// On reports whether the probe is enabled (default true).
func (p Probe) On() bool { return p.Enabled == nil || *p.Enabled }

// EBPF configures the kernel probes.
type EBPF struct {
	Enabled  *bool    `yaml:"enabled"`
	Interval Duration `yaml:"interval"`
	RunQueue struct {
		Probe `yaml:",inline"`
		// Cgroups emits per-cgroup run-queue series (default true).
		Cgroups *bool `yaml:"cgroups"`
	} `yaml:"runqueue"`
	BlockIO   Probe `yaml:"blockio"`
	PageFault Probe `yaml:"pagefault"`
	Syscalls  Probe `yaml:"syscalls"`
	CUDA      struct {
		Probe   `yaml:",inline"`
		Symbols []string `yaml:"symbols"`
	} `yaml:"cuda"`
	GIL Probe `yaml:"gil"`
}

// On reports whether eBPF collection is enabled (default true).
func (e EBPF) On() bool { return e.Enabled == nil || *e.Enabled }

// PerCgroup reports whether per-cgroup run-queue series are emitted.
func (e EBPF) PerCgroup() bool { return e.RunQueue.Cgroups == nil || *e.RunQueue.Cgroups }

// GPU configures the GPU collector.
type GPU struct {
	Enabled *bool `yaml:"enabled"`
	// Backend is "nvml" (the only one so far).
	Backend string `yaml:"backend"`
	// LibraryPath overrides where libnvidia-ml is loaded from.
	LibraryPath     string   `yaml:"library_path"`
	SampleInterval  Duration `yaml:"sample_interval"`
	ProcessInterval Duration `yaml:"process_interval"`
	// Interval is how often buffered samples are handed to the queue.
	Interval Duration `yaml:"interval"`
}

// On reports whether the GPU collector is enabled (default true).
func (g GPU) On() bool { return g.Enabled == nil || *g.Enabled }

// Scrape configures scraping of Prometheus endpoints.
type Scrape struct {
	Interval Duration `yaml:"interval"`
	Timeout  Duration `yaml:"timeout"`
	Targets  []Target `yaml:"targets"`
}

// Target is one endpoint to scrape.
type Target struct {
	Job      string            `yaml:"job"`
	URL      string            `yaml:"url"`
	Interval Duration          `yaml:"interval"`
	Timeout  Duration          `yaml:"timeout"`
	Labels   map[string]string `yaml:"labels"`
	// HonorLabels keeps the target's own job/instance labels on conflict
	// instead of renaming them to exported_*.
	HonorLabels bool `yaml:"honor_labels"`
}

// Evidence configures evidence pushes (CUDA call timelines, stacks of
// slow events).
type Evidence struct {
	Enabled  *bool    `yaml:"enabled"`
	URL      string   `yaml:"url"`
	Interval Duration `yaml:"interval"`
	// TopN is how many slowest calls per process, and slowest stacks per
	// probe, are kept each interval.
	TopN int `yaml:"top_n"`
	// MaxProcesses bounds the processes per interval.
	MaxProcesses int `yaml:"max_processes"`
	// StackMinLatency is the shortest off-CPU time, run-queue delay or
	// system call of a selected process whose stacks are captured (the
	// runqueue and syscalls probes); 0 captures none.
	StackMinLatency Duration `yaml:"stack_min_latency"`
}

// On reports whether evidence is pushed (default true).
func (e Evidence) On() bool { return e.Enabled == nil || *e.Enabled }

// Default returns the configuration used for absent keys.
func Default() Config {
	return Config{
		Listen: "127.0.0.1:9491",
		Server: Server{URL: "http://127.0.0.1:9490", Timeout: Duration(30 * time.Second), HTTPClientConfig: promconfig.DefaultHTTPClientConfig},
		Queue: Queue{
			Dir: "/var/lib/tailroot-agent/queue", MaxBytes: 1 << 30, SegmentBytes: 16 << 20,
			Fsync: "always", FsyncInterval: Duration(time.Second),
			FlushInterval: Duration(time.Second), MaxSamplesPerRequest: 50000,
			MinBackoff: Duration(250 * time.Millisecond), MaxBackoff: Duration(30 * time.Second),
			MaxRetryAfter: Duration(5 * time.Minute),
		},
		Procs:    Procs{RescanInterval: Duration(10 * time.Second)},
		EBPF:     EBPF{Interval: Duration(10 * time.Second)},
		GPU:      GPU{Backend: "nvml", SampleInterval: Duration(100 * time.Millisecond), ProcessInterval: Duration(time.Second), Interval: Duration(time.Second)},
		Scrape:   Scrape{Interval: Duration(15 * time.Second), Timeout: Duration(10 * time.Second)},
		Evidence: Evidence{Interval: Duration(10 * time.Second), TopN: 32, MaxProcesses: 64, StackMinLatency: Duration(5 * time.Millisecond)},
	}
}

// Parse reads YAML over the defaults and validates the result.
func Parse(b []byte) (Config, error) {
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Load reads and parses a file.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	c.Server.HTTPClientConfig.SetDirectory(filepath.Dir(path))
	return c, nil
}

// Validate fills derived defaults and checks every field.
func (c *Config) Validate() error {
	if c.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("config: node is empty and the host name is unknown: %w", err)
		}
		c.Node = h
	}
	for k := range c.ExternalLabels {
		if !model.LegacyValidation.IsValidLabelName(k) || strings.HasPrefix(k, "__") {
			return fmt.Errorf("config: external_labels: invalid label name %q", k)
		}
	}
	if err := checkURL("server.url", c.Server.URL); err != nil {
		return err
	}
	if err := c.Server.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("config: server: %w", err)
	}
	if c.Server.Username != "" && c.Server.HTTPClientConfig.BasicAuth != nil {
		return errors.New("config: server: username and basic_auth are both set; use one")
	}
	q := &c.Queue
	if q.Dir == "" {
		return errors.New("config: queue.dir is empty")
	}
	if q.MaxBytes < 2*q.SegmentBytes {
		return fmt.Errorf("config: queue.max_bytes %d must be at least twice queue.segment_bytes %d", q.MaxBytes, q.SegmentBytes)
	}
	switch q.Fsync {
	case "always", "interval", "never":
	default:
		return fmt.Errorf("config: queue.fsync %q: want always, interval or never", q.Fsync)
	}
	if q.MaxSamplesPerRequest <= 0 {
		return fmt.Errorf("config: queue.max_samples_per_request %d must be positive", q.MaxSamplesPerRequest)
	}
	for name, d := range map[string]Duration{
		"queue.flush_interval": q.FlushInterval, "queue.min_backoff": q.MinBackoff, "queue.max_backoff": q.MaxBackoff,
		"ebpf.interval": c.EBPF.Interval, "gpu.sample_interval": c.GPU.SampleInterval, "gpu.interval": c.GPU.Interval,
		"gpu.process_interval": c.GPU.ProcessInterval, "scrape.interval": c.Scrape.Interval,
		"scrape.timeout": c.Scrape.Timeout, "processes.rescan_interval": c.Procs.RescanInterval,
		"evidence.interval": c.Evidence.Interval,
	} {
		if d <= 0 {
			return fmt.Errorf("config: %s must be positive", name)
		}
	}
	if q.MaxBackoff < q.MinBackoff {
		return fmt.Errorf("config: queue.max_backoff %v is below queue.min_backoff %v", q.MaxBackoff.D(), q.MinBackoff.D())
	}
	c.Procs.commRE = c.Procs.commRE[:0]
	for _, s := range c.Procs.Comm {
		re, err := regexp.Compile("^(?:" + s + ")$")
		if err != nil {
			return fmt.Errorf("config: processes.comm %q: %w", s, err)
		}
		c.Procs.commRE = append(c.Procs.commRE, re)
	}
	for _, p := range c.Procs.PIDs {
		if p <= 0 {
			return fmt.Errorf("config: processes.pids: %d is not a process id", p)
		}
	}
	for _, g := range c.Procs.Cgroups {
		if !strings.HasPrefix(g, "/") {
			return fmt.Errorf("config: processes.cgroups %q: want a path starting with /", g)
		}
	}
	if c.GPU.Backend != "nvml" {
		return fmt.Errorf("config: gpu.backend %q: only nvml is available", c.GPU.Backend)
	}
	if c.Evidence.StackMinLatency < 0 {
		return fmt.Errorf("config: evidence.stack_min_latency %v is negative", c.Evidence.StackMinLatency.D())
	}
	if c.Evidence.TopN <= 0 || c.Evidence.MaxProcesses <= 0 {
		return fmt.Errorf("config: evidence.top_n %d and evidence.max_processes %d must be positive", c.Evidence.TopN, c.Evidence.MaxProcesses)
	}
	if c.Evidence.URL == "" {
		c.Evidence.URL = strings.TrimSuffix(c.Server.URL, "/") + "/api/v1/evidence"
	} else if err := checkURL("evidence.url", c.Evidence.URL); err != nil {
		return err
	}
	jobs := map[string]bool{}
	for i := range c.Scrape.Targets {
		t := &c.Scrape.Targets[i]
		if t.Job == "" {
			return fmt.Errorf("config: scrape.targets[%d].job is empty", i)
		}
		if err := checkURL(fmt.Sprintf("scrape.targets[%d].url", i), t.URL); err != nil {
			return err
		}
		key := t.Job + " " + t.URL
		if jobs[key] {
			return fmt.Errorf("config: scrape.targets[%d]: job %q with url %q is listed twice", i, t.Job, t.URL)
		}
		jobs[key] = true
		if t.Interval == 0 {
			t.Interval = c.Scrape.Interval
		}
		if t.Timeout == 0 {
			t.Timeout = min(c.Scrape.Timeout, t.Interval)
		}
		if t.Timeout > t.Interval {
			return fmt.Errorf("config: scrape.targets[%d].timeout %v is longer than its interval %v", i, t.Timeout.D(), t.Interval.D())
		}
		for k := range t.Labels {
			if !model.LegacyValidation.IsValidLabelName(k) || strings.HasPrefix(k, "__") {
				return fmt.Errorf("config: scrape.targets[%d].labels: invalid label name %q", i, k)
			}
		}
	}
	return nil
}

func checkURL(key, s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("config: %s %q: %w", key, s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("config: %s %q: want an http(s)://host[:port] URL", key, s)
	}
	return nil
}

// Effective returns a copy with every on/off switch that was left unset
// filled with the value in force, so that --print-config shows what the
// agent will do (true or false) rather than null.
func (c Config) Effective() Config {
	set := func(p **bool, v bool) {
		if *p == nil {
			*p = &v
		}
	}
	set(&c.EBPF.Enabled, c.EBPF.On())
	set(&c.EBPF.RunQueue.Enabled, c.EBPF.RunQueue.On())
	set(&c.EBPF.RunQueue.Cgroups, c.EBPF.PerCgroup())
	set(&c.EBPF.BlockIO.Enabled, c.EBPF.BlockIO.On())
	set(&c.EBPF.PageFault.Enabled, c.EBPF.PageFault.On())
	set(&c.EBPF.Syscalls.Enabled, c.EBPF.Syscalls.On())
	set(&c.EBPF.CUDA.Enabled, c.EBPF.CUDA.On())
	set(&c.EBPF.GIL.Enabled, c.EBPF.GIL.On())
	set(&c.GPU.Enabled, c.GPU.On())
	set(&c.Evidence.Enabled, c.Evidence.On())
	return c
}

// HTTPClient returns the client the agent pushes with, built from
// HTTPClientConfig by Prometheus' own constructor, so TLS (a private CA,
// client certificates, server name, insecure_skip_verify), bearer tokens
// and proxies behave as in Prometheus' remote_write.
func (s Server) HTTPClient() (*http.Client, error) {
	c, err := promconfig.NewClientFromConfig(s.HTTPClientConfig, "tailroot-agent")
	if err != nil {
		return nil, fmt.Errorf("config: server: http client: %w", err)
	}
	return c, nil
}
