// Command tailroot-agent runs on each inference node: eBPF probes for
// kernel-level latency, CUDA and GIL uprobes, GPU telemetry through NVML,
// scrapes of the inference servers' /metrics, and a disk-backed queue that
// pushes everything to tailroot over remote write 2.0.
//
//	tailroot-agent --config /etc/tailroot-agent.yaml
//	tailroot-agent --server.url http://tailroot:9490 --queue.dir /var/lib/tailroot-agent/queue
//
// Flags override the configuration file; agent/README.md documents both.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tailroot/tailroot/agent"
	"github.com/tailroot/tailroot/agent/config"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tailroot-agent:", err)
		os.Exit(1)
	}
}

type flags struct {
	config, serverURL, queueDir, listen, node, logLevel string
	gpu, ebpf                                           string
	scrape                                              stringList
	printConfig                                         bool
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("tailroot-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "YAML configuration file (agent/README.md); empty uses the defaults")
	fs.StringVar(&f.serverURL, "server.url", "", "tailroot base URL, e.g. http://tailroot:9490 (overrides server.url)")
	fs.StringVar(&f.queueDir, "queue.dir", "", "directory of the disk queue (overrides queue.dir)")
	fs.StringVar(&f.listen, "web.listen-address", "", "address for the agent's own /metrics; \"off\" disables (overrides listen)")
	fs.StringVar(&f.node, "node", "", "node name, the node label on every series (overrides node; default the host name)")
	fs.StringVar(&f.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.gpu, "gpu", "", "true or false: GPU telemetry (overrides gpu.enabled)")
	fs.StringVar(&f.ebpf, "ebpf", "", "true or false: eBPF probes (overrides ebpf.enabled)")
	fs.Var(&f.scrape, "scrape", "JOB=URL of an endpoint to scrape at scrape.interval; repeatable, added to scrape.targets")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the effective configuration and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return f, nil
}

// load builds the configuration: file (or defaults), then flags.
func load(f *flags) (config.Config, error) {
	var b []byte
	if f.config != "" {
		var err error
		if b, err = os.ReadFile(f.config); err != nil {
			return config.Config{}, fmt.Errorf("config: %w", err)
		}
	}
	c, err := config.Parse(b)
	if err != nil {
		return config.Config{}, err
	}
	if f.serverURL != "" {
		c.Server.URL = f.serverURL
		c.Evidence.URL = "" // derive again from the new server
	}
	if f.queueDir != "" {
		c.Queue.Dir = f.queueDir
	}
	switch f.listen {
	case "":
	case "off":
		c.Listen = ""
	default:
		c.Listen = f.listen
	}
	if f.node != "" {
		c.Node = f.node
	}
	for name, v := range map[string]struct {
		s   string
		dst **bool
	}{"gpu": {f.gpu, &c.GPU.Enabled}, "ebpf": {f.ebpf, &c.EBPF.Enabled}} {
		switch v.s {
		case "":
		case "true", "false":
			on := v.s == "true"
			*v.dst = &on
		default:
			return config.Config{}, fmt.Errorf("flag -%s %q: want true or false", name, v.s)
		}
	}
	for _, s := range f.scrape {
		job, u, ok := strings.Cut(s, "=")
		if !ok || job == "" {
			return config.Config{}, fmt.Errorf("flag -scrape %q: want JOB=URL", s)
		}
		c.Scrape.Targets = append(c.Scrape.Targets, config.Target{Job: job, URL: u})
	}
	if err := c.Validate(); err != nil {
		return config.Config{}, err
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("flag -log.level %q: %w", f.logLevel, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := load(f)
	if err != nil {
		return err
	}
	if f.printConfig {
		return yaml.NewEncoder(stdout).Encode(cfg.Effective())
	}

	a, err := agent.New(agent.Options{Config: cfg, Logger: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			a.Close()
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
		srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server failed", "err", err)
			}
		}()
		defer srv.Close()
		log.Info("serving agent metrics", "addr", ln.Addr().String())
	}
	log.Info("tailroot-agent started", "node", cfg.Node, "server", cfg.Server.URL, "queue", cfg.Queue.Dir)
	err = a.Run(ctx)
	log.Info("tailroot-agent stopped")
	return err
}
