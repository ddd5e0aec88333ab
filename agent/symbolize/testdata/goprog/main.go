// goprog prints the name (from the Go runtime's own pclntab), entry address
// and an address inside a few of its functions, then waits for stdin to
// close so a test can symbolize them through its /proc/PID/maps.
package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
)

//go:noinline
func alpha(x int) int { return x*7 + 3 }

//go:noinline
func beta(x int) int { return alpha(x) * 2 }

type worker struct{ n int }

//go:noinline
func (w *worker) step() int { w.n++; return beta(w.n) }

func main() {
	w := &worker{}
	for _, f := range []any{alpha, beta, (*worker).step, main} {
		pc := reflect.ValueOf(f).Pointer()
		fn := runtime.FuncForPC(pc)
		fmt.Printf("%s %x %x\n", fn.Name(), fn.Entry(), pc+3)
	}
	io.Copy(io.Discard, os.Stdin)
	os.Exit(w.step() & 0)
}
