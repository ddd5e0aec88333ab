package plugin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/grafana/grafana-plugin-sdk-go/data"
)

var benchSink data.Frames

// BenchmarkDecodeConvertMatrix: a dashboard-sized range answer, 100 series
// × 240 points, decoded and turned into frames.
func BenchmarkDecodeConvertMatrix(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"resultType":"matrix","result":[`)
	for s := range 100 {
		if s > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"metric":{"__name__":"vllm:num_requests_running","instance":"gpu-%d"},"values":[`, s)
		for p := range 240 {
			if p > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `[%d,"%d.5"]`, 1700000100+15*p, p)
		}
		sb.WriteString(`]}`)
	}
	sb.WriteString(`]}`)
	raw := json.RawMessage(sb.String())
	q := &Query{LegendFormat: "{{instance}}"}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := decodeResult(raw)
		if err != nil {
			b.Fatal(err)
		}
		if benchSink, err = convertResult(res, q); err != nil {
			b.Fatal(err)
		}
	}
}
