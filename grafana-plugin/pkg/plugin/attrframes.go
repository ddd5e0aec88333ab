package plugin

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// BreakdownResponse is /api/v1/attribution/breakdown's data (CONTRACT.md).
type BreakdownResponse struct {
	Method          string `json:"method"`
	Kind            string `json:"kind"`
	Quantile        Number `json:"quantile"`
	QuantileSeconds Number `json:"quantile_seconds"`
	TargetSeconds   Number `json:"target_seconds"`
	ResidualSeconds Number `json:"residual_seconds"`
	Window          struct {
		Start Number `json:"start"`
		End   Number `json:"end"`
	} `json:"window"`
	Requests Number              `json:"requests"`
	Stages   []StageContribution `json:"stages"`
	Heat     *HeatTable          `json:"heat"`
	Tokens   *TokenHeatmap       `json:"tokens"`
}

// StageContribution is one stage's part of the breakdown target.
type StageContribution struct {
	Stage               string `json:"stage"`
	ContributionSeconds Number `json:"contribution_seconds"`
	Share               Number `json:"share"`
	LowerSeconds        Number `json:"lower_seconds"`
	UpperSeconds        Number `json:"upper_seconds"`
}

// HeatTable is latency bands × stages.
type HeatTable struct {
	Stages []string  `json:"stages"`
	Rows   []HeatRow `json:"rows"`
}

// HeatRow is one latency band of a heat table.
type HeatRow struct {
	Band        string   `json:"band"`
	FromSeconds Number   `json:"from_seconds"`
	ToSeconds   Number   `json:"to_seconds"`
	Requests    Number   `json:"requests"`
	MeanSeconds Number   `json:"mean_seconds"`
	StageMeans  []Number `json:"stage_means"`
	TopStage    string   `json:"top_stage"`
	TopShare    Number   `json:"top_share"`
	TopFactor   string   `json:"top_factor"`
}

// TokenHeatmap counts tokens by output position × inter-token latency.
type TokenHeatmap struct {
	PositionEdges []float64   `json:"position_edges"`
	LatencyEdges  []float64   `json:"latency_edges"`
	Counts        [][]float64 `json:"counts"`
}

// validKinds are the provenance kinds a number may carry.
var validKinds = map[string]bool{"exact": true, "estimate": true, "bound": true}

// breakdownFrames renders a breakdown in the requested view. The stages
// view is one wide frame — a string "quantity" column and one column per
// stage — which Grafana's bar chart stacks into a single bar that adds up to
// the target; method and kind travel in meta.custom and in a notice, so a
// number is never shown without its provenance.
func breakdownFrames(b *BreakdownResponse, view string) (data.Frames, error) {
	if !validKinds[b.Kind] {
		return nil, fmt.Errorf("kind %q: want exact, estimate or bound", b.Kind)
	}
	if b.Method == "" {
		return nil, errors.New("method is empty")
	}
	notice := data.Notice{Severity: data.NoticeSeverityInfo, Text: fmt.Sprintf("method %s (%s)", b.Method, b.Kind)}
	if b.Requests.Valid {
		notice.Text += fmt.Sprintf(", %s requests", strconv.FormatFloat(b.Requests.V, 'f', -1, 64))
	}
	custom := map[string]any{
		"method": b.Method, "kind": b.Kind,
		"quantile": b.Quantile.ptr(), "quantileSeconds": b.QuantileSeconds.ptr(),
		"targetSeconds": b.TargetSeconds.ptr(), "residualSeconds": b.ResidualSeconds.ptr(),
		"requests": b.Requests.ptr(), "windowStart": b.Window.Start.ptr(), "windowEnd": b.Window.End.ptr(),
	}
	var f *data.Frame
	switch view {
	case "", ViewStages:
		label := b.Method
		if b.Quantile.Valid {
			label = fmt.Sprintf("P%s %s", strconv.FormatFloat(b.Quantile.V*100, 'g', 6, 64), b.Method)
		}
		f = data.NewFrame("breakdown", data.NewField("quantity", nil, []string{label}))
		shares := map[string]*float64{}
		seen := map[string]bool{}
		for i, s := range b.Stages {
			if s.Stage == "" {
				return nil, fmt.Errorf("stages[%d]: stage name is empty", i)
			}
			if seen[s.Stage] {
				return nil, fmt.Errorf("stages[%d]: stage %q repeated", i, s.Stage)
			}
			seen[s.Stage] = true
			field := data.NewField(s.Stage, nil, []*float64{s.ContributionSeconds.ptr()})
			field.Config = &data.FieldConfig{Unit: "s"}
			f.Fields = append(f.Fields, field)
			shares[s.Stage] = s.Share.ptr()
		}
		if b.ResidualSeconds.Valid && b.ResidualSeconds.V != 0 && !seen["residual"] {
			field := data.NewField("residual", nil, []*float64{b.ResidualSeconds.ptr()})
			field.Config = &data.FieldConfig{Unit: "s"}
			f.Fields = append(f.Fields, field)
		}
		custom["shares"] = shares
	case ViewHeat:
		if b.Heat == nil {
			return nil, errors.New("view heat: answer has no heat member")
		}
		var err error
		if f, err = heatFrame(b.Heat); err != nil {
			return nil, err
		}
	case ViewTokens:
		if b.Tokens == nil {
			return nil, errors.New("view tokens: answer has no tokens member")
		}
		var err error
		if f, err = tokenFrame(b.Tokens); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("view %q unknown", view)
	}
	if f.Meta == nil {
		f.Meta = &data.FrameMeta{}
	}
	f.Meta.Custom = custom
	f.Meta.Notices = append(f.Meta.Notices, notice)
	return data.Frames{f}, nil
}

