package plugin

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDecodeResult(t *testing.T) {
	res, err := decodeResult(json.RawMessage(`{"resultType":"matrix","result":[
		{"metric":{"a":"1"},"values":[[1700000100,"1.5"],[1700000115.25,"NaN"],[1700000130,"+Inf"]]},
		{"metric":{},"histograms":[[1700000100,{"count":"3","sum":"2.5","buckets":[[0,"0.5","1","1"],[3,"-0.001","0.001","2"]]}]]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Type != "matrix" || len(res.Series) != 2 {
		t.Fatalf("%+v", res)
	}
	s := res.Series[0].Samples
	if len(s) != 3 || s[0].V != 1.5 || !math.IsNaN(s[1].V) || !math.IsInf(s[2].V, 1) {
		t.Errorf("samples %+v", s)
	}
	// 1700000115.25 s is 1700000115250 ms.
	if s[1].T.UnixMilli() != 1700000115250 {
		t.Errorf("time %v", s[1].T.UnixMilli())
	}
	h := res.Series[1].Histograms[0]
	if h.Count != 3 || h.Sum != 2.5 || len(h.Buckets) != 2 || h.Buckets[1] != (Bucket{Boundary: 3, Lower: -0.001, Upper: 0.001, Count: 2}) {
		t.Errorf("histogram %+v", h)
	}
}

func TestDecodeResultRejects(t *testing.T) {
	for _, c := range []struct{ in, contains string }{
		{`[]`, "data:"},
		{`{"resultType":"table","result":[]}`, `resultType "table"`},
		{`{"resultType":"matrix","result":{}}`, "matrix result"},
		{`{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}`, `series 0 sample 0: value: "x": not a number`},
		{`{"resultType":"matrix","result":[{"metric":{},"values":[[1]]}]}`, "1 members"},
		{`{"resultType":"matrix","result":[{"metric":{},"values":[["1","2"]]}]}`, "want Unix seconds"},
		{`{"resultType":"matrix","result":[{"metric":{},"values":[[1e300,"2"]]}]}`, "out of range"},
		{`{"resultType":"vector","result":[{"metric":{}}]}`, "want one of value or histogram"},
		{`{"resultType":"vector","result":[{"metric":{},"value":[1,"1"],"histogram":[1,{"count":"1","sum":"1"}]}]}`, "want one of value or histogram"},
		{`{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"1","sum":"1","buckets":[[7,"0","1","1"]]}]}]}`, "boundary 7"},
		{`{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"1","sum":"1","buckets":[[0,"0","1"]]}]}]}`, "3 members"},
		{`{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":1,"sum":"1"}]}]}`, "count"},
		{`{"resultType":"scalar","result":[1]}`, "scalar result"},
		{`{"resultType":"string","result":[1,2]}`, "string result value"},
	} {
		_, err := decodeResult(json.RawMessage(c.in))
		if err == nil || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("%s: error %v, want it to contain %q", c.in, err, c.contains)
		}
	}
}

func TestRenderLegend(t *testing.T) {
	l := map[string]string{"model_name": "llama", "instance": "gpu-0"}
	for _, c := range []struct{ format, want string }{
		{"", ""},
		{"__auto", ""},
		{"{{model_name}}", "llama"},
		{"{{ model_name }} @ {{instance}} p99", "llama @ gpu-0 p99"},
		{"{{missing}}x", "x"},
		{"{{", "{{"},
	} {
		if got := renderLegend(c.format, l); got != c.want {
			t.Errorf("renderLegend(%q) = %q, want %q", c.format, got, c.want)
		}
	}
}

func TestHeatmapRowsNeedsLe(t *testing.T) {
	res := &Result{Type: "matrix", Series: []Series{{Labels: map[string]string{"__name__": "x"}, Samples: []Sample{{T: time.Unix(0, 0), V: 1}}}}}
	if _, err := convertResult(res, &Query{Format: FormatHeatmap}); err == nil || !strings.Contains(err.Error(), "le label") {
		t.Errorf("error %v", err)
	}
	res.Series[0].Labels["le"] = "abc"
	if _, err := convertResult(res, &Query{Format: FormatHeatmap}); err == nil || !strings.Contains(err.Error(), `le="abc"`) {
		t.Errorf("error %v", err)
	}
}

