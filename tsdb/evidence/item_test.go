package evidence

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// batchWith wraps item JSON objects in a batch body.
func batchWith(items ...string) []byte {
	return []byte(`{"node":"gpu-node-7","evidence":[` + strings.Join(items, ",") + `]}`)
}

const goodStack = `{"kind":"stack","time":"2025-03-01T12:00:10Z","node":"gpu-node-7","pid":4242,"tid":4250,"comm":"python3",
 "probe":"syscalls","detail":"futex","start":"2025-03-01T12:00:03.5Z","latency":0.0051,
 "frames":[{"address":"0x7f3a2b3c4d5e","module":"/usr/lib/x86_64-linux-gnu/libc.so.6","function":"__futex_abstimed_wait_common","offset":62},{"address":"0x55d0c0ffee00"}]}`

const goodTimeline = `{"kind":"cuda_timeline","time":"2025-03-01T12:00:10Z","pid":4242,"probe":"cuda","latency":0.0123,"frames":[],
 "calls":[{"tid":4250,"symbol":"cudaLaunchKernel","start":"2025-03-01T12:00:07Z","duration":0.0004,"stream":"0x7f3a10000000"},
          {"tid":4250,"symbol":"cudaDeviceSynchronize","start":"2025-03-01T12:00:08Z","duration":0.0123}],"seen":1800,"future_field":1}`

// TestParseGolden decodes the agent's golden batch (agent/evidence), the
// contract's own example.
func TestParseGolden(t *testing.T) {
	good, bad, err := ParseBatch(batchWith(goodTimeline, goodStack), Limits{})
	if err != nil || len(bad) != 0 || len(good) != 2 {
		t.Fatalf("good %d, bad %v, err %v", len(good), bad, err)
	}
	tl, st := good[0], good[1]
	if tl.Node != "gpu-node-7" {
		t.Errorf("timeline without node did not take the batch's: %q", tl.Node)
	}
	if len(tl.Calls) != 2 || tl.Calls[1].Duration != 0.0123 || tl.Seen != 1800 || tl.Calls[0].Stream != "0x7f3a10000000" {
		t.Errorf("timeline %+v", tl)
	}
	if st.TID != 4250 || st.Detail != "futex" || st.Frames[0].Offset != 62 || st.Frames[1].Function != "" ||
		!st.Start.Equal(time.Date(2025, 3, 1, 12, 0, 3, 500e6, time.UTC)) {
		t.Errorf("stack %+v", st)
	}
}

