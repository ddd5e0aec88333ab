package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/tailroot/tailroot/sim"
)

func TestSimulateScheduleAndFlags(t *testing.T) {
	c, _, err := parseServeFlags([]string{"--simulate", "--simulate.incident-every=20m", "--simulate.incident-at=12m", "--simulate.incident-for=6m"})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 10, 5, 0, 0, time.UTC)
	fs := c.sim.faults(from, from.Add(55*time.Minute))
	if len(fs) != 3 {
		t.Fatalf("%d incidents in an hour of 20m periods, want 3", len(fs))
	}
	for i, want := range []string{"10:12:00", "10:32:00", "10:52:00"} {
		if got := fs[i].Start.UTC().Format(time.TimeOnly); got != want || fs[i].Duration != 6*time.Minute || fs[i].Kind != sim.FaultGPUThrottle {
			t.Errorf("incident %d: %+v, want gpu_throttle at %s for 6m", i, fs[i], want)
		}
	}
	d, _, err := parseServeFlags([]string{"--simulate"})
	if err != nil {
		t.Fatal(err)
	}
	if fs := d.sim.faults(from, from.Add(time.Hour)); len(fs) != 2 || fs[0].Start.UTC().Format(time.TimeOnly) != "10:40:00" {
		t.Errorf("default schedule %+v, want minute 40 of every hour", fs)
	}
	for _, bad := range [][]string{
		{"--simulate", "--simulate.incident=nope"},
		{"--simulate", "--simulate.incident-at=55m", "--simulate.incident-for=10m"},
		{"--simulate", "--simulate.incident-every=0s"},
	} {
		if _, _, err := parseServeFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, _, err := parseServeFlags([]string{"--simulate.incident=nope"}); err != nil {
		t.Errorf("--simulate.* without --simulate must not be checked: %v", err)
	}
	if e, _, _ := parseServeFlags([]string{"--simulate", "--simulate.incident=none"}); e.sim.faults(from, from.Add(time.Hour)) != nil {
		t.Error("--simulate.incident=none scheduled incidents")
	}
}

func TestSimulatorCursorAndRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), cursorFile)
	if _, ok := readCursor(path); ok {
		t.Fatal("cursor read from nothing")
	}
	at := time.Date(2026, 1, 1, 10, 0, 15, 0, time.UTC)
	if err := writeCursor(path, at); err != nil {
		t.Fatal(err)
	}
	if got, ok := readCursor(path); !ok || !got.Equal(at) {
		t.Fatalf("cursor %v %v, want %v", got, ok, at)
	}

	recs := []sim.Record{{
		Model: "m", Instance: "m-0:8000", Job: "vllm", Seq: 7, Arrival: at,
		Frontend: 0.0031234567891, Queue: 0.2, Prefill: 0.05, Decode: 1.5, PromptTokens: 100, OutputTokens: 20,
	}}
	r := toRequests(recs)[0]
	e2e := float64(r.Finished-r.Arrival) / 1e9
	if d := e2e - recs[0].E2E(); d < -2e-9 || d > 2e-9 {
		t.Errorf("record e2e %v, simulated %v", e2e, recs[0].E2E())
	}
	stages := r.Tokenize + float64(r.Scheduled-r.Queued)/1e9 + float64(r.FirstToken-r.Scheduled)/1e9 + float64(r.LastToken-r.FirstToken)/1e9
	if stages > e2e || e2e-stages > 3e-6 {
		t.Errorf("stages sum to %v of e2e %v: must not exceed it, and leave at most 3µs to other", stages, e2e)
	}
	if r.ID != "sim-m-0-1767261615000000000-7" || r.Model != "m" || r.Instance != "m-0:8000" {
		t.Errorf("record %q %q %q", r.ID, r.Model, r.Instance)
	}
}
