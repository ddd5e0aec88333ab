module github.com/tailroot/tailroot

go 1.26.7

require (
	github.com/NVIDIA/go-nvml v0.13.4-1 // indirect
	github.com/VictoriaMetrics/metrics v1.35.3 // indirect
	github.com/VictoriaMetrics/metricsql v0.87.3 // indirect
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/gorilla/mux v1.8.1 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/common v0.73.1 // indirect
	github.com/prometheus/exporter-toolkit v0.20.0 // indirect
	github.com/prometheus/prometheus v0.316.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.opentelemetry.io/collector/pdata v1.71.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
