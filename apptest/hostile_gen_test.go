package apptest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// gen is a body or parameter generator of the hostile corpus: cases name
// one and its arguments, so the corpus file stays small while its bodies
// are up to 256 MiB decoded.
type gen struct {
	Gen  string `json:"gen"`
	Args []any  `json:"args"`
}

var (
	genMu    sync.Mutex
	genCache = map[string][]byte{}
)

func (g gen) bytes(t *testing.T) []byte {
	t.Helper()
	key := fmt.Sprint(g.Gen, g.Args)
	genMu.Lock()
	defer genMu.Unlock()
	if b, ok := genCache[key]; ok {
		return b
	}
	b, err := g.build()
	if err != nil {
		t.Fatalf("generator %s%v: %v", g.Gen, g.Args, err)
	}
	genCache[key] = b
	return b
}

func (g gen) str(i int) string { return fmt.Sprint(g.Args[i]) }

func (g gen) num(i int) int {
	switch v := g.Args[i].(type) {
	case float64:
		return int(v)
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}

func (g gen) build() ([]byte, error) {
	switch g.Gen {
	case "text":
		return []byte(g.str(0)), nil
	case "repeat":
		return []byte(strings.Repeat(g.str(0), g.num(1)) + g.str(2)), nil
	case "wrap":
		n := g.num(2)
		return []byte(strings.Repeat(g.str(0), n) + g.str(3) + strings.Repeat(g.str(1), n)), nil
	case "nestedwith":
		var b strings.Builder
		b.WriteString("WITH (a0 = x")
		for i := 1; i <= g.num(0); i++ {
			fmt.Fprintf(&b, ", a%d = a%d + a%d", i, i-1, i-1)
		}
		fmt.Fprintf(&b, ") a%d", g.num(0))
		return []byte(b.String()), nil
	case "funcwith":
		n := g.num(0)
		return []byte("WITH (f(x) = x + x) " + strings.Repeat("f(", n) + "m" + strings.Repeat(")", n)), nil
	case "bytes":
		return bytes.Repeat([]byte{byte(g.num(1))}, g.num(0)), nil
	case "gziptrunc":
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(bytes.Repeat([]byte("hello hostile world "), 1000))
		_ = zw.Close()
		return b.Bytes()[:b.Len()/2], nil
	case "gzipzeros":
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		chunk := make([]byte, 1<<20)
		for range g.num(0) >> 20 {
			_, _ = zw.Write(chunk)
		}
		_ = zw.Close()
		return b.Bytes(), nil
	case "snappyzeros":
		return snappy.Encode(nil, make([]byte, g.num(0))), nil
	case "snappyclaim":
		// A snappy block whose header claims 4 GiB decoded.
		hdr := binary.AppendUvarint(nil, 4<<30)
		return append(hdr, 0x00, 'x'), nil
	case "rw1":
		return rw1(g.str(0))
	case "rw2":
		return rw2(g.str(0))
	case "otlp":
		return otlpBody(g.str(0))
	case "nestedjson":
		n := g.num(0)
		v := strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, n) + `{"stringValue":"x"}` + strings.Repeat(`}]}}`, n)
		return []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"nested","gauge":{"dataPoints":[{"timeUnixNano":"` +
			strconv.FormatInt(time.Now().UnixNano(), 10) + `","asDouble":1,"attributes":[{"key":"deep","value":` + v + `}]}]}}]}]}]}`), nil
	case "ndjson":
		return ndjson(g.str(0)), nil
	case "evidence":
		return evidenceBody(g.str(0)), nil
	}
	return nil, fmt.Errorf("unknown generator %q", g.Gen)
}

func rw1(kind string) ([]byte, error) {
	now := time.Now().UnixMilli()
	ls := []prompb.Label{{Name: "__name__", Value: "hostile"}, {Name: "kind", Value: kind}}
	samples := []prompb.Sample{{Timestamp: now, Value: 1}}
	var extra []prompb.TimeSeries
	switch kind {
	case "good":
	case "labels100001":
		for i := range 100001 {
			ls = append(ls, prompb.Label{Name: fmt.Sprintf("l%06d", i), Value: "v"})
		}
	case "value200k":
		ls = append(ls, prompb.Label{Name: "v", Value: strings.Repeat("x", 200<<10)})
	case "badutf8":
		ls = append(ls, prompb.Label{Name: "v", Value: "\xff\xfe"})
	case "conflict":
		extra = append(extra, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Timestamp: now, Value: 2}}})
	case "emptyname":
		ls = append(ls, prompb.Label{Name: "", Value: "x"})
	case "noname":
		ls = ls[1:]
	case "future":
		samples[0].Timestamp = now + time.Hour.Milliseconds()
	case "dupnames":
		ls = append(ls, prompb.Label{Name: "kind", Value: "again"})
	default:
		return nil, fmt.Errorf("rw1 kind %q", kind)
	}
	req := &prompb.WriteRequest{Timeseries: append([]prompb.TimeSeries{{Labels: ls, Samples: samples}}, extra...)}
	b, err := req.Marshal()
	if err != nil {
		return nil, err
	}
	return snappy.Encode(nil, b), nil
}