func TestParseBadItemsNamed(t *testing.T) {
	with := func(field, value string) string {
		var m map[string]any
		json.Unmarshal([]byte(goodStack), &m)
		if value == "" {
			delete(m, field)
		} else {
			var v any
			if err := json.Unmarshal([]byte(value), &v); err != nil {
				panic(err)
			}
			m[field] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	lim := Limits{MinTime: time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC), MaxTime: time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC), MaxFrames: 3}
	cases := []struct{ item, want string }{
		{with("kind", `"flamegraph"`), `kind: "flamegraph" is not`},
		{with("kind", ""), "kind: missing"},
		{with("time", ""), "time: missing"},
		{with("time", `"yesterday"`), "cannot parse"},
		{with("pid", `-3`), "pid"},
		{with("pid", `0`), "pid: missing or 0"},
		{with("latency", `-0.5`), "latency: -0.5 s is not between"},
		{with("latency", `"slow"`), "latency"},
		{with("frames", `[{"address":"7f00"}]`), `frames[0].address: "7f00" is not 0x`},
		{with("frames", `[{"address":"0x1"},{"address":"0x12345678901234567"}]`), "frames[1].address"},
		{with("frames", `[{"address":"0x1"},{"address":"0x1"},{"address":"0x1"},{"address":"0x1"}]`), "frames: 4, more than the limit 3"},
		{with("calls", `[{"tid":1,"symbol":"cudaMemcpy","start":"2025-03-01T12:00:08Z","duration":0.1}]`), "calls: a stack has none"},
		{with("start", `"2024-01-01T00:00:00Z"`), "before the oldest time kept"},
		{with("start", `"2025-06-01T00:00:00Z"`), "after 2025-04-01T00:00:00Z"},
		{with("start", `"1960-01-01T00:00:00Z"`), "start: 1960-01-01T00:00:00Z is not between 1970 and 2200"},
		{with("comm", `"`+strings.Repeat("x", 2000)+`"`), "comm: 2000 bytes"},
		{`[1,2]`, "cannot unmarshal array"},
		{`{"kind":"cuda_timeline","time":"2025-03-01T12:00:10Z","pid":1,"latency":0,"frames":[],"calls":[{"tid":1,"start":"2025-03-01T12:00:08Z","duration":0.1}]}`, "calls[0].symbol: missing"},
		{`{"kind":"cuda_timeline","time":"2025-03-01T12:00:10Z","pid":1,"latency":0,"frames":[],"calls":[{"tid":1,"symbol":"cudaMemcpy","start":"2025-03-01T12:00:08Z","duration":0.1,"stream":"default"}]}`, `calls[0].stream: "default"`},
		{`{"kind":"cuda_timeline","time":"2025-03-01T12:00:10Z","pid":1,"latency":0,"frames":[],"calls":[{"tid":1,"symbol":"cudaMemcpy","duration":0.1}]}`, "calls[0].start: missing"},
	}
	items := []string{goodStack}
	for _, c := range cases {
		items = append(items, c.item)
	}
	good, bad, err := ParseBatch(batchWith(items...), lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(good) != 1 || good[0].PID != 4242 {
		t.Fatalf("good items %+v, want the first only", good)
	}
	if len(bad) != len(cases) {
		t.Fatalf("%d bad items, want %d: %v", len(bad), len(cases), bad)
	}
	for i, c := range cases {
		var ie *ItemError
		if !errors.As(bad[i], &ie) || ie.Index != i+1 || !errors.Is(bad[i], ErrBadItem) {
			t.Errorf("case %d: %v is not item %d", i, bad[i], i+1)
		}
		if msg := bad[i].Error(); !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "evidence[") {
			t.Errorf("case %d: %q does not say %q", i, msg, c.want)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"not json":        `evidence`,
		"no array":        `{"node":"n"}`,
		"array is object": `{"node":"n","evidence":{}}`,
		"trailing data":   `{"node":"n","evidence":[]} {}`,
		"too many items":  `{"node":"n","evidence":[{},{},{}]}`,
		"node too long":   `{"node":"` + strings.Repeat("n", 300) + `","evidence":[]}`,
	} {
		_, _, err := ParseBatch([]byte(body), Limits{MaxItems: 2, MaxString: 256})
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	good, bad, err := ParseBatch([]byte(`{"node":"n","evidence":[]}`), Limits{})
	if err != nil || len(good)+len(bad) != 0 {
		t.Fatalf("empty batch: %v %v %v", good, bad, err)
	}
}

func FuzzParseBatch(f *testing.F) {
	f.Add(batchWith(goodStack, goodTimeline))
	f.Add(batchWith(`{"kind":"stack"}`))
	f.Add([]byte(`{"evidence":null}`))
	f.Add([]byte(`{"node":"n","evidence":[{"kind":"stack","time":"2025-03-01T12:00:10Z","pid":1,"latency":1e308,"frames":[{"address":"0x"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		good, bad, err := ParseBatch(body, Limits{})
		if err != nil {
			if len(good)+len(bad) != 0 || !errors.Is(err, ErrMalformed) {
				t.Fatalf("refused batch with items: %v", err)
			}
			return
		}
		for _, e := range bad {
			if !errors.Is(e, ErrBadItem) {
				t.Fatalf("item error %v does not match ErrBadItem", e)
			}
		}
		// A good item survives its own canonical JSON and stays good; its
		// span is ordered and storable.
		for _, it := range good {
			b, err := json.Marshal(it)
			if err != nil {
				t.Fatalf("marshal good item: %v", err)
			}
			var back Item
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("unmarshal canonical JSON: %v", err)
			}
			if err := back.Validate(Limits{}); err != nil {
				t.Fatalf("canonical JSON of a good item is bad: %v\n%s", err, b)
			}
			if b2, _ := json.Marshal(back); string(b2) != string(b) {
				t.Fatalf("canonical JSON not stable:\n%s\n%s", b, b2)
			}
			if from, to := it.Span(); to.Before(from) {
				t.Fatalf("span %v..%v reversed", from, to)
			}
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	it := stackItem("n", 7, "comm", t0, 0.25)
	js, _ := json.Marshal(it)
	rec := appendRecord(nil, headerOf(&it), js)
	f.Add(rec)
	f.Add(rec[:len(rec)-1])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, off, n, err := decodeRecord(b)
		if err != nil {
			return
		}
		if off > n || n > len(b) {
			t.Fatalf("offsets %d/%d beyond %d bytes", off, n, len(b))
		}
		again := appendRecord(nil, h, b[off:n])
		h2, off2, n2, err := decodeRecord(again)
		same := h2.from == h.from && h2.to == h.to && math.Float64bits(h2.latency) == math.Float64bits(h.latency) &&
			h2.pid == h.pid && h2.kind == h.kind && h2.node == h.node && h2.comm == h.comm && h2.probe == h.probe
		if err != nil || !same || n2 != len(again) || string(again[off2:n2]) != string(b[off:n]) {
			t.Fatalf("re-encoding: %v %+v %+v", err, h, h2)
		}
	})
}

// TestParseAgentGolden decodes the agent encoder's golden output
// (agent/evidence/testdata/batch.golden.json): what the agent sends, the
// server takes whole.
func TestParseAgentGolden(t *testing.T) {
	b, err := os.ReadFile("../../agent/evidence/testdata/batch.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	good, bad, err := ParseBatch(b, Limits{})
	if err != nil || len(bad) != 0 || len(good) != 2 {
		t.Fatalf("good %d, bad %v, err %v", len(good), bad, err)
	}
	if good[0].Kind != KindCUDATimeline || good[1].Kind != KindStack || good[1].Frames[0].Function != "__futex_abstimed_wait_common" {
		t.Fatalf("items %+v", good)
	}
}
