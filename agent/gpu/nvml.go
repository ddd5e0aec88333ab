package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML is the Backend over NVIDIA's management library.
type NVML struct {
	lib     nvml.Interface
	handles []nvml.Device
	devs    []Device
	events  nvml.EventSet

	// Sampling state, touched by the sampling goroutine only.
	unsupported []map[Field]bool
	nvlinkPrev  [][2]counterPoint
	procSeen    []uint64 // last process-utilization timestamp per device (µs)

	// eventReasons is true when the driver has
	// nvmlDeviceGetCurrentClocksEventReasons (r535+); older drivers only
	// have the ThrottleReasons name it replaced. hasTemp guards the
	// deprecated nvmlDeviceGetTemperature: calling a symbol the loaded
	// library lacks would crash, so both are looked up first.
	eventReasons, hasThrottle, hasTemp bool

	closeOnce sync.Once
}

type counterPoint struct {
	v  uint64 // KiB
	at int64  // µs
}

// OpenNVML loads libnvidia-ml (libraryPath, or the default
// libnvidia-ml.so.1) and opens every device. Any failure is an error
// matching ErrUnavailable that says why.
func OpenNVML(libraryPath string) (*NVML, error) {
	var opts []nvml.LibraryOption
	if libraryPath != "" {
		opts = append(opts, nvml.WithLibraryPath(libraryPath))
	}
	return NewNVML(nvml.New(opts...))
}

// NewNVML opens the devices of an initialised-or-not NVML interface (the
// real library, or go-nvml's mocks in tests).
func NewNVML(lib nvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("%w: libnvidia-ml.so.1 not found (no NVIDIA driver on this node)", ErrUnavailable)
		}
		return nil, fmt.Errorf("%w: nvml init: %s", ErrUnavailable, nvml.ErrorString(ret))
	}
	n := &NVML{lib: lib}
	has := func(sym string) bool { return lib.Extensions().LookupSymbol(sym) == nil }
	n.eventReasons = has("nvmlDeviceGetCurrentClocksEventReasons")
	n.hasThrottle = has("nvmlDeviceGetCurrentClocksThrottleReasons")
	n.hasTemp = has("nvmlDeviceGetTemperature")
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: nvml device count: %s", ErrUnavailable, nvml.ErrorString(ret))
	}
	if count == 0 {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: nvml reports no devices", ErrUnavailable)
	}
	for i := range count {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("%w: nvml device %d: %s", ErrUnavailable, i, nvml.ErrorString(ret))
		}
		d := Device{Index: i, Minor: -1}
		if s, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = s
		}
		if s, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Model = s
		}
		if m, ret := h.GetMinorNumber(); ret == nvml.SUCCESS {
			d.Minor = m
		}
		if p, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			d.PCIBusID = cString(p.BusId[:])
		}
		n.handles = append(n.handles, h)
		n.devs = append(n.devs, d)
		n.unsupported = append(n.unsupported, map[Field]bool{})
	}
	n.nvlinkPrev = make([][2]counterPoint, count)
	n.procSeen = make([]uint64, count)
	if set, ret := lib.EventSetCreate(); ret == nvml.SUCCESS {
		registered := 0
		for _, h := range n.handles {
			if h.RegisterEvents(nvml.EventTypeXidCriticalError, set) == nvml.SUCCESS {
				registered++
			}
		}
		if registered > 0 {
			n.events = set
		} else {
			set.Free()
		}
	}
	return n, nil
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// Name implements Backend.
func (n *NVML) Name() string { return "nvml" }

// Devices implements Backend.
func (n *NVML) Devices() []Device { return n.devs }

// Sample implements Backend. Fields answering NOT_SUPPORTED are skipped
// from then on; other failures are joined into the returned error.
func (n *NVML) Sample(i int, dst []Value) ([]Value, error) {
	h := n.handles[i]
	var errs []error
	add := func(f Field, v float64, ret nvml.Return) {
		if n.unsupported[i][f] {
			return
		}
		switch ret {
		case nvml.SUCCESS:
			dst = append(dst, Value{Field: f, V: v})
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION:
			n.unsupported[i][f] = true
		default:
			errs = append(errs, fmt.Errorf("gpu %d %s: %s", i, f.Name(), nvml.ErrorString(ret)))
		}
	}
	skip := func(fs ...Field) bool {
		for _, f := range fs {
			if !n.unsupported[i][f] {
				return false
			}
		}
		return true
	}
	if !skip(GPUUtil, MemCopyUtil) {
		u, ret := h.GetUtilizationRates()
		add(GPUUtil, float64(u.Gpu), ret)
		add(MemCopyUtil, float64(u.Memory), ret)
	}
	if !skip(SMClock) {
		v, ret := h.GetClockInfo(nvml.CLOCK_SM)
		add(SMClock, float64(v), ret)
	}
	if !skip(MemClock) {
		v, ret := h.GetClockInfo(nvml.CLOCK_MEM)
		add(MemClock, float64(v), ret)
	}
	if !skip(ThrottleReasons) {
		switch {
		case n.eventReasons:
			v, ret := h.GetCurrentClocksEventReasons()
			add(ThrottleReasons, float64(v), ret)
		case n.hasThrottle:
			v, ret := h.GetCurrentClocksThrottleReasons()
			add(ThrottleReasons, float64(v), ret)
		default:
			add(ThrottleReasons, 0, nvml.ERROR_NOT_SUPPORTED)
		}
	}
	if !skip(PowerUsage) {
		v, ret := h.GetPowerUsage() // mW
		add(PowerUsage, float64(v)/1000, ret)
	}
	if !skip(TotalEnergy) {
		v, ret := h.GetTotalEnergyConsumption() // mJ
		add(TotalEnergy, float64(v), ret)
	}
	if !skip(GPUTemp) {
		if n.hasTemp {
			v, ret := h.GetTemperature(nvml.TEMPERATURE_GPU)
			add(GPUTemp, float64(v), ret)
		} else {
			add(GPUTemp, 0, nvml.ERROR_NOT_SUPPORTED)
		}
	}
	if !skip(FBUsed, FBFree) {
		m, ret := h.GetMemoryInfo() // bytes
		add(FBUsed, float64(m.Used)/(1<<20), ret)
		add(FBFree, float64(m.Free)/(1<<20), ret)
	}
	if !skip(PCIeTx) {
		v, ret := h.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES)
		add(PCIeTx, float64(v), ret)
	}
	if !skip(PCIeRx) {
		v, ret := h.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES)
		add(PCIeRx, float64(v), ret)
	}
	if !skip(NVLinkTx, NVLinkRx) {
		n.nvlink(i, h, add)
	}
	return dst, errors.Join(errs...)
}