// heatFrame is one table row per latency band.
func heatFrame(h *HeatTable) (*data.Frame, error) {
	n := len(h.Rows)
	band := make([]string, n)
	from, to, reqs, mean, share := make([]*float64, n), make([]*float64, n), make([]*float64, n), make([]*float64, n), make([]*float64, n)
	top, factor := make([]string, n), make([]string, n)
	stageMeans := make([][]*float64, len(h.Stages))
	for j := range stageMeans {
		stageMeans[j] = make([]*float64, n)
	}
	for i, r := range h.Rows {
		if len(r.StageMeans) != len(h.Stages) {
			return nil, fmt.Errorf("heat rows[%d]: %d stage_means for %d stages", i, len(r.StageMeans), len(h.Stages))
		}
		band[i], top[i], factor[i] = r.Band, r.TopStage, r.TopFactor
		from[i], to[i], reqs[i], mean[i], share[i] = r.FromSeconds.ptr(), r.ToSeconds.ptr(), r.Requests.ptr(), r.MeanSeconds.ptr(), r.TopShare.ptr()
		for j, m := range r.StageMeans {
			stageMeans[j][i] = m.ptr()
		}
	}
	sec := func(f *data.Field) *data.Field { f.Config = &data.FieldConfig{Unit: "s"}; return f }
	shareField := data.NewField("top share", nil, share)
	shareField.Config = &data.FieldConfig{Unit: "percentunit"}
	f := data.NewFrame("heat",
		data.NewField("band", nil, band),
		sec(data.NewField("from", nil, from)),
		sec(data.NewField("to", nil, to)),
		data.NewField("requests", nil, reqs),
		sec(data.NewField("mean", nil, mean)),
		data.NewField("top stage", nil, top),
		shareField,
		data.NewField("top factor", nil, factor),
	)
	for j, s := range h.Stages {
		f.Fields = append(f.Fields, sec(data.NewField("mean "+s, nil, stageMeans[j])))
	}
	f.Meta = &data.FrameMeta{Type: data.FrameTypeTable, PreferredVisualization: data.VisTypeTable}
	return f, nil
}

