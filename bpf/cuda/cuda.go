// Package cuda times CUDA API calls (kernel launches, graph launches,
// synchronisation, copies) with uprobes and uretprobes on libcudart and
// libcuda. Each completed call becomes an [Event] in a ring buffer and a
// sample in a per-(process, function) histogram.
//
// The probes read arguments by the x86-64 calling convention; Load fails
// on other architectures.
package cuda

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/probe"
)

// Options say what to probe. Zero values take the defaults noted.
type Options struct {
	// Paths are the libraries (or executables with CUDA linked in
	// statically) to probe: libcudart.so.N, libcuda.so.1. FindLibraries
	// finds them for a running process. Required.
	Paths []string
	// Symbols are the functions to probe, by name (see DefaultSymbols).
	// Empty means all of them.
	Symbols []string
	// PID limits the probes to one process; 0 probes every process that
	// maps the libraries.
	PID int
	// RingBufferBytes is the event ring buffer size: a power of two and a
	// multiple of the page size. Zero means 256 KiB (6553 events).
	RingBufferBytes uint32
	// MaxHists bounds the (process, function) histograms. Zero means 4096.
	MaxHists uint32
}

// Attachment is one symbol probed in one file.
type Attachment struct {
	Path   string
	Symbol Symbol
}

// Probe is the loaded program with its uprobes. Close detaches it.
type Probe struct {
	objs     cudaObjects
	links    []link.Link
	reader   *ringbuf.Reader
	rec      ringbuf.Record // reused by Read
	attached []Attachment
	missing  []string

	closeOnce sync.Once
	closeErr  error
}

// Load loads the programs and attaches an entry and a return probe to each
// requested symbol in each path that has it. A symbol found in none of the
// paths is skipped and reported by Missing; finding none at all is an
// error. It needs root.
func Load(opts Options) (*Probe, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("cuda: argument registers are x86-64 only, not %s", runtime.GOARCH)
	}
	syms, err := resolveSymbols(opts.Symbols)
	if err != nil {
		return nil, err
	}
	if len(opts.Paths) == 0 {
		return nil, errors.New("cuda: Options.Paths is empty")
	}
	spec, err := loadCuda()
	if err != nil {
		return nil, fmt.Errorf("load cuda spec: %w", err)
	}
	if err := probe.SetMaxEntries(spec, "events", opts.RingBufferBytes); err != nil {
		return nil, err
	}
	if err := probe.SetMaxEntries(spec, "hists", opts.MaxHists); err != nil {
		return nil, err
	}
	p := &Probe{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load cuda: %w", err)
	}
	if err := p.attach(opts.Paths, syms, opts.PID); err != nil {
		_ = p.Close()
		return nil, err
	}
	if p.reader, err = ringbuf.NewReader(p.objs.Events); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("cuda: open ring buffer: %w", err)
	}
	return p, nil
}

// resolveSymbols maps names to Symbols; empty means all.
func resolveSymbols(names []string) ([]Symbol, error) {
	if len(names) == 0 {
		names = DefaultSymbols()
	}
	out := make([]Symbol, 0, len(names))
	for _, n := range names {
		s, err := ParseSymbol(n)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (p *Probe) attach(paths []string, syms []Symbol, pid int) error {
	found := map[Symbol]bool{}
	for _, path := range paths {
		ex, err := link.OpenExecutable(path)
		if err != nil {
			return fmt.Errorf("cuda: open %s: %w", path, err)
		}
		for _, s := range syms {
			uo := &link.UprobeOptions{Cookie: cookie(s), PID: pid}
			l, err := ex.Uprobe(s.String(), p.objs.CudaEnter, uo)
			if errors.Is(err, link.ErrNoSymbol) {
				continue
			}
			if err != nil {
				return fmt.Errorf("cuda: uprobe %s in %s: %w", s, path, err)
			}
			p.links = append(p.links, l)
			if l, err = ex.Uretprobe(s.String(), p.objs.CudaExit, uo); err != nil {
				return fmt.Errorf("cuda: uretprobe %s in %s: %w", s, path, err)
			}
			p.links = append(p.links, l)
			p.attached = append(p.attached, Attachment{Path: path, Symbol: s})
			found[s] = true
		}
	}
	for _, s := range syms {
		if !found[s] {
			p.missing = append(p.missing, s.String())
		}
	}
	if len(p.attached) == 0 {
		return fmt.Errorf("cuda: none of %d symbols found in %s", len(syms), strings.Join(paths, ", "))
	}
	return nil
}

// Attached returns the probed (path, symbol) pairs.
func (p *Probe) Attached() []Attachment { return slices.Clone(p.attached) }

// Missing returns the requested symbols found in none of the paths.
func (p *Probe) Missing() []string { return slices.Clone(p.missing) }

// Read blocks until the next event and decodes it into ev, without
// allocating. One goroutine reads; Read is not safe for concurrent use.
// After Close it returns an error matching os.ErrClosed; past a deadline
// set with SetDeadline, one matching os.ErrDeadlineExceeded.
func (p *Probe) Read(ev *Event) error {
	if err := p.reader.ReadInto(&p.rec); err != nil {
		return fmt.Errorf("cuda: read event: %w", err)
	}
	return ev.UnmarshalBinary(p.rec.RawSample)
}

// SetDeadline makes Read return once t has passed; the zero time waits for
// ever.
func (p *Probe) SetDeadline(t time.Time) { p.reader.SetDeadline(t) }

// HistKey identifies one histogram.
type HistKey struct {
	PID    uint32
	Symbol uint32 // a Symbol
}

// Hists returns call duration histograms per process and function.
func (p *Probe) Hists() (map[HistKey]bpf.Hist, error) {
	return probe.Hists[HistKey](p.objs.Hists)
}

// Dropped returns how many events were lost to a full ring buffer (the
// histograms still counted them).
func (p *Probe) Dropped() (uint64, error) {
	var n uint64
	if err := p.objs.Dropped.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("cuda: read drop count: %w", err)
	}
	return n, nil
}

// Close detaches the probes, unblocks Read and frees the maps. It may be
// called while another goroutine is blocked in Read, and more than once.
func (p *Probe) Close() error {
	p.closeOnce.Do(func() {
		closers := []io.Closer{&p.objs}
		if p.reader != nil {
			closers = append([]io.Closer{p.reader}, closers...)
		}
		if err := probe.CloseAll(p.links, closers...); err != nil {
			p.closeErr = fmt.Errorf("close cuda: %w", err)
		}
	})
	return p.closeErr
}
