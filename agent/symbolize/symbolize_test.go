package symbolize

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSymbolizeGoProgram symbolizes functions of a Go program (built here,
// since go test strips its own binary's symbol table) and checks names and
// entries against the Go runtime's pclntab as the program itself reports
// them: an independent source from the ELF .symtab this package reads.
func TestSymbolizeGoProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	exe := filepath.Join(t.TempDir(), "goprog")
	if out, err := exec.Command("go", "build", "-o", exe, "./testdata/goprog").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(exe)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	type want struct {
		name  string
		entry uint64
	}
	var addrs []uint64
	var wants []want
	sc := bufio.NewScanner(stdout)
	for range 4 {
		if !sc.Scan() {
			t.Fatal("goprog printed less than 4 lines")
		}
		f := strings.Fields(sc.Text())
		entry, err1 := strconv.ParseUint(f[1], 16, 64)
		inner, err2 := strconv.ParseUint(f[2], 16, 64)
		if len(f) != 3 || err1 != nil || err2 != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		addrs = append(addrs, entry, inner)
		wants = append(wants, want{f[0], entry}, want{f[0], entry})
	}
	var s Symbolizer
	frames, err := s.Symbolize(cmd.Process.Pid, addrs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames {
		w := wants[i]
		if fr.Function != w.name || fr.Offset != addrs[i]-w.entry || filepath.Base(fr.Module) != "goprog" {
			t.Errorf("%#x: %v, want %s+%#x (goprog)", addrs[i], fr, w.name, addrs[i]-w.entry)
		}
	}
	if wants[4].name != "main.(*worker).step" {
		t.Errorf("method name %q", wants[4].name)
	}
}

// buildVictim compiles testdata/victim.c as a PIE linked against a shared
// library, optionally stripped to .dynsym only.
func buildVictim(t *testing.T, strip bool) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler:", err)
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	lib := filepath.Join(dir, "libvictim.so")
	exe := filepath.Join(dir, "victim")
	run("cc", "-O1", "-fPIC", "-shared", "-o", lib, "testdata/victimlib.c")
	run("cc", "-O1", "-fPIE", "-pie", "-rdynamic", "-o", exe, "testdata/victim.c", "-L"+dir, "-lvictim", "-Wl,-rpath,"+dir)
	if strip {
		run("strip", "--strip-all", exe, lib)
	}
	return exe
}

func TestSymbolizePIEAndSharedLibrary(t *testing.T) {
	for _, strip := range []bool{false, true} {
		t.Run("strip="+strconv.FormatBool(strip), func(t *testing.T) {
			exe := buildVictim(t, strip)
			cmd := exec.Command(exe)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); cmd.Wait() }()
			// The victim's own printf of &func is the reference address.
			want := map[uint64]string{}
			var addrs []uint64
			sc := bufio.NewScanner(stdout)
			for range 3 {
				if !sc.Scan() {
					t.Fatal("victim printed less than 3 lines")
				}
				name, hex, _ := strings.Cut(sc.Text(), " ")
				a, err := strconv.ParseUint(hex, 16, 64)
				if err != nil {
					t.Fatal(err)
				}
				want[a] = name
				want[a+2] = name
				addrs = append(addrs, a, a+2)
			}
			var s Symbolizer
			frames, err := s.Symbolize(cmd.Process.Pid, addrs, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, fr := range frames {
				if fr.Function != want[addrs[i]] {
					t.Errorf("%#x: %v, want %s", addrs[i], fr, want[addrs[i]])
				}
				if wantOff := uint64(i % 2 * 2); fr.Offset != wantOff {
					t.Errorf("%#x: offset %d, want %d", addrs[i], fr.Offset, wantOff)
				}
				wantMod := "victim"
				if fr.Function == "lib_func" {
					wantMod = "libvictim.so"
				}
				if filepath.Base(fr.Module) != wantMod {
					t.Errorf("%#x: module %s, want %s", addrs[i], fr.Module, wantMod)
				}
			}
			// The library is shared: a second process maps the same inode and
			// must reuse the cached table.
			if len(s.tables) != 2 {
				t.Errorf("%d cached tables, want 2 (executable and library)", len(s.tables))
			}
		})
	}
}