// tokenFrame renders the position × latency grid as heatmap cells, one row
// per cell: xMin/xMax are token positions, yMin/yMax latency in seconds.
func tokenFrame(t *TokenHeatmap) (*data.Frame, error) {
	np, nl := len(t.PositionEdges)-1, len(t.LatencyEdges)-1
	if np < 1 || nl < 1 {
		return nil, fmt.Errorf("tokens: need at least 2 position_edges and 2 latency_edges, got %d and %d", np+1, nl+1)
	}
	if !increasing(t.PositionEdges) || !increasing(t.LatencyEdges) {
		return nil, errors.New("tokens: edges must be finite and strictly increasing")
	}
	if len(t.Counts) != np {
		return nil, fmt.Errorf("tokens: %d count rows for %d position buckets", len(t.Counts), np)
	}
	var xmin, xmax, ymin, ymax, count []float64
	for i, row := range t.Counts {
		if len(row) != nl {
			return nil, fmt.Errorf("tokens: counts[%d] has %d cells for %d latency buckets", i, len(row), nl)
		}
		for j, c := range row {
			xmin = append(xmin, t.PositionEdges[i])
			xmax = append(xmax, t.PositionEdges[i+1])
			ymin = append(ymin, t.LatencyEdges[j])
			ymax = append(ymax, t.LatencyEdges[j+1])
			count = append(count, c)
		}
	}
	yminF, ymaxF := data.NewField("yMin", nil, ymin), data.NewField("yMax", nil, ymax)
	yminF.Config = &data.FieldConfig{Unit: "s"}
	ymaxF.Config = &data.FieldConfig{Unit: "s"}
	f := data.NewFrame("tokens",
		data.NewField("xMin", nil, xmin), data.NewField("xMax", nil, xmax),
		yminF, ymaxF, data.NewField("count", nil, count))
	f.Meta = &data.FrameMeta{Type: frameTypeHeatmapCells}
	return f, nil
}

func increasing(xs []float64) bool {
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) || (i > 0 && x <= xs[i-1]) {
			return false
		}
	}
	return true
}

// RootCauseResponse is /api/v1/attribution/rootcause's data.
type RootCauseResponse struct {
	ChangeAt Number        `json:"change_at"`
	Ranking  []RankedCause `json:"ranking"`
	Graph    *CausalGraph  `json:"graph"`
}

// RankedCause is one candidate of a root-cause ranking.
type RankedCause struct {
	Candidate string `json:"candidate"`
	Score     Number `json:"score"`
	PAdjusted Number `json:"p_adjusted"`
	Lag       Number `json:"lag"`
	Stage     string `json:"stage"`
}

// CausalGraph is the serving graph with the causes found on it.
type CausalGraph struct {
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
}

// GraphNode is one node: a stage, a kernel/GPU/serving factor or the target.
type GraphNode struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Kind  string `json:"kind"`
	Score Number `json:"score"`
}

// GraphEdge points from cause to effect.
type GraphEdge struct {
	Source    string `json:"source"`
	Target    string `json:"target"`
	Weight    Number `json:"weight"`
	Lag       Number `json:"lag"`
	PAdjusted Number `json:"p_adjusted"`
}

// nodeKinds are the node kinds, in the order of their arc fields, with the
// colour each kind's arc gets in the Node Graph panel.
var nodeKinds = []struct{ kind, color string }{
	{"target", "red"}, {"stage", "blue"}, {"kernel", "orange"}, {"gpu", "green"}, {"serving", "purple"},
}

// rootCauseFrames renders the ranking as a table, or the graph as the
// nodes/edges frame pair Grafana's Node Graph panel reads (field names id,
// title, subtitle, mainstat, arc__*; id, source, target, mainstat,
// secondarystat, detail__*).
func rootCauseFrames(r *RootCauseResponse, view string) (data.Frames, error) {
	if view == ViewGraph {
		if r.Graph == nil {
			return nil, errors.New("view graph: answer has no graph member")
		}
		return graphFrames(r.Graph)
	}
	n := len(r.Ranking)
	rank := make([]int64, n)
	cand, stage := make([]string, n), make([]string, n)
	score, padj, lag := make([]*float64, n), make([]*float64, n), make([]*float64, n)
	for i, c := range r.Ranking {
		if c.Candidate == "" {
			return nil, fmt.Errorf("ranking[%d]: candidate is empty", i)
		}
		rank[i] = int64(i + 1)
		cand[i], stage[i] = c.Candidate, c.Stage
		score[i], padj[i], lag[i] = c.Score.ptr(), c.PAdjusted.ptr(), c.Lag.ptr()
	}
	f := data.NewFrame("rootcause",
		data.NewField("rank", nil, rank),
		data.NewField("candidate", nil, cand),
		data.NewField("score", nil, score),
		data.NewField("p_adjusted", nil, padj),
		data.NewField("lag", nil, lag),
		data.NewField("stage", nil, stage),
	)
	f.Meta = &data.FrameMeta{Type: data.FrameTypeTable, PreferredVisualization: data.VisTypeTable}
	if r.ChangeAt.Valid {
		f.Meta.Custom = map[string]any{"changeAt": r.ChangeAt.V}
		f.Meta.Notices = []data.Notice{{Severity: data.NoticeSeverityInfo, Text: "change point at " + unixTime(r.ChangeAt.V).Format(time.RFC3339)}}
	}
	return data.Frames{f}, nil
}

