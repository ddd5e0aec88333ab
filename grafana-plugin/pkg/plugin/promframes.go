package plugin

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// Frame types the SDK has no constant for.
const (
	frameTypeHeatmapCells data.FrameType = "heatmap-cells"
	frameTypeHeatmapRows  data.FrameType = "heatmap-rows"
)

// convertResult turns a decoded result into frames:
//
//   - matrix, time_series: one timeseries-multi frame per float series
//     (Time, Value with the series' labels) and one heatmap-cells frame per
//     native-histogram series;
//   - vector, time_series: one numeric-multi frame per element;
//   - table (matrix or vector): one table frame, a row per sample, a column
//     per label name;
//   - heatmap: cumulative le buckets to one heatmap-rows frame per label set;
//   - scalar and string: one frame with Time and Value.
func convertResult(res *Result, q *Query) (data.Frames, error) {
	switch res.Type {
	case "scalar":
		f := data.NewFrame("", data.NewField("Time", nil, []time.Time{res.Scalar.T}), data.NewField("Value", nil, []float64{res.Scalar.V}))
		f.Meta = &data.FrameMeta{Type: data.FrameTypeNumericMulti, TypeVersion: data.FrameTypeVersion{0, 1}}
		setDisplayName(f.Fields[1], q, nil)
		return data.Frames{f}, nil
	case "string":
		f := data.NewFrame("", data.NewField("Time", nil, []time.Time{res.Scalar.T}), data.NewField("Value", nil, []string{res.String}))
		return data.Frames{f}, nil
	}
	switch q.Format {
	case FormatTable:
		return tableFrames(res.Series), nil
	case FormatHeatmap:
		if res.Type != "matrix" {
			return nil, badQuery("format heatmap needs a range query (got a %s result)", res.Type)
		}
		return heatmapRowFrames(res.Series, q)
	}
	var frames data.Frames
	for _, s := range res.Series {
		if len(s.Samples) > 0 || len(s.Histograms) == 0 {
			times := make([]time.Time, len(s.Samples))
			values := make([]float64, len(s.Samples))
			for i, p := range s.Samples {
				times[i], values[i] = p.T, p.V
			}
			v := data.NewField("Value", data.Labels(s.Labels), values)
			setDisplayName(v, q, s.Labels)
			f := data.NewFrame("", data.NewField("Time", nil, times), v)
			ft := data.FrameTypeTimeSeriesMulti
			if res.Type == "vector" {
				ft = data.FrameTypeNumericMulti
			}
			f.Meta = &data.FrameMeta{Type: ft, TypeVersion: data.FrameTypeVersion{0, 1}}
			frames = append(frames, f)
		}
		if len(s.Histograms) > 0 {
			frames = append(frames, histogramFrame(s, q))
		}
	}
	return frames, nil
}

// histogramFrame renders native-histogram points as heatmap cells: one row
// per (time, bucket) with the bucket's edges and count. The heatmap panel
// reads xMax as the cell's right edge in time.
func histogramFrame(s Series, q *Query) *data.Frame {
	var xs []time.Time
	var ymin, ymax, counts []float64
	for _, h := range s.Histograms {
		for _, b := range h.Buckets {
			xs = append(xs, h.T)
			ymin = append(ymin, b.Lower)
			ymax = append(ymax, b.Upper)
			counts = append(counts, b.Count)
		}
	}
	c := data.NewField("count", data.Labels(s.Labels), counts)
	setDisplayName(c, q, s.Labels)
	f := data.NewFrame("", data.NewField("xMax", nil, xs), data.NewField("yMin", nil, ymin), data.NewField("yMax", nil, ymax), c)
	f.Meta = &data.FrameMeta{Type: frameTypeHeatmapCells}
	return f
}

// tableFrames puts every float sample in one table: Time, one string column
// per label name (sorted; empty where a series lacks the label), Value.
// Native-histogram points become one row per bucket with le_lower, le_upper
// and the count as Value.
func tableFrames(series []Series) data.Frames {
	names := map[string]bool{}
	hasHist := false
	for _, s := range series {
		for k := range s.Labels {
			names[k] = true
		}
		hasHist = hasHist || len(s.Histograms) > 0
	}
	cols := slices.Sorted(maps.Keys(names))
	var times []time.Time
	var values, lower, upper []float64
	labelCols := make([][]string, len(cols))
	addRow := func(s Series, t time.Time, v, lo, hi float64) {
		times = append(times, t)
		values = append(values, v)
		lower = append(lower, lo)
		upper = append(upper, hi)
		for i, c := range cols {
			labelCols[i] = append(labelCols[i], s.Labels[c])
		}
	}
	for _, s := range series {
		for _, p := range s.Samples {
			addRow(s, p.T, p.V, math.NaN(), math.NaN())
		}
		for _, h := range s.Histograms {
			for _, b := range h.Buckets {
				addRow(s, h.T, b.Count, b.Lower, b.Upper)
			}
		}
	}
	if times == nil {
		times, values, lower, upper = []time.Time{}, []float64{}, []float64{}, []float64{}
	}
	f := data.NewFrame("", data.NewField("Time", nil, times))
	for i, c := range cols {
		if labelCols[i] == nil {
			labelCols[i] = []string{}
		}
		f.Fields = append(f.Fields, data.NewField(c, nil, labelCols[i]))
	}
	if hasHist {
		f.Fields = append(f.Fields, data.NewField("le_lower", nil, lower), data.NewField("le_upper", nil, upper))
	}
	f.Fields = append(f.Fields, data.NewField("Value", nil, values))
	f.Meta = &data.FrameMeta{Type: data.FrameTypeTable, PreferredVisualization: data.VisTypeTable}
	return data.Frames{f}
}

