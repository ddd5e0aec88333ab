package symbolize

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Kallsyms is the kernel's symbol table as /proc/kallsyms lists it.
// Addresses read as zero without CAP_SYSLOG (kptr_restrict); such a table
// resolves nothing.
type Kallsyms struct {
	syms []sym // sorted; size is the distance to the next symbol
}

// ParseKallsyms reads "address type name [module]" lines. Only text
// symbols (types t and T) are kept.
func ParseKallsyms(r io.Reader) (*Kallsyms, error) {
	k := &Kallsyms{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			return nil, fmt.Errorf("kallsyms line %d: want address, type and name: %q", n, sc.Text())
		}
		if f[1] != "t" && f[1] != "T" {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %d: address %q: %w", n, f[0], err)
		}
		if a == 0 {
			continue
		}
		name := f[2]
		if len(f) > 3 {
			name += " " + f[3]
		}
		k.syms = append(k.syms, sym{value: a, name: name})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	sort.Slice(k.syms, func(i, j int) bool { return k.syms[i].value < k.syms[j].value })
	return k, nil
}

// Len returns the number of text symbols with a visible address.
func (k *Kallsyms) Len() int { return len(k.syms) }

// Lookup returns the kernel function containing addr: the symbol with the
// highest address not above it. Addresses before the first symbol resolve
// to nothing.
func (k *Kallsyms) Lookup(addr uint64) Frame {
	fr := Frame{Address: addr, Module: "[kernel]"}
	i := sort.Search(len(k.syms), func(i int) bool { return k.syms[i].value > addr }) - 1
	if i >= 0 {
		fr.Function, fr.Offset = k.syms[i].name, addr-k.syms[i].value
	}
	return fr
}
