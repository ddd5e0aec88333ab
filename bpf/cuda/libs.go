package cuda

import (
	"github.com/tailroot/tailroot/bpf"
)

// FindLibraries returns the CUDA runtime and driver libraries (libcudart*,
// libcuda.so*) mapped into process pid, as host paths through
// /proc/PID/root so libraries inside containers can be probed. A process
// that has not loaded CUDA yet (frameworks dlopen it lazily) has none.
func FindLibraries(pid int) ([]string, error) {
	paths, err := bpf.MappedFiles(pid, IsCUDALibrary)
	if err != nil {
		return nil, err
	}
	for i, p := range paths {
		paths[i] = bpf.ProcRootPath(pid, p)
	}
	return paths, nil
}

// IsCUDALibrary reports whether a path names libcudart or libcuda
// (libcudart.so.12, libcudart.so.12.4.127, libcuda.so.1, libcuda.so.550.54.15;
// not libcudnn or libcublas).
func IsCUDALibrary(path string) bool {
	switch bpf.LibraryBase(path) {
	case "libcudart", "libcuda":
		return true
	}
	return false
}
