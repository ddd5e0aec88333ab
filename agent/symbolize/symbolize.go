// Package symbolize turns user-space instruction addresses of a process
// into function names, for stack evidence.
//
// In: a process's /proc/PID/maps (parsed with bpf.ParseMaps) and the ELF
// files it maps. Out: one Frame per address: the mapped file, the function
// from .symtab (or .dynsym when the file is stripped) and the offset into
// it. Kernel addresses resolve through /proc/kallsyms (Kallsyms).
//
// An address becomes a symbol in three steps:
//
//	runtime address A in mapping [Start, End) with file offset Off
//	  → file offset   F = A − Start + Off
//	  → ELF address   V = F − p.Off + p.Vaddr, for the PT_LOAD p with
//	                  p.Off ≤ F < p.Off + p.Filesz
//	  → symbol        the function with Value ≤ V < Value + Size
//
// which holds for position-independent executables, shared libraries and
// fixed-address executables alike (for the last, V = A).
package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/tailroot/tailroot/bpf"
)

// Frame is one symbolized address.
type Frame struct {
	Address  uint64 // runtime address
	Module   string // mapped file, "[vdso]", "[kernel]", or "" when unmapped
	Function string // "" when no symbol covers the address
	Offset   uint64 // Address − function start
}

func (f Frame) String() string {
	switch {
	case f.Function != "":
		return fmt.Sprintf("%s+%#x (%s)", f.Function, f.Offset, f.Module)
	case f.Module != "":
		return fmt.Sprintf("%#x (%s)", f.Address, f.Module)
	}
	return fmt.Sprintf("%#x", f.Address)
}

type sym struct {
	value, size uint64
	name        string
}

// Table is the function symbols and loadable segments of one ELF file.
type Table struct {
	syms  []sym // sorted by value
	loads []elf.ProgHeader
}

// NewTable reads the function symbols of f from .symtab, falling back to
// (and merging) .dynsym, and its PT_LOAD segments.
func NewTable(f *elf.File) (*Table, error) {
	t := &Table{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			t.loads = append(t.loads, p.ProgHeader)
		}
	}
	seen := map[uint64]bool{}
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		ss, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, fmt.Errorf("read symbols: %w", err)
		}
		for _, s := range ss {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || seen[s.Value] {
				continue
			}
			seen[s.Value] = true
			t.syms = append(t.syms, sym{value: s.Value, size: s.Size, name: s.Name})
		}
	}
	sort.Slice(t.syms, func(i, j int) bool { return t.syms[i].value < t.syms[j].value })
	return t, nil
}

// Len returns the number of function symbols.
func (t *Table) Len() int { return len(t.syms) }

// Lookup returns the function containing ELF virtual address v. A symbol
// of size 0 (hand-written assembly) covers addresses up to the next
// symbol.
func (t *Table) Lookup(v uint64) (name string, off uint64, ok bool) {
	i := sort.Search(len(t.syms), func(i int) bool { return t.syms[i].value > v }) - 1
	if i < 0 {
		return "", 0, false
	}
	s := t.syms[i]
	if s.size > 0 && v >= s.value+s.size {
		return "", 0, false
	}
	return s.name, v - s.value, true
}

// FileOffsetToVaddr maps a file offset to the ELF virtual address of the
// PT_LOAD segment holding it.
func (t *Table) FileOffsetToVaddr(off uint64) (uint64, bool) {
	for _, p := range t.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// Resolve symbolizes a runtime address inside mapping m of a process.
func (t *Table) Resolve(m bpf.Mapping, addr uint64) (name string, off uint64, ok bool) {
	if addr < m.Start || addr >= m.End {
		return "", 0, false
	}
	v, ok := t.FileOffsetToVaddr(addr - m.Start + m.Offset)
	if !ok {
		return "", 0, false
	}
	return t.Lookup(v)
}

type fileKey struct {
	dev, ino uint64
	path     string
}

// Symbolizer symbolizes addresses of live processes, caching one Table
// per ELF file (by device and inode, so a library shared by many processes
// is read once). It is safe for concurrent use.
type Symbolizer struct {
	// ProcRoot is where /proc is mounted; empty means "/proc".
	ProcRoot string
	// MaxFiles bounds the cache; beyond it the cache is emptied. Zero
	// means 256.
	MaxFiles int

	mu     sync.Mutex
	tables map[fileKey]*Table
	failed map[fileKey]error
}

// Symbolize resolves addrs of process pid into dst. Addresses outside any
// file mapping, or in files without symbols, keep an empty Function.
func (s *Symbolizer) Symbolize(pid int, addrs []uint64, dst []Frame) ([]Frame, error) {
	root := s.ProcRoot
	if root == "" {
		root = "/proc"
	}
	f, err := os.Open(fmt.Sprintf("%s/%d/maps", root, pid))
	if err != nil {
		return dst, fmt.Errorf("symbolize pid %d: %w", pid, err)
	}
	maps, err := bpf.ParseMaps(f)
	f.Close()
	if err != nil {
		return dst, fmt.Errorf("symbolize pid %d: %w", pid, err)
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].Start < maps[j].Start })
	for _, a := range addrs {
		fr := Frame{Address: a}
		i := sort.Search(len(maps), func(i int) bool { return maps[i].End > a })
		if i < len(maps) && maps[i].Start <= a {
			m := maps[i]
			fr.Module = strings.TrimSuffix(m.Path, " (deleted)")
			if m.Inode != 0 && strings.HasPrefix(m.Path, "/") {
				if t := s.table(root, pid, m); t != nil {
					fr.Function, fr.Offset, _ = t.Resolve(m, a)
				}
			}
		}
		dst = append(dst, fr)
	}
	return dst, nil
}

// table returns the cached table of the file behind m, opening it through
// /proc/PID/root so files inside containers resolve.
func (s *Symbolizer) table(root string, pid int, m bpf.Mapping) *Table {
	path := fmt.Sprintf("%s/%d/root%s", root, pid, strings.TrimSuffix(m.Path, " (deleted)"))
	st, err := os.Stat(path)
	if err != nil {
		// A deleted file is still reachable through map_files.
		path = fmt.Sprintf("%s/%d/map_files/%x-%x", root, pid, m.Start, m.End)
		if st, err = os.Stat(path); err != nil {
			return nil
		}
	}
	key := statKey(st, m.Path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tables[key]; ok {
		return t
	}
	if _, ok := s.failed[key]; ok {
		return nil
	}
	max := s.MaxFiles
	if max <= 0 {
		max = 256
	}
	if s.tables == nil || len(s.tables) >= max {
		s.tables, s.failed = map[fileKey]*Table{}, map[fileKey]error{}
	}
	ef, err := elf.Open(path)
	if err != nil {
		s.failed[key] = err
		return nil
	}
	defer ef.Close()
	t, err := NewTable(ef)
	if err != nil {
		s.failed[key] = err
		return nil
	}
	s.tables[key] = t
	return t
}
