// Package bpf holds tailroot-agent's eBPF programs (tracepoints, tp_btf and
// uprobes, CO-RE against the kernel's BTF) and the pure Go that decodes what
// they report.
package bpf
