package gpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/agent/collect"
	"github.com/tailroot/tailroot/agent/procinfo"
)

// busID encodes a PCI bus id the way NVML fills nvmlPciInfo_t.busId.
func busID(s string) (b [32]int8) {
	for i := range len(s) {
		b[i] = int8(s[i])
	}
	return b
}

func ullField(id uint32, v uint64, atMicros int64) nvml.FieldValue {
	f := nvml.FieldValue{FieldId: id, ScopeId: ^uint32(0), Timestamp: atMicros, ValueType: uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)}
	binary.LittleEndian.PutUint64(f.Value[:], v)
	return f
}

// h200 is a DGX H200 mock with every field the backend reads set to a
// known value. Device i reports GPU utilisation 10·i %, SM clock 1980 MHz,
// memory clock 2619 MHz, 350.5 W, 10 GiB used of 141 GiB, PCIe TX 1000·(i+1)
// KB/s, RX 500 KB/s, and NVLink TX/RX counters that grow by 2000/1000 KiB
// between the two readings taken 100 ms apart.
type h200 struct {
	srv       *server.Server
	pcieCalls atomic.Int32
	nvReads   []atomic.Int32
	xid       chan nvml.EventData
}

func newH200(t *testing.T) *h200 {
	m := &h200{srv: dgxh200.New(), xid: make(chan nvml.EventData, 4)}
	m.nvReads = make([]atomic.Int32, len(m.srv.Devices))
	for i, d := range m.srv.Devices {
		dev := d.(*server.Device)
		dev.PciBusID = fmt.Sprintf("00000000:%02X:00.0", 0x18+i)
		dev.MemoryInfo.Used = 10 << 30
		dev.MemoryInfo.Free = dev.MemoryInfo.Total - dev.MemoryInfo.Used
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busID(dev.PciBusID)}, nvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: 30}, nvml.SUCCESS
		}
		dev.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
			switch c {
			case nvml.CLOCK_SM:
				return 1980, nvml.SUCCESS
			case nvml.CLOCK_MEM:
				return 2619, nvml.SUCCESS
			}
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		dev.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0x4, nvml.SUCCESS } // SW power cap
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 350500, nvml.SUCCESS }
		dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 123456789, nvml.SUCCESS }
		dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 41, nvml.SUCCESS }
		dev.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
			m.pcieCalls.Add(1)
			if c == nvml.PCIE_UTIL_TX_BYTES {
				return uint32(1000 * (i + 1)), nvml.SUCCESS
			}
			return 500, nvml.SUCCESS
		}
		dev.GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
			n := int64(m.nvReads[i].Add(1)) // 1, 2, ...
			at := int64(1_700_000_000_000_000) + n*100_000
			for k := range fv {
				base := uint64(1000 * n)
				if fv[k].FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX {
					base *= 2
				}
				fv[k] = ullField(fv[k].FieldId, base, at)
			}
			return nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if i != 0 {
				return nil, nvml.SUCCESS
			}
			return []nvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 2 << 30}}, nvml.SUCCESS
		}
		dev.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			if i != 0 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return []nvml.ProcessUtilizationSample{{Pid: uint32(os.Getpid()), TimeStamp: 5, SmUtil: 55, MemUtil: 12}}, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	m.srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				select {
				case ev := <-m.xid:
					return ev, nvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	return m
}

