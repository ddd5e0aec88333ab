// Package probe holds the loader plumbing the BPF program packages share:
// attaching tp_btf programs, reading histogram maps, and closing links.
package probe

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/tailroot/tailroot/bpf"
)

// AttachRawTP attaches tp_btf programs (BTF-typed raw tracepoints; the
// tracepoint name is in each program's section, "tp_btf/<name>"). On error
// the links made so far are closed.
func AttachRawTP(progs ...*ebpf.Program) ([]link.Link, error) {
	links := make([]link.Link, 0, len(progs))
	for _, p := range progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			_ = CloseAll(links)
			return nil, fmt.Errorf("attach tp_btf program %s: %w", p, err)
		}
		links = append(links, l)
	}
	return links, nil
}

// CloseAll closes links first (detaching the programs) and then the other
// closers (maps and programs), returning every error.
func CloseAll(links []link.Link, closers ...io.Closer) error {
	var errs []error
	for _, l := range links {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range closers {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Hists reads every histogram of a map whose values are struct hist. The
// kernel keeps updating the map while it is read, so entries are a
// snapshot per key, not across keys.
func Hists[K comparable](m *ebpf.Map) (map[K]bpf.Hist, error) {
	out := make(map[K]bpf.Hist)
	var k K
	var v bpf.Hist
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	return out, nil
}

// SetMaxEntries overrides a map's size in a spec before loading; n == 0
// keeps the size compiled into the object.
func SetMaxEntries(spec *ebpf.CollectionSpec, name string, n uint32) error {
	if n == 0 {
		return nil
	}
	m, ok := spec.Maps[name]
	if !ok {
		return fmt.Errorf("BUG: map %q not in object", name)
	}
	m.MaxEntries = n
	return nil
}

// SetSlowThreshold writes the slow_min_ns constant of include/slow.h:
// events at least d long are sent; d <= 0 turns slow events off.
func SetSlowThreshold(spec *ebpf.CollectionSpec, d time.Duration) error {
	v, ok := spec.Variables["slow_min_ns"]
	if !ok {
		return errors.New("BUG: variable slow_min_ns not in object")
	}
	ns := ^uint64(0) // SLOW_OFF
	if d > 0 {
		ns = uint64(d.Nanoseconds())
	}
	if err := v.Set(ns); err != nil {
		return fmt.Errorf("set slow_min_ns: %w", err)
	}
	return nil
}

// Watch adds process pid to a "watched" set map (u32 -> u8).
func Watch(m *ebpf.Map, pid int) error {
	if pid <= 0 || pid > 1<<22 {
		return fmt.Errorf("watch pid %d: out of range (1..%d)", pid, 1<<22)
	}
	if err := m.Put(uint32(pid), uint8(1)); err != nil {
		return fmt.Errorf("watch pid %d: %w", pid, err)
	}
	return nil
}

// Unwatch removes pid from a watched set and deletes its entries from the
// per-process maps. Missing entries are not an error.
func Unwatch(set *ebpf.Map, pid int, perPID ...*ebpf.Map) error {
	key := uint32(pid)
	var errs []error
	for _, m := range append([]*ebpf.Map{set}, perPID...) {
		if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("unwatch pid %d in %s: %w", pid, m, err))
		}
	}
	return errors.Join(errs...)
}