// nvlink reads the aggregate NVLink data counters (KiB, scope UINT_MAX =
// all links) and reports their rate since the previous sample.
func (n *NVML) nvlink(i int, h nvml.Device, add func(Field, float64, nvml.Return)) {
	fv := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: math.MaxUint32},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: math.MaxUint32},
	}
	if ret := h.GetFieldValues(fv); ret != nvml.SUCCESS {
		add(NVLinkTx, 0, ret)
		add(NVLinkRx, 0, ret)
		return
	}
	now := time.Now().UnixMicro()
	for k, f := range []Field{NVLinkTx, NVLinkRx} {
		if ret := nvml.Return(fv[k].NvmlReturn); ret != nvml.SUCCESS {
			add(f, 0, ret)
			continue
		}
		v, ok := fieldUint(fv[k])
		if !ok {
			continue
		}
		at := fv[k].Timestamp
		if at == 0 {
			at = now
		}
		prev := n.nvlinkPrev[i][k]
		n.nvlinkPrev[i][k] = counterPoint{v: v, at: at}
		if prev.at == 0 || at <= prev.at || v < prev.v {
			continue // first reading, or a counter reset
		}
		rate := float64(v-prev.v) * 1024 / (float64(at-prev.at) / 1e6)
		add(f, rate, nvml.SUCCESS)
	}
}

// fieldUint decodes an integer field value.
func fieldUint(f nvml.FieldValue) (uint64, bool) {
	le := binary.LittleEndian
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return le.Uint64(f.Value[:]), true
	case nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_SIGNED_INT:
		return uint64(le.Uint32(f.Value[:])), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(le.Uint16(f.Value[:])), true
	case nvml.VALUE_TYPE_DOUBLE:
		d := math.Float64frombits(le.Uint64(f.Value[:]))
		if d < 0 || math.IsNaN(d) {
			return 0, false
		}
		return uint64(d), true
	}
	return 0, false
}

// Processes implements Backend: compute processes with their memory, and
// their SM/memory utilisation over the samples NVML took since the last
// call.
func (n *NVML) Processes(i int, dst []ProcessUsage) ([]ProcessUsage, error) {
	h := n.handles[i]
	procs, ret := h.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
		return dst, fmt.Errorf("gpu %d running processes: %s", i, nvml.ErrorString(ret))
	}
	idx := map[uint32]int{}
	for _, p := range procs {
		mem := float64(p.UsedGpuMemory)
		if p.UsedGpuMemory == math.MaxUint64 { // NVML_VALUE_NOT_AVAILABLE
			mem = -1
		}
		idx[p.Pid] = len(dst)
		dst = append(dst, ProcessUsage{PID: p.Pid, SMUtil: -1, MemUtil: -1, MemoryBytes: mem})
	}
	samples, ret := h.GetProcessUtilization(n.procSeen[i])
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_FOUND, nvml.ERROR_NOT_SUPPORTED:
		return dst, nil
	default:
		return dst, fmt.Errorf("gpu %d process utilization: %s", i, nvml.ErrorString(ret))
	}
	for _, s := range samples {
		n.procSeen[i] = max(n.procSeen[i], s.TimeStamp)
		j, ok := idx[s.Pid]
		if !ok {
			idx[s.Pid] = len(dst)
			j = len(dst)
			dst = append(dst, ProcessUsage{PID: s.Pid, MemoryBytes: -1})
		}
		// Several samples per process: keep the latest window's values.
		dst[j].SMUtil, dst[j].MemUtil = float64(s.SmUtil), float64(s.MemUtil)
	}
	return dst, nil
}

// WaitEvent implements Backend.
func (n *NVML) WaitEvent(timeout time.Duration) (XIDEvent, bool, error) {
	if n.events == nil {
		time.Sleep(timeout)
		return XIDEvent{}, false, nil
	}
	ev, ret := n.events.Wait(uint32(timeout.Milliseconds()))
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_TIMEOUT:
		return XIDEvent{}, false, nil
	default:
		return XIDEvent{}, false, fmt.Errorf("nvml event wait: %s", nvml.ErrorString(ret))
	}
	if ev.EventType != nvml.EventTypeXidCriticalError {
		return XIDEvent{}, false, nil
	}
	for i, h := range n.handles {
		if h == ev.Device {
			return XIDEvent{Device: i, XID: ev.EventData}, true, nil
		}
	}
	return XIDEvent{}, false, fmt.Errorf("nvml event for an unknown device (xid %d)", ev.EventData)
}

// Close implements Backend.
func (n *NVML) Close() error {
	var err error
	n.closeOnce.Do(func() {
		if n.events != nil {
			n.events.Free()
		}
		if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
			err = fmt.Errorf("nvml shutdown: %s", nvml.ErrorString(ret))
		}
	})
	return err
}
