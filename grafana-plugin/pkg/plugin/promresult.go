package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"
)

// Result is a decoded Prometheus query result (the envelope's data).
type Result struct {
	// Type is matrix, vector, scalar or string.
	Type   string
	Series []Series
	// Scalar holds the scalar or string result's point.
	Scalar Sample
	String string
}

// Series is one series of a matrix or one element of a vector. A vector
// element has exactly one Sample or one HistogramSample.
type Series struct {
	Labels     map[string]string
	Samples    []Sample
	Histograms []HistogramSample
}

// Sample is one float point.
type Sample struct {
	T time.Time
	V float64
}

// HistogramSample is one native-histogram point in the API's rendering:
// buckets with explicit boundaries.
type HistogramSample struct {
	T       time.Time
	Count   float64
	Sum     float64
	Buckets []Bucket
}

// Bucket is one native-histogram bucket. Boundary says which ends are
// inclusive, as the API encodes it: 0 (lower, upper], 1 [lower, upper),
// 2 (lower, upper), 3 [lower, upper].
type Bucket struct {
	Boundary     int
	Lower, Upper float64
	Count        float64
}

// decodeResult parses the data member of a /api/v1/query or query_range
// answer. It rejects anything that is not a well-formed result, naming the
// offending member.
func decodeResult(raw json.RawMessage) (*Result, error) {
	var top struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	res := &Result{Type: top.ResultType}
	switch top.ResultType {
	case "matrix", "vector":
		var items []struct {
			Metric     map[string]string `json:"metric"`
			Values     []json.RawMessage `json:"values"`
			Histograms []json.RawMessage `json:"histograms"`
			Value      json.RawMessage   `json:"value"`
			Histogram  json.RawMessage   `json:"histogram"`
		}
		if err := json.Unmarshal(top.Result, &items); err != nil {
			return nil, fmt.Errorf("%s result: %w", top.ResultType, err)
		}
		res.Series = make([]Series, len(items))
		for i, it := range items {
			s := Series{Labels: it.Metric}
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			values, histograms := it.Values, it.Histograms
			if top.ResultType == "vector" {
				values, histograms = nil, nil
				if len(it.Value) > 0 && !isNull(it.Value) {
					values = []json.RawMessage{it.Value}
				}
				if len(it.Histogram) > 0 && !isNull(it.Histogram) {
					histograms = []json.RawMessage{it.Histogram}
				}
				if len(values)+len(histograms) != 1 {
					return nil, fmt.Errorf("vector element %d: want one of value or histogram", i)
				}
			}
			for j, v := range values {
				p, err := decodeSample(v)
				if err != nil {
					return nil, fmt.Errorf("series %d sample %d: %w", i, j, err)
				}
				s.Samples = append(s.Samples, p)
			}
			for j, h := range histograms {
				p, err := decodeHistogram(h)
				if err != nil {
					return nil, fmt.Errorf("series %d histogram %d: %w", i, j, err)
				}
				s.Histograms = append(s.Histograms, p)
			}
			res.Series[i] = s
		}
	case "scalar":
		p, err := decodeSample(top.Result)
		if err != nil {
			return nil, fmt.Errorf("scalar result: %w", err)
		}
		res.Scalar = p
	case "string":
		var pair [2]json.RawMessage
		if err := json.Unmarshal(top.Result, &pair); err != nil {
			return nil, fmt.Errorf("string result: %w", err)
		}
		t, err := decodeTime(pair[0])
		if err != nil {
			return nil, fmt.Errorf("string result: %w", err)
		}
		if err := json.Unmarshal(pair[1], &res.String); err != nil {
			return nil, fmt.Errorf("string result value: %w", err)
		}
		res.Scalar.T = t
	default:
		return nil, fmt.Errorf("resultType %q: want matrix, vector, scalar or string", top.ResultType)
	}
	return res, nil
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// decodeSample parses [unix_seconds, "value"].
func decodeSample(raw json.RawMessage) (Sample, error) {
	if s, ok := fastSample(raw); ok {
		return s, nil
	}
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil {
		return Sample{}, err
	}
	if len(pair) != 2 {
		return Sample{}, fmt.Errorf("sample has %d members, want [time, value]", len(pair))
	}
	t, err := decodeTime(pair[0])
	if err != nil {
		return Sample{}, err
	}
	v, err := decodeFloatString(pair[1])
	if err != nil {
		return Sample{}, fmt.Errorf("value: %w", err)
	}
	return Sample{T: t, V: v}, nil
}

// decodeHistogram parses [unix_seconds, {"count","sum","buckets"}].
func decodeHistogram(raw json.RawMessage) (HistogramSample, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil {
		return HistogramSample{}, err
	}
	if len(pair) != 2 {
		return HistogramSample{}, fmt.Errorf("histogram has %d members, want [time, histogram]", len(pair))
	}
	t, err := decodeTime(pair[0])
	if err != nil {
		return HistogramSample{}, err
	}
	var h struct {
		Count   json.RawMessage     `json:"count"`
		Sum     json.RawMessage     `json:"sum"`
		Buckets [][]json.RawMessage `json:"buckets"`
	}
	if err := json.Unmarshal(pair[1], &h); err != nil {
		return HistogramSample{}, err
	}
	out := HistogramSample{T: t}
	if out.Count, err = decodeFloatString(h.Count); err != nil {
		return out, fmt.Errorf("count: %w", err)
	}
	if out.Sum, err = decodeFloatString(h.Sum); err != nil {
		return out, fmt.Errorf("sum: %w", err)
	}
	for i, b := range h.Buckets {
		if len(b) != 4 {
			return out, fmt.Errorf("bucket %d has %d members, want [boundary, lower, upper, count]", i, len(b))
		}
		var bk Bucket
		if err := json.Unmarshal(b[0], &bk.Boundary); err != nil || bk.Boundary < 0 || bk.Boundary > 3 {
			return out, fmt.Errorf("bucket %d boundary %s: want 0..3", i, b[0])
		}
		if bk.Lower, err = decodeFloatString(b[1]); err != nil {
			return out, fmt.Errorf("bucket %d lower: %w", i, err)
		}
		if bk.Upper, err = decodeFloatString(b[2]); err != nil {
			return out, fmt.Errorf("bucket %d upper: %w", i, err)
		}
		if bk.Count, err = decodeFloatString(b[3]); err != nil {
			return out, fmt.Errorf("bucket %d count: %w", i, err)
		}
		out.Buckets = append(out.Buckets, bk)
	}
	return out, nil
}

// decodeTime parses Unix seconds as a JSON number, rounded to milliseconds
// (the API's resolution).
func decodeTime(raw json.RawMessage) (time.Time, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return time.Time{}, fmt.Errorf("time %s: want Unix seconds", truncate(string(raw), 40))
	}
	if math.IsNaN(f) || math.Abs(f) > 1e14 {
		return time.Time{}, fmt.Errorf("time %v out of range", f)
	}
	return time.UnixMilli(int64(math.Round(f * 1000))).UTC(), nil
}