func graphFrames(g *CausalGraph) (data.Frames, error) {
	n := len(g.Nodes)
	ids, titles, subtitles := make([]string, n), make([]string, n), make([]string, n)
	mainstat := make([]*float64, n)
	arcs := make([][]float64, len(nodeKinds))
	for k := range arcs {
		arcs[k] = make([]float64, n)
	}
	known := map[string]bool{}
	for i, nd := range g.Nodes {
		if nd.ID == "" {
			return nil, fmt.Errorf("graph nodes[%d]: id is empty", i)
		}
		if known[nd.ID] {
			return nil, fmt.Errorf("graph nodes[%d]: id %q repeated", i, nd.ID)
		}
		known[nd.ID] = true
		ids[i], titles[i], subtitles[i], mainstat[i] = nd.ID, nd.Title, nd.Kind, nd.Score.ptr()
		if titles[i] == "" {
			titles[i] = nd.ID
		}
		for k, nk := range nodeKinds {
			if nk.kind == nd.Kind {
				arcs[k][i] = 1
			}
		}
	}
	main := data.NewField("mainstat", nil, mainstat)
	main.Config = &data.FieldConfig{DisplayName: "score"}
	nodes := data.NewFrame("nodes",
		data.NewField("id", nil, ids), data.NewField("title", nil, titles),
		data.NewField("subtitle", nil, subtitles), main)
	for k, nk := range nodeKinds {
		a := data.NewField("arc__"+nk.kind, nil, arcs[k])
		a.Config = &data.FieldConfig{DisplayName: nk.kind, Color: map[string]any{"mode": "fixed", "fixedColor": nk.color}}
		nodes.Fields = append(nodes.Fields, a)
	}
	nodes.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeNodeGraph}

	m := len(g.Edges)
	eid, src, dst := make([]string, m), make([]string, m), make([]string, m)
	weight, lag, padj := make([]*float64, m), make([]*float64, m), make([]*float64, m)
	for i, e := range g.Edges {
		if !known[e.Source] || !known[e.Target] {
			return nil, fmt.Errorf("graph edges[%d]: %q -> %q names a node that is not in nodes", i, e.Source, e.Target)
		}
		eid[i], src[i], dst[i] = e.Source+"->"+e.Target, e.Source, e.Target
		weight[i], lag[i], padj[i] = e.Weight.ptr(), e.Lag.ptr(), e.PAdjusted.ptr()
	}
	w := data.NewField("mainstat", nil, weight)
	w.Config = &data.FieldConfig{DisplayName: "weight"}
	l := data.NewField("secondarystat", nil, lag)
	l.Config = &data.FieldConfig{DisplayName: "lag (steps)"}
	p := data.NewField("detail__p_adjusted", nil, padj)
	p.Config = &data.FieldConfig{DisplayName: "p adjusted"}
	edges := data.NewFrame("edges", data.NewField("id", nil, eid), data.NewField("source", nil, src), data.NewField("target", nil, dst), w, l, p)
	edges.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeNodeGraph}
	return data.Frames{nodes, edges}, nil
}

// CausalResponse is /api/v1/attribution/causal's data.
type CausalResponse struct {
	Method         string          `json:"method"`
	Effect         Number          `json:"effect"`
	Lower          Number          `json:"lower"`
	Upper          Number          `json:"upper"`
	Level          Number          `json:"level"`
	P              Number          `json:"p"`
	Lag            Number          `json:"lag"`
	N              Number          `json:"n"`
	Counterfactual *Counterfactual `json:"counterfactual"`
}

