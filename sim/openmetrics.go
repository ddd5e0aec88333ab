package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// WriteOpenMetrics writes the incident's float series as OpenMetrics 1.0
// text with a timestamp on every sample — the input of
// `promtool tsdb create-blocks-from openmetrics`. Families appear in the
// order of Series; a histogram's points are written one timestamp at a time
// (buckets, _count, _sum), as the format requires. Native histogram series
// have no OpenMetrics 1.0 form and are left out.
func (inc *Incident) WriteOpenMetrics(w io.Writer) error {
	type metric struct {
		key    string
		series []int // indices into inc.Series: buckets in order, then _count, _sum
	}
	type fam struct {
		name    string
		s0      int // a series of the family, for its metadata
		metrics []*metric
		byKey   map[string]*metric
	}
	var fams []*fam
	byName := map[string]*fam{}
	for i, s := range inc.Series {
		if len(s.Samples) == 0 {
			continue
		}
		name := s.Labels.Get(model.MetricNameLabel)
		fn := familyName(name, s.Metadata)
		f := byName[fn]
		if f == nil {
			f = &fam{name: fn, s0: i, byKey: map[string]*metric{}}
			byName[fn] = f
			fams = append(fams, f)
		}
		k := s.Labels.DropReserved(func(n string) bool { return n == model.MetricNameLabel || n == labels.BucketLabel }).String()
		m := f.byKey[k]
		if m == nil {
			m = &metric{key: k}
			f.byKey[k] = m
			f.metrics = append(f.metrics, m)
		}
		m.series = append(m.series, i)
	}
	bw := bufio.NewWriter(w)
	line := make([]byte, 0, 256)
	for _, f := range fams {
		md := inc.Series[f.s0].Metadata
		fmt.Fprintf(bw, "# TYPE %s %s\n", f.name, omType(md.Type))
		if md.Unit != "" && strings.HasSuffix(f.name, "_"+md.Unit) {
			fmt.Fprintf(bw, "# UNIT %s %s\n", f.name, md.Unit)
		}
		if md.Help != "" {
			fmt.Fprintf(bw, "# HELP %s %s\n", f.name, escapeHelp(md.Help))
		}
		for _, m := range f.metrics {
			// One point at a time: a histogram's point is all its series at
			// one timestamp.
			for j := range inc.Times {
				for _, i := range m.series {
					s := &inc.Series[i]
					line = appendSample(line[:0], s.Labels, s.Samples[j])
					if _, err := bw.Write(line); err != nil {
						return fmt.Errorf("write openmetrics: %w", err)
					}
				}
			}
		}
	}
	if _, err := bw.WriteString("# EOF\n"); err != nil {
		return fmt.Errorf("write openmetrics: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write openmetrics: %w", err)
	}
	return nil
}

func omType(t model.MetricType) string {
	switch t {
	case model.MetricTypeCounter, model.MetricTypeGauge, model.MetricTypeHistogram:
		return string(t)
	}
	return "unknown"
}

// appendSample appends `name{labels} value timestamp\n`, the timestamp in
// seconds with millisecond precision.
func appendSample(b []byte, ls labels.Labels, x Sample) []byte {
	b = append(b, ls.Get(model.MetricNameLabel)...)
	first := true
	ls.Range(func(l labels.Label) {
		if l.Name == model.MetricNameLabel {
			return
		}
		if first {
			b = append(b, '{')
			first = false
		} else {
			b = append(b, ',')
		}
		b = append(b, l.Name...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, l.Value)
	})
	if !first {
		b = append(b, '}')
	}
	b = append(b, ' ')
	switch {
	case math.IsInf(x.V, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(x.V, -1):
		b = append(b, "-Inf"...)
	case math.IsNaN(x.V):
		b = append(b, "NaN"...)
	default:
		b = strconv.AppendFloat(b, x.V, 'g', -1, 64)
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, x.T/1000, 10)
	b = append(b, '.')
	ms := x.T % 1000
	if ms < 0 {
		ms = -ms
	}
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, '\n')
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}