// heatmapRowFrames groups classic-histogram series (cumulative, one per le)
// by their other labels and de-accumulates them: field i holds the count in
// (le_{i-1}, le_i]. Series must share timestamps (a range query's grid); a
// missing point counts as zero. Negative differences (a bucket series that
// reset out of step) are clamped to zero.
func heatmapRowFrames(series []Series, q *Query) (data.Frames, error) {
	type group struct {
		labels  map[string]string
		buckets []Series
		les     []float64
	}
	groups := map[string]*group{}
	var order []string
	for _, s := range series {
		leStr, ok := s.Labels["le"]
		if !ok {
			return nil, badQuery("format heatmap needs every series to have an le label; %s has none", seriesName(s.Labels))
		}
		le, err := strconv.ParseFloat(leStr, 64)
		if err != nil {
			return nil, badQuery("format heatmap: le=%q is not a number", leStr)
		}
		rest := maps.Clone(s.Labels)
		delete(rest, "le")
		delete(rest, "__name__")
		key := seriesName(rest)
		g := groups[key]
		if g == nil {
			g = &group{labels: rest}
			groups[key] = g
			order = append(order, key)
		}
		g.buckets = append(g.buckets, s)
		g.les = append(g.les, le)
	}
	var frames data.Frames
	for _, key := range order {
		g := groups[key]
		idx := make([]int, len(g.les))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(g.les[a], g.les[b]) })
		tset := map[int64]bool{}
		for _, b := range g.buckets {
			for _, p := range b.Samples {
				tset[p.T.UnixMilli()] = true
			}
		}
		ts := slices.Sorted(maps.Keys(tset))
		pos := make(map[int64]int, len(ts))
		times := make([]time.Time, len(ts))
		for i, t := range ts {
			pos[t] = i
			times[i] = time.UnixMilli(t).UTC()
		}
		f := data.NewFrame("", data.NewField("Time", nil, times))
		prev := make([]float64, len(ts))
		for _, i := range idx {
			cum := make([]float64, len(ts))
			for _, p := range g.buckets[i].Samples {
				cum[pos[p.T.UnixMilli()]] = p.V
			}
			vals := make([]float64, len(ts))
			for j := range ts {
				vals[j] = max(cum[j]-prev[j], 0)
			}
			prev = cum
			name := strconv.FormatFloat(g.les[i], 'g', -1, 64)
			field := data.NewField(name, data.Labels(g.labels), vals)
			field.Config = &data.FieldConfig{DisplayNameFromDS: name}
			f.Fields = append(f.Fields, field)
		}
		f.Name = renderLegend(q.LegendFormat, g.labels)
		f.Meta = &data.FrameMeta{Type: frameTypeHeatmapRows}
		frames = append(frames, f)
	}
	return frames, nil
}

// setDisplayName applies the legend template. With no template, a series
// with no labels is named after the expression (otherwise Grafana would
// call it "Value"); labelled series keep Grafana's own naming.
func setDisplayName(f *data.Field, q *Query, labels map[string]string) {
	name := renderLegend(q.LegendFormat, labels)
	if name == "" && len(labels) == 0 {
		name = strings.TrimSpace(q.Expr)
	}
	if name != "" {
		f.Config = &data.FieldConfig{DisplayNameFromDS: name}
	}
}

var legendVar = regexp.MustCompile(`\{\{\s*([^{}\s]+)\s*\}\}`)

// renderLegend replaces {{label}} with the label's value ("" when absent),
// as Grafana's Prometheus datasource does. "__auto" and "" mean no template.
func renderLegend(format string, labels map[string]string) string {
	if format == "" || format == "__auto" {
		return ""
	}
	return legendVar.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendVar.FindStringSubmatch(m)[1]]
	})
}

// seriesName renders labels as name{a="x", b="y"} with sorted keys.
func seriesName(labels map[string]string) string {
	var b strings.Builder
	b.WriteString(labels["__name__"])
	keys := slices.Sorted(maps.Keys(labels))
	b.WriteByte('{')
	first := true
	for _, k := range keys {
		if k == "__name__" {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}
