// Package gpu samples GPU telemetry and emits it under dcgm-exporter's
// metric names and labels, so dashboards and alerts written for
// dcgm-exporter work unchanged against tailroot.
//
// In: a Backend (NVML through github.com/NVIDIA/go-nvml here; a DCGM
// backend can implement the same interface). Out: collect.Series of
// samples taken every SampleInterval (100 ms by default), buffered between
// collections. Without libnvidia-ml (a node without a GPU, a container
// without the driver mounted) Open returns ErrUnavailable and the agent
// runs on without GPU series.
package gpu

import (
	"errors"
	"time"
)

// ErrUnavailable is returned when no GPU backend can be opened (library
// missing, driver not loaded, no device).
var ErrUnavailable = errors.New("GPU telemetry unavailable")

// Device identifies one GPU.
type Device struct {
	Index    int    // NVML index: the "gpu" label
	UUID     string // "GPU-…"
	PCIBusID string // "00000000:3B:00.0"
	Minor    int    // /dev/nvidiaN: the "device" label is "nvidia<Minor>"
	Model    string // "NVIDIA H200": the "modelName" label
}

// Value is one field read from a device.
type Value struct {
	Field Field
	V     float64
}

// ProcessUsage is one process's use of a device.
type ProcessUsage struct {
	PID uint32
	// SMUtil and MemUtil are percentages over the backend's last sampling
	// window; negative when the backend reported none for the process.
	SMUtil, MemUtil float64
	// MemoryBytes is device memory used by the process; negative when
	// unknown.
	MemoryBytes float64
}

// XIDEvent is a critical device error reported by the driver.
type XIDEvent struct {
	Device int // index into Backend.Devices
	XID    uint64
}

// Backend reads GPU telemetry. Methods other than WaitEvent are called
// from one goroutine; WaitEvent from another.
type Backend interface {
	// Name names the backend in logs ("nvml").
	Name() string
	// Devices lists the GPUs, in index order.
	Devices() []Device
	// Sample appends the current field values of device i. Fields the
	// device does not support are left out, not reported as errors.
	Sample(i int, dst []Value) ([]Value, error)
	// Processes appends per-process usage of device i.
	Processes(i int, dst []ProcessUsage) ([]ProcessUsage, error)
	// WaitEvent waits up to timeout for an XID event; ok is false on
	// timeout. A backend without events returns ok false after timeout.
	WaitEvent(timeout time.Duration) (ev XIDEvent, ok bool, err error)
	// Close releases the backend.
	Close() error
}
