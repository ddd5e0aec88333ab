package cuda

import "fmt"

// Symbol identifies a probed CUDA API function (the symbol id in events,
// histogram keys and the BPF cookie).
type Symbol uint8

// The probed functions. Runtime API (libcudart) first, then driver API
// (libcuda). The values are part of the BPF cookie; do not reorder.
const (
	CudaLaunchKernel Symbol = iota + 1
	CudaGraphLaunch
	CudaStreamSynchronize
	CudaDeviceSynchronize
	CudaMemcpy
	CudaMemcpyAsync
	CuLaunchKernel
	CuGraphLaunch
	CuStreamSynchronize
)

// symbolSpec says where a function's stream argument is, as an integer
// argument slot of the x86-64 System V calling convention: slots 1..6 are
// rdi, rsi, rdx, rcx, r8, r9; slot n >= 7 is stack argument n-6. A struct
// of up to 16 bytes passed by value takes two slots (dim3: 12 bytes).
type symbolSpec struct {
	name       string
	streamSlot uint8 // 0: the function has no stream argument
}

var symbols = [...]symbolSpec{
	CudaLaunchKernel: {"cudaLaunchKernel", 8},
	// (func 1, gridDim 2-3, blockDim 4-5, args 6, sharedMem 7, stream 8)
	CudaGraphLaunch:       {"cudaGraphLaunch", 2},
	CudaStreamSynchronize: {"cudaStreamSynchronize", 1},
	CudaDeviceSynchronize: {"cudaDeviceSynchronize", 0},
	CudaMemcpy:            {"cudaMemcpy", 0}, // synchronous, legacy default stream
	CudaMemcpyAsync:       {"cudaMemcpyAsync", 5},
	CuLaunchKernel:        {"cuLaunchKernel", 9},
	// (f 1, grid xyz 2-4, block xyz 5-6 and stack 7, sharedMemBytes 8, hStream 9)
	CuGraphLaunch:       {"cuGraphLaunch", 2},
	CuStreamSynchronize: {"cuStreamSynchronize", 1},
}

// String returns the function name ("cudaLaunchKernel").
func (s Symbol) String() string {
	if s == 0 || int(s) >= len(symbols) {
		return fmt.Sprintf("Symbol(%d)", uint8(s))
	}
	return symbols[s].name
}

// HasStream reports whether the function takes a stream argument, so its
// events carry one.
func (s Symbol) HasStream() bool {
	return s != 0 && int(s) < len(symbols) && symbols[s].streamSlot != 0
}

// DefaultSymbols lists every function the probe knows, in Symbol order.
func DefaultSymbols() []string {
	out := make([]string, 0, len(symbols)-1)
	for _, s := range symbols[1:] {
		out = append(out, s.name)
	}
	return out
}

// ParseSymbol returns the Symbol of a function name.
func ParseSymbol(name string) (Symbol, error) {
	for i, s := range symbols {
		if i > 0 && s.name == name {
			return Symbol(i), nil
		}
	}
	return 0, fmt.Errorf("cuda symbol %q: not one of %v", name, DefaultSymbols())
}

// cookie packs the BPF attach cookie of cuda.bpf.c: symbol id in bits
// 0..7, stream argument slot in bits 8..15.
func cookie(s Symbol) uint64 {
	return uint64(s) | uint64(symbols[s].streamSlot)<<8
}