// Counterfactual is the outcome as observed and had the treatment stayed at
// its baseline.
type Counterfactual struct {
	Timestamps     []float64 `json:"timestamps"`
	Observed       []Number  `json:"observed"`
	Counterfactual []Number  `json:"counterfactual"`
}

func causalFrames(c *CausalResponse) (data.Frames, error) {
	if !c.Effect.Valid {
		return nil, errors.New("effect is missing")
	}
	f := data.NewFrame("causal",
		data.NewField("method", nil, []string{c.Method}),
		data.NewField("effect", nil, []*float64{c.Effect.ptr()}),
		data.NewField("lower", nil, []*float64{c.Lower.ptr()}),
		data.NewField("upper", nil, []*float64{c.Upper.ptr()}),
		data.NewField("level", nil, []*float64{c.Level.ptr()}),
		data.NewField("p", nil, []*float64{c.P.ptr()}),
		data.NewField("lag", nil, []*float64{c.Lag.ptr()}),
		data.NewField("n", nil, []*float64{c.N.ptr()}),
	)
	f.Meta = &data.FrameMeta{Type: data.FrameTypeTable, PreferredVisualization: data.VisTypeTable}
	frames := data.Frames{f}
	if cf := c.Counterfactual; cf != nil {
		n := len(cf.Timestamps)
		if len(cf.Observed) != n || len(cf.Counterfactual) != n {
			return nil, fmt.Errorf("counterfactual: %d timestamps, %d observed, %d counterfactual: lengths must match", n, len(cf.Observed), len(cf.Counterfactual))
		}
		ts := make([]time.Time, n)
		obs, cfv := make([]*float64, n), make([]*float64, n)
		for i := range n {
			ts[i] = unixTime(cf.Timestamps[i])
			obs[i], cfv[i] = cf.Observed[i].ptr(), cf.Counterfactual[i].ptr()
		}
		s := data.NewFrame("counterfactual", data.NewField("Time", nil, ts), data.NewField("observed", nil, obs), data.NewField("counterfactual", nil, cfv))
		s.Meta = &data.FrameMeta{Type: data.FrameTypeTimeSeriesWide, TypeVersion: data.FrameTypeVersion{0, 1}}
		frames = append(frames, s)
	}
	return frames, nil
}

// ABResponse is /api/v1/attribution/ab's data.
type ABResponse struct {
	Quantile  Number `json:"quantile"`
	A         Number `json:"a"`
	B         Number `json:"b"`
	Diff      Number `json:"diff"`
	Lower     Number `json:"lower"`
	Upper     Number `json:"upper"`
	Level     Number `json:"level"`
	Method    string `json:"method"`
	ARequests Number `json:"a_requests"`
	BRequests Number `json:"b_requests"`
}

func abFrames(a *ABResponse) data.Frames {
	sec := func(name string, n Number) *data.Field {
		f := data.NewField(name, nil, []*float64{n.ptr()})
		f.Config = &data.FieldConfig{Unit: "s"}
		return f
	}
	f := data.NewFrame("ab",
		data.NewField("quantile", nil, []*float64{a.Quantile.ptr()}),
		sec("a", a.A), sec("b", a.B), sec("diff", a.Diff), sec("lower", a.Lower), sec("upper", a.Upper),
		data.NewField("level", nil, []*float64{a.Level.ptr()}),
		data.NewField("method", nil, []string{a.Method}),
		data.NewField("a requests", nil, []*float64{a.ARequests.ptr()}),
		data.NewField("b requests", nil, []*float64{a.BRequests.ptr()}),
	)
	f.Meta = &data.FrameMeta{Type: data.FrameTypeTable, PreferredVisualization: data.VisTypeTable}
	return data.Frames{f}
}

// unixTime converts Unix seconds to a UTC time with millisecond precision.
func unixTime(s float64) time.Time { return time.UnixMilli(int64(math.Round(s * 1000))).UTC() }