func rw2(kind string) ([]byte, error) {
	req := &writev2.Request{
		Symbols:    []string{"", "__name__", "hostile2", "kind", kind},
		Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Value: 1, Timestamp: time.Now().UnixMilli()}}}},
	}
	switch kind {
	case "good":
	case "badrefs":
		req.Timeseries[0].LabelsRefs = []uint32{1, 2, 3, 99}
	default:
		return nil, fmt.Errorf("rw2 kind %q", kind)
	}
	b, err := req.Marshal()
	if err != nil {
		return nil, err
	}
	return snappy.Encode(nil, b), nil
}

func otlpBody(kind string) ([]byte, error) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "hostile")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("hostile_otlp_" + kind)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	dp.SetDoubleValue(1)
	many := func() map[string]any {
		raw := make(map[string]any, 100001)
		for i := range 100001 {
			raw["l"+strconv.Itoa(i)] = "v"
		}
		return raw
	}
	switch kind {
	case "labels100001":
		if err := dp.Attributes().FromRaw(many()); err != nil {
			return nil, err
		}
	case "resource100001":
		if err := rm.Resource().Attributes().FromRaw(many()); err != nil {
			return nil, err
		}
	case "value200k":
		dp.Attributes().PutStr("v", strings.Repeat("x", 200<<10))
	case "badutf8":
		dp.Attributes().PutStr("v", "\xff\xfe")
	case "longname":
		m.SetName(strings.Repeat("n", 10000))
	default:
		return nil, fmt.Errorf("otlp kind %q", kind)
	}
	return pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
}

func ndjson(kind string) []byte {
	now := float64(time.Now().Unix())
	line := func(labels map[string]string, arrival any) string {
		l, _ := json.Marshal(labels)
		return fmt.Sprintf(`{"request_id":"h","labels":%s,"arrival":%v,"finished":%v}`, l, arrival, now+1)
	}
	switch kind {
	case "labels100":
		ls := map[string]string{}
		for i := range 100 {
			ls["l"+strconv.Itoa(i)] = "v"
		}
		return []byte(line(ls, now))
	case "value200k":
		return []byte(line(map[string]string{"model_name": strings.Repeat("x", 200<<10)}, now))
	case "time1e300":
		return []byte(line(nil, "1e300"))
	case "lines100001":
		return bytes.Repeat([]byte(line(map[string]string{"model_name": "m"}, now)+"\n"), 100001)
	case "deepjson":
		return []byte(`{"request_id":"h","labels":` + strings.Repeat(`{"a":`, 100000) + `1` + strings.Repeat(`}`, 100000) + `}`)
	case "longline":
		return []byte(`{"request_id":"` + strings.Repeat("x", 20<<20) + `"}`)
	}
	return nil
}

func evidenceBody(kind string) []byte {
	switch kind {
	case "hugestring":
		return []byte(`{"node":"n","evidence":[{"kind":"stack","time":"` + time.Now().UTC().Format(time.RFC3339) + `","node":"n","pid":1,"comm":"` + strings.Repeat("c", 1<<20) + `","probe":"offcpu","start":"` + time.Now().UTC().Format(time.RFC3339) + `","latency":0.1,"frames":[]}]}`)
	case "toomanyitems":
		item := `{"kind":"stack","time":"` + time.Now().UTC().Format(time.RFC3339) + `","node":"n","pid":1,"comm":"c","probe":"offcpu","start":"` + time.Now().UTC().Format(time.RFC3339) + `","latency":0.1,"frames":[]}`
		return []byte(`{"node":"n","evidence":[` + strings.TrimSuffix(strings.Repeat(item+",", 20000), ",") + `]}`)
	case "deepjson":
		return []byte(`{"node":"n","evidence":[` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `]}`)
	}
	return nil
}