// TestHeatmapRowsMissingPoints: buckets on different grids are joined on
// time, a missing point counts as 0, and a bucket below its predecessor
// (out-of-step counter reset) is clamped to 0 rather than going negative.
func TestHeatmapRowsMissingPoints(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	res := &Result{Type: "matrix", Series: []Series{
		{Labels: map[string]string{"le": "+Inf"}, Samples: []Sample{{at(0), 5}, {at(15), 6}}},
		{Labels: map[string]string{"le": "1"}, Samples: []Sample{{at(15), 7}}},
	}}
	fr, err := convertResult(res, &Query{Format: FormatHeatmap})
	if err != nil {
		t.Fatal(err)
	}
	f := fr[0]
	if f.Fields[1].Name != "1" || f.Fields[2].Name != "+Inf" {
		t.Fatalf("buckets not sorted by le: %s, %s", f.Fields[1].Name, f.Fields[2].Name)
	}
	// le=1: [0 (missing), 7]; +Inf − le=1: [5, max(6−7, 0) = 0].
	if got := floatsOf(t, f.Fields[1]); got[0] != 0 || got[1] != 7 {
		t.Errorf("le=1 %v", got)
	}
	if got := floatsOf(t, f.Fields[2]); got[0] != 5 || got[1] != 0 {
		t.Errorf("+Inf %v", got)
	}
}

// FuzzDecodeResult: no input makes the decoder or the frame conversion
// panic, and every frame built from a decoded result is rectangular.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{
		`{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[1,"1"],[2,"2"]]}]}`,
		`{"resultType":"matrix","result":[{"metric":{"le":"0.5"},"values":[[1,"1"]]},{"metric":{"le":"+Inf"},"values":[[1,"3"],[2,"4"]]}]}`,
		`{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"1","sum":"1","buckets":[[0,"0","1","1"]]}]}]}`,
		`{"resultType":"scalar","result":[1,"NaN"]}`,
		`{"resultType":"string","result":[1,"s"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := decodeResult(b)
		if err != nil {
			return
		}
		for _, format := range []string{FormatTimeSeries, FormatTable, FormatHeatmap} {
			frames, err := convertResult(res, &Query{Format: format, LegendFormat: "{{a}}"})
			if err != nil {
				continue
			}
			for _, fr := range frames {
				if _, err := fr.RowLen(); err != nil {
					t.Fatalf("format %s: frame is not rectangular: %v", format, err)
				}
			}
		}
	})
}

// FuzzFastSample: whenever the allocation-free sample parser accepts an
// input, the general decoder accepts it too and agrees on time and value.
func FuzzFastSample(f *testing.F) {
	for _, s := range []string{`[1700000100,"1"]`, `[1700000100.123,"-Inf"]`, `[1,"NaN"]`, `[1e3,"0x1p-2"]`, `[1,"1_0"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := fastSample(b)
		if !ok {
			return
		}
		var pair []json.RawMessage
		if err := json.Unmarshal(b, &pair); err != nil || len(pair) != 2 {
			t.Fatalf("fast path accepted %q, which is not a JSON pair", b)
		}
		ts, err := decodeTime(pair[0])
		if err != nil {
			t.Fatalf("fast path accepted time in %q: %v", b, err)
		}
		v, err := decodeFloatString(pair[1])
		if err != nil {
			t.Fatalf("fast path accepted value in %q: %v", b, err)
		}
		if !ts.Equal(fast.T) || !(v == fast.V || (math.IsNaN(v) && math.IsNaN(fast.V))) {
			t.Fatalf("%q: fast %v %v, general %v %v", b, fast.T, fast.V, ts, v)
		}
	})
}
