package gpu

import "github.com/prometheus/common/model"

// Field is one device metric, named as dcgm-exporter names it.
type Field int

// The fields a backend reports. Units follow DCGM.
const (
	GPUUtil         Field = iota // %
	MemCopyUtil                  // % of time the memory was read or written
	SMClock                      // MHz
	MemClock                     // MHz
	ThrottleReasons              // bitmask of nvmlClocksThrottleReasons
	PowerUsage                   // W
	TotalEnergy                  // mJ since driver load
	GPUTemp                      // °C
	FBUsed                       // MiB
	FBFree                       // MiB
	PCIeTx                       // KB/s
	PCIeRx                       // KB/s
	NVLinkTx                     // bytes/s, all links
	NVLinkRx                     // bytes/s, all links
	XIDErrors                    // last XID seen, 0 before any
	numFields
)

type fieldSpec struct {
	name, unit, help string
	typ              model.MetricType
}

// fieldSpecs hold the dcgm-exporter names and help texts (its
// default-counters.csv) so dashboards built on dcgm-exporter keep working.
var fieldSpecs = [numFields]fieldSpec{
	GPUUtil:         {"DCGM_FI_DEV_GPU_UTIL", "", "GPU utilization (in %).", model.MetricTypeGauge},
	MemCopyUtil:     {"DCGM_FI_DEV_MEM_COPY_UTIL", "", "Memory utilization (in %).", model.MetricTypeGauge},
	SMClock:         {"DCGM_FI_DEV_SM_CLOCK", "", "SM clock frequency (in MHz).", model.MetricTypeGauge},
	MemClock:        {"DCGM_FI_DEV_MEM_CLOCK", "", "Memory clock frequency (in MHz).", model.MetricTypeGauge},
	ThrottleReasons: {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "", "Current clock throttle reasons (bitmask of nvmlClocksThrottleReasons).", model.MetricTypeGauge},
	PowerUsage:      {"DCGM_FI_DEV_POWER_USAGE", "", "Power draw (in W).", model.MetricTypeGauge},
	TotalEnergy:     {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "", "Total energy consumption since boot (in mJ).", model.MetricTypeCounter},
	GPUTemp:         {"DCGM_FI_DEV_GPU_TEMP", "", "GPU temperature (in C).", model.MetricTypeGauge},
	FBUsed:          {"DCGM_FI_DEV_FB_USED", "", "Framebuffer memory used (in MiB).", model.MetricTypeGauge},
	FBFree:          {"DCGM_FI_DEV_FB_FREE", "", "Framebuffer memory free (in MiB).", model.MetricTypeGauge},
	PCIeTx:          {"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "", "PCIe transmit throughput (in KB/s).", model.MetricTypeGauge},
	PCIeRx:          {"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "", "PCIe receive throughput (in KB/s).", model.MetricTypeGauge},
	NVLinkTx:        {"DCGM_FI_PROF_NVLINK_TX_BYTES", "", "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.", model.MetricTypeGauge},
	NVLinkRx:        {"DCGM_FI_PROF_NVLINK_RX_BYTES", "", "The rate of data received over NVLink, not including protocol headers, in bytes per second.", model.MetricTypeGauge},
	XIDErrors:       {"DCGM_FI_DEV_XID_ERRORS", "", "Value of the last XID error encountered.", model.MetricTypeGauge},
}

// Name returns the dcgm-exporter metric name.
func (f Field) Name() string {
	if f < 0 || f >= numFields {
		return "invalid_field"
	}
	return fieldSpecs[f].name
}

// Per-process and XID metrics have no dcgm-exporter equivalent.
const (
	metricProcSM   = "tailroot_gpu_process_sm_util"
	metricProcMem  = "tailroot_gpu_process_mem_util"
	metricProcFB   = "tailroot_gpu_process_memory_used_bytes"
	metricXIDTotal = "tailroot_gpu_xid_errors_total"
)