// decodeFloatString parses a float the API renders as a JSON string
// ("1.5", "NaN", "+Inf").
func decodeFloatString(raw json.RawMessage) (float64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s: want a quoted number", truncate(string(raw), 40))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: not a number", s)
	}
	return f, nil
}

// fastSample parses the common rendering [1700000100.5,"1.25"] without
// allocating; anything else (spaces, escapes, errors) reports !ok and goes
// through the general decoder, which also produces the error messages.
func fastSample(b []byte) (Sample, bool) {
	if len(b) < 6 || b[0] != '[' || b[len(b)-1] != ']' || b[len(b)-2] != '"' {
		return Sample{}, false
	}
	comma := bytes.IndexByte(b, ',')
	if comma < 2 || comma+3 >= len(b) || b[comma+1] != '"' || !plainDecimal(b[1:comma]) {
		return Sample{}, false
	}
	ts, err := strconv.ParseFloat(unsafeString(b[1:comma]), 64)
	if err != nil || math.IsNaN(ts) || math.Abs(ts) > 1e14 {
		return Sample{}, false
	}
	val := b[comma+2 : len(b)-2]
	if bytes.IndexByte(val, '"') >= 0 || bytes.IndexByte(val, '\\') >= 0 {
		return Sample{}, false
	}
	v, err := strconv.ParseFloat(unsafeString(val), 64)
	if err != nil {
		return Sample{}, false
	}
	return Sample{T: time.UnixMilli(int64(math.Round(ts * 1000))).UTC(), V: v}, true
}

// plainDecimal reports whether b is a JSON number of the form 123 or
// 123.456 (no sign, exponent or leading zero), the only timestamps the fast
// path takes.
func plainDecimal(b []byte) bool {
	dot := false
	for i, c := range b {
		switch {
		case c == '.' && !dot && i > 0 && i < len(b)-1:
			dot = true
		case c >= '0' && c <= '9':
			if c == '0' && i == 0 && len(b) > 1 && b[1] != '.' {
				return false
			}
		default:
			return false
		}
	}
	return len(b) > 0
}

// unsafeString views b as a string for parsing; the result must not outlive b.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
