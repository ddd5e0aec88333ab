// Package gil measures how long CPython threads wait for the global
// interpreter lock, per process, with a uprobe and a uretprobe on the
// interpreter's GIL-acquiring function.
//
// Which function is probed decides what is measured (Probe.Exact):
//
//   - take_gil, CPython's internal acquire (static in Python/ceval_gil.c, so
//     it is only in the ELF .symtab of an unstripped interpreter; GCC may
//     rename it take_gil.isra.0 and the like). Every acquisition goes
//     through it: the eval loop's forced switches between CPU-bound
//     threads as well as reacquiring after blocking calls. Exact.
//   - otherwise PyEval_RestoreThread and PyEval_AcquireThread, exported
//     and always present. They wrap take_gil for threads coming back from
//     blocking calls (I/O, sleep, C extensions releasing the GIL) and for
//     foreign threads, but not the eval loop's switches, so contention
//     between purely CPU-bound threads is not seen. The time includes a
//     few instructions besides the wait.
//
// Distribution interpreters are usually stripped (Debian's python3.11 has
// no .symtab) and get the fallback; pyenv and source builds keep take_gil.
package gil

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf/link"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/probe"
)

// ErrNoGILSymbol is returned when a file has neither take_gil nor the
// exported fallbacks: it is not a CPython interpreter or libpython (or is
// a free-threaded build, which has no GIL).
var ErrNoGILSymbol = errors.New("no GIL function (take_gil, PyEval_RestoreThread, PyEval_AcquireThread)")

// Options say what to probe. Zero values take the defaults noted.
type Options struct {
	// Path is libpython3.X.so, or the python executable when libpython is
	// linked in statically. FindPython finds it for a process. Required.
	Path string
	// PID limits the probes to one process; 0 probes every process that
	// maps Path.
	PID int
	// MaxPIDs bounds the per-process histograms. Zero means 4096.
	MaxPIDs uint32
}

// Probe is the loaded program with its uprobes. Close detaches it.
type Probe struct {
	objs    gilObjects
	links   []link.Link
	symbols []string
	exact   bool
}

// Load finds the GIL function in opts.Path (see the package comment),
// loads the programs and attaches them. It needs root.
func Load(opts Options) (*Probe, error) {
	if opts.Path == "" {
		return nil, errors.New("gil: Options.Path is empty")
	}
	syms, exact, err := GILSymbols(opts.Path)
	if err != nil {
		return nil, err
	}
	spec, err := loadGil()
	if err != nil {
		return nil, fmt.Errorf("load gil spec: %w", err)
	}
	if err := probe.SetMaxEntries(spec, "waits", opts.MaxPIDs); err != nil {
		return nil, err
	}
	p := &Probe{symbols: syms, exact: exact}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load gil: %w", err)
	}
	ex, err := link.OpenExecutable(opts.Path)
	if err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("gil: open %s: %w", opts.Path, err)
	}
	uo := &link.UprobeOptions{PID: opts.PID}
	for _, s := range syms {
		l, err := ex.Uprobe(s, p.objs.GilEnter, uo)
		if err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("gil: uprobe %s in %s: %w", s, opts.Path, err)
		}
		p.links = append(p.links, l)
		if l, err = ex.Uretprobe(s, p.objs.GilExit, uo); err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("gil: uretprobe %s in %s: %w", s, opts.Path, err)
		}
		p.links = append(p.links, l)
	}
	return p, nil
}

// Symbols returns the probed function names.
func (p *Probe) Symbols() []string { return slices.Clone(p.symbols) }

// Exact reports whether take_gil itself is probed (every GIL acquisition
// is seen) rather than the exported fallbacks.
func (p *Probe) Exact() bool { return p.exact }

// Waits returns GIL wait histograms per process.
func (p *Probe) Waits() (map[uint32]bpf.Hist, error) {
	return probe.Hists[uint32](p.objs.Waits)
}

// Close detaches the probes and frees the maps.
func (p *Probe) Close() error {
	err := probe.CloseAll(p.links, &p.objs)
	p.links = nil
	if err != nil {
		return fmt.Errorf("close gil: %w", err)
	}
	return nil
}

// GILSymbols reads the ELF symbol tables (.symtab and .dynsym) of path and
// returns the functions to probe, and whether that is take_gil itself.
func GILSymbols(path string) (syms []string, exact bool, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("gil: open %s: %w", path, err)
	}
	defer f.Close()
	var names []string
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		ss, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, false, fmt.Errorf("gil: symbols of %s: %w", path, err)
		}
		for _, s := range ss {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
				names = append(names, s.Name)
			}
		}
	}
	syms, exact = ChooseGILSymbols(names)
	if len(syms) == 0 {
		return nil, false, fmt.Errorf("gil: %s: %w", path, ErrNoGILSymbol)
	}
	return syms, exact, nil
}

// ChooseGILSymbols picks the functions to probe from the defined function
// names of an ELF file: take_gil (or a compiler clone, take_gil.isra.0)
// when present, else whichever of PyEval_RestoreThread and
// PyEval_AcquireThread exist.
func ChooseGILSymbols(names []string) (syms []string, exact bool) {
	var clone string
	for _, n := range names {
		if n == "take_gil" {
			return []string{n}, true
		}
		if strings.HasPrefix(n, "take_gil.") && clone == "" {
			clone = n
		}
	}
	if clone != "" {
		return []string{clone}, true
	}
	for _, want := range []string{"PyEval_RestoreThread", "PyEval_AcquireThread"} {
		if slices.Contains(names, want) && !slices.Contains(syms, want) {
			syms = append(syms, want)
		}
	}
	return syms, false
}

// FindPython returns the file holding process pid's interpreter, as a
// host path through /proc/PID/root: its libpython*.so when one is mapped,
// else its executable.
func FindPython(pid int) (string, error) {
	libs, err := bpf.MappedFiles(pid, func(p string) bool {
		return strings.HasPrefix(bpf.LibraryBase(p), "libpython")
	})
	if err != nil {
		return "", err
	}
	if len(libs) > 0 {
		return bpf.ProcRootPath(pid, libs[0]), nil
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "", fmt.Errorf("python of pid %d: %w", pid, err)
	}
	return bpf.ProcRootPath(pid, exe), nil
}