func TestUnmappedAddress(t *testing.T) {
	var s Symbolizer
	frames, err := s.Symbolize(os.Getpid(), []uint64{8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if frames[0].Module != "" || frames[0].Function != "" {
		t.Fatalf("address 8 resolved to %v", frames[0])
	}
	if _, err := s.Symbolize(1<<30, []uint64{1}, nil); err == nil {
		t.Fatal("nonexistent pid accepted")
	}
}

func TestTableLookupHandMade(t *testing.T) {
	tb := &Table{
		syms: []sym{{0x1000, 0x20, "a"}, {0x1020, 0, "asm"}, {0x1100, 0x10, "b"}},
		loads: []elf.ProgHeader{
			{Type: elf.PT_LOAD, Off: 0, Vaddr: 0, Filesz: 0x800},
			{Type: elf.PT_LOAD, Off: 0x1000, Vaddr: 0x401000, Filesz: 0x200},
		},
	}
	for _, c := range []struct {
		v    uint64
		name string
		off  uint64
		ok   bool
	}{
		{0xfff, "", 0, false},
		{0x1000, "a", 0, true},
		{0x101f, "a", 0x1f, true},
		{0x1020, "asm", 0, true},
		{0x10ff, "asm", 0xdf, true}, // size 0 reaches to the next symbol
		{0x110f, "b", 0xf, true},
		{0x1110, "", 0, false}, // past b's size
	} {
		name, off, ok := tb.Lookup(c.v)
		if name != c.name || off != c.off || ok != c.ok {
			t.Errorf("Lookup(%#x) = %q %#x %v, want %q %#x %v", c.v, name, off, ok, c.name, c.off, c.ok)
		}
	}
	// File offset 0x1010 lies in the second segment: vaddr 0x401010.
	if v, ok := tb.FileOffsetToVaddr(0x1010); !ok || v != 0x401010 {
		t.Errorf("FileOffsetToVaddr(0x1010) = %#x %v", v, ok)
	}
	if _, ok := tb.FileOffsetToVaddr(0x900); ok {
		t.Error("offset between segments mapped")
	}
}

const kallsymsSample = `0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff81001000 t do_one_initcall
ffffffff81002000 D some_data
ffffffff81003000 T ext4_sync_file	[ext4]
`

func TestKallsyms(t *testing.T) {
	k, err := ParseKallsyms(strings.NewReader(kallsymsSample))
	if err != nil {
		t.Fatal(err)
	}
	if k.Len() != 3 {
		t.Fatalf("%d text symbols, want 3", k.Len())
	}
	for _, c := range []struct {
		a    uint64
		name string
		off  uint64
	}{
		{0xffffffff81000010, "_stext", 0x10},
		{0xffffffff81001fff, "do_one_initcall", 0xfff},
		{0xffffffff81003004, "ext4_sync_file [ext4]", 4},
		{0xffffffff80000000, "", 0},
	} {
		fr := k.Lookup(c.a)
		if fr.Function != c.name || fr.Offset != c.off || fr.Module != "[kernel]" {
			t.Errorf("Lookup(%#x) = %+v, want %s+%#x", c.a, fr, c.name, c.off)
		}
	}
	if _, err := ParseKallsyms(strings.NewReader("zz T x\n")); err == nil {
		t.Error("bad address accepted")
	}
}

func FuzzParseKallsyms(f *testing.F) {
	f.Add([]byte(kallsymsSample))
	f.Add([]byte("1 T\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKallsyms(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, s := range k.syms {
			if fr := k.Lookup(s.value); fr.Offset != 0 {
				t.Fatalf("symbol start %#x resolves at offset %#x", s.value, fr.Offset)
			}
		}
	})
}

// FuzzNewTable feeds arbitrary bytes to the ELF reader and table builder:
// no panics, and every symbol start resolves to offset 0.
func FuzzNewTable(f *testing.F) {
	exe, err := os.Executable()
	if err == nil {
		if b, err := os.ReadFile(exe); err == nil && len(b) > 4096 {
			f.Add(b[:4096])
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			return
		}
		tb, err := NewTable(ef)
		if err != nil {
			return
		}
		for _, s := range tb.syms {
			if _, off, ok := tb.Lookup(s.value); ok && off != 0 && s.size > 0 {
				t.Fatalf("symbol %q at %#x: offset %#x", s.name, s.value, off)
			}
		}
	})
}