func find(ss []collect.Series, name string, match ...string) []collect.Series {
	var out []collect.Series
	for _, s := range ss {
		if s.Labels.Get(model.MetricNameLabel) != name {
			continue
		}
		ok := true
		for i := 0; i < len(match); i += 2 {
			if s.Labels.Get(match[i]) != match[i+1] {
				ok = false
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, ss []collect.Series, name string, match ...string) collect.Series {
	t.Helper()
	f := find(ss, name, match...)
	if len(f) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, match, len(f))
	}
	return f[0]
}

func TestNVMLMockH200(t *testing.T) {
	m := newH200(t)
	b, err := NewNVML(m.srv)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	devs := b.Devices()
	if len(devs) != 8 || devs[3].Model != "NVIDIA H200 141GB HBM3e" || devs[3].PCIBusID != "00000000:1B:00.0" || devs[3].Minor != 3 || !strings.HasPrefix(devs[3].UUID, "GPU-") {
		t.Fatalf("devices %+v", devs)
	}
	c := NewCollector(b, Options{Hostname: "gpu-node-7"})
	t0 := time.UnixMilli(1_700_000_000_000)
	c.sample(t0)
	c.sample(t0.Add(100 * time.Millisecond))
	c.sampleProcesses(t0)
	ss, err := c.Collect(context.Background(), t0, nil)
	if err != nil {
		t.Fatal(err)
	}

	g3 := one(t, ss, "DCGM_FI_DEV_GPU_UTIL", "gpu", "3")
	want := labels.FromStrings("__name__", "DCGM_FI_DEV_GPU_UTIL", "gpu", "3", "UUID", devs[3].UUID,
		"pci_bus_id", "00000000:1B:00.0", "device", "nvidia3", "modelName", "NVIDIA H200 141GB HBM3e", "Hostname", "gpu-node-7")
	if !labels.Equal(g3.Labels, want) {
		t.Errorf("labels %s\nwant   %s", g3.Labels, want)
	}
	if len(g3.Samples) != 2 || g3.Samples[0] != (collect.Sample{T: t0.UnixMilli(), V: 30}) || g3.Samples[1].T != t0.UnixMilli()+100 {
		t.Errorf("gpu 3 utilisation samples %+v, want 30 at t0 and t0+100ms", g3.Samples)
	}
	if g3.Meta.Type != model.MetricTypeGauge {
		t.Errorf("metadata %+v", g3.Meta)
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"DCGM_FI_DEV_SM_CLOCK", 1980},
		{"DCGM_FI_DEV_MEM_CLOCK", 2619},
		{"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 4},
		{"DCGM_FI_DEV_POWER_USAGE", 350.5},        // 350500 mW
		{"DCGM_FI_DEV_FB_USED", 10240},            // 10 GiB in MiB
		{"DCGM_FI_DEV_FB_FREE", 141*1024 - 10240}, // H200 mock: 141 GiB total
		{"DCGM_FI_DEV_GPU_TEMP", 41},
		{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 123456789},
		{"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", 4000}, // 1000·(3+1) KB/s
		{"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", 500},
		{"DCGM_FI_DEV_MEM_COPY_UTIL", 30},
		{"DCGM_FI_DEV_XID_ERRORS", 0},
	} {
		s := one(t, ss, c.name, "gpu", "3")
		if s.Samples[len(s.Samples)-1].V != c.want {
			t.Errorf("%s = %v, want %v", c.name, s.Samples[len(s.Samples)-1].V, c.want)
		}
	}
	// NVLink: the counters moved 2000 KiB (TX) and 1000 KiB (RX) in 100 ms:
	// 2000·1024/0.1 = 20 480 000 B/s and 10 240 000 B/s, from the second
	// reading on.
	tx := one(t, ss, "DCGM_FI_PROF_NVLINK_TX_BYTES", "gpu", "3")
	rx := one(t, ss, "DCGM_FI_PROF_NVLINK_RX_BYTES", "gpu", "3")
	if len(tx.Samples) != 1 || tx.Samples[0].V != 20_480_000 || rx.Samples[0].V != 10_240_000 {
		t.Errorf("nvlink tx %+v rx %+v", tx.Samples, rx.Samples)
	}
	// Per-process series on GPU 0 for this test process.
	comm, _ := procinfo.Reader{}.Lookup(os.Getpid())
	pid := fmt.Sprint(os.Getpid())
	sm := one(t, ss, metricProcSM, "gpu", "0", "pid", pid)
	if sm.Labels.Get("comm") != comm.Comm || sm.Samples[0].V != 55 {
		t.Errorf("process SM series %s %+v", sm.Labels, sm.Samples)
	}
	if fb := one(t, ss, metricProcFB, "gpu", "0", "pid", pid); fb.Samples[0].V != 2<<30 {
		t.Errorf("process memory %v", fb.Samples[0].V)
	}
	// Collect hands everything out once.
	if again, _ := c.Collect(context.Background(), t0, nil); len(again) != 0 {
		t.Fatalf("second Collect returned %d series", len(again))
	}
}

func TestUnsupportedFieldSkipped(t *testing.T) {
	m := newH200(t)
	dev1 := m.srv.Devices[1].(*server.Device)
	var calls atomic.Int32
	dev1.GetPcieThroughputFunc = func(nvml.PcieUtilCounter) (uint32, nvml.Return) {
		calls.Add(1)
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	b, err := NewNVML(m.srv)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCollector(b, Options{})
	for k := range 5 {
		c.sample(time.UnixMilli(int64(1000 + k)))
	}
	ss, _ := c.Collect(context.Background(), time.Now(), nil)
	if n := len(find(ss, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "gpu", "1")); n != 0 {
		t.Errorf("unsupported field emitted for gpu 1")
	}
	if n := len(one(t, ss, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "gpu", "0").Samples); n != 5 {
		t.Errorf("gpu 0 PCIe samples %d, want 5", n)
	}
	// TX and RX each answered NOT_SUPPORTED once; then neither is asked.
	if calls.Load() != 2 {
		t.Errorf("unsupported call made %d times, want 2", calls.Load())
	}
	if c.Stats().Errors != 0 {
		t.Errorf("NOT_SUPPORTED counted as an error")
	}
}

// logCounter counts log records whose message contains a substring.
type logCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	l.msgs = append(l.msgs, s)
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }
func (l *logCounter) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

func TestPersistentErrorLoggedOnce(t *testing.T) {
	m := newH200(t)
	m.srv.Devices[2].(*server.Device).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	b, _ := NewNVML(m.srv)
	lc := &logCounter{}
	c := NewCollector(b, Options{Logger: slog.New(lc)})
	for k := range 20 {
		c.sample(time.UnixMilli(int64(k)))
	}
	if got := c.Stats().Errors; got != 20 {
		t.Errorf("errors %d, want 20", got)
	}
	if n := lc.count("ERROR_GPU_IS_LOST"); n != 1 {
		t.Errorf("error logged %d times, want once", n)
	}
}

func TestXIDEvent(t *testing.T) {
	m := newH200(t)
	b, _ := NewNVML(m.srv)
	c := NewCollector(b, Options{SampleInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	m.xid <- nvml.EventData{Device: m.srv.Devices[3], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().XIDs == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(30 * time.Millisecond) // a few samples after the event
	cancel()
	<-done
	ss, _ := c.Collect(context.Background(), time.Now(), nil)
	last := one(t, ss, "DCGM_FI_DEV_XID_ERRORS", "gpu", "3")
	if v := last.Samples[len(last.Samples)-1].V; v != 79 {
		t.Errorf("last XID %v, want 79", v)
	}
	if v := one(t, ss, "DCGM_FI_DEV_XID_ERRORS", "gpu", "2").Samples[0].V; v != 0 {
		t.Errorf("gpu 2 XID %v, want 0", v)
	}
	total := one(t, ss, metricXIDTotal, "gpu", "3", "err_code", "79")
	if v := total.Samples[len(total.Samples)-1].V; v != 1 {
		t.Errorf("xid count %v, want 1", v)
	}
}

func TestBufferBound(t *testing.T) {
	m := newH200(t)
	b, _ := NewNVML(m.srv)
	c := NewCollector(b, Options{MaxBuffered: 10})
	c.sample(time.UnixMilli(1))
	ss, _ := c.Collect(context.Background(), time.Now(), nil)
	n := 0
	for _, s := range ss {
		n += len(s.Samples)
	}
	if n != 10 || c.Stats().Dropped == 0 {
		t.Fatalf("%d samples kept, %d dropped; want 10 kept and drops counted", n, c.Stats().Dropped)
	}
}

// TestDegradesWithoutLibrary: without libnvidia-ml, Open fails with
// ErrUnavailable and a message that says why.
func TestDegradesWithoutLibrary(t *testing.T) {
	_, err := Open("nvml", "/nonexistent/libnvidia-ml.so.1")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "libnvidia-ml") {
		t.Fatalf("err %v, want ErrUnavailable naming libnvidia-ml", err)
	}
	if _, err := Open("dcgm", ""); err == nil {
		t.Fatal("unknown backend accepted")
	}
}

func TestInitFailures(t *testing.T) {
	m := newH200(t)
	m.srv.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	if _, err := NewNVML(m.srv); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "DRIVER_NOT_LOADED") {
		t.Fatalf("driver not loaded: %v", err)
	}
	m = newH200(t)
	m.srv.Devices = nil
	if _, err := NewNVML(m.srv); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no devices: %v", err)
	}
}

// TestRealNVML samples the node's GPUs through the real libnvidia-ml when
// there is one (and skips, saying why, when there is none).
func TestRealNVML(t *testing.T) {
	b, err := OpenNVML("")
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := NewCollector(b, Options{Hostname: "real"})
	c.sample(time.Now())
	time.Sleep(100 * time.Millisecond)
	c.sample(time.Now())
	c.sampleProcesses(time.Now())
	ss, _ := c.Collect(context.Background(), time.Now(), nil)
	for i, d := range b.Devices() {
		t.Logf("gpu %d: %s %s %s", i, d.Model, d.UUID, d.PCIBusID)
		g := fmt.Sprint(i)
		u := one(t, ss, "DCGM_FI_DEV_GPU_UTIL", "gpu", g).Samples[0].V
		fb := one(t, ss, "DCGM_FI_DEV_FB_USED", "gpu", g).Samples[0].V
		free := one(t, ss, "DCGM_FI_DEV_FB_FREE", "gpu", g).Samples[0].V
		sm := one(t, ss, "DCGM_FI_DEV_SM_CLOCK", "gpu", g).Samples[0].V
		pw := one(t, ss, "DCGM_FI_DEV_POWER_USAGE", "gpu", g).Samples[0].V
		t.Logf("util %v %%, fb used %v MiB free %v MiB, sm clock %v MHz, power %v W", u, fb, free, sm, pw)
		if u < 0 || u > 100 || fb+free <= 0 || sm <= 0 || pw <= 0 || !strings.HasPrefix(d.UUID, "GPU-") {
			t.Errorf("gpu %d: implausible readings", i)
		}
	}
	for _, s := range ss {
		t.Logf("%s %v", s.Labels, s.Samples[len(s.Samples)-1].V)
	}
}
