package causalfn

import (
	"math"
	"strings"

	"github.com/tailroot/tailroot/attribution/rca"
)

// Summary is what a ranking says per candidate and per graph node, for
// the rootcause endpoint's answer and the plugin's node graph.
type Summary struct {
	// Stage maps a candidate to the canonical stage it acts on in this
	// incident (rca.Graph.StageOf with the scores of its group), "" if none.
	Stage map[string]string
	// Nodes: the target (ID "target"), then every graph node with the
	// score of its representative candidate (NaN without one) and how many
	// candidates map to it. Edges: the graph's edges weighted by |Pearson
	// r| between the representatives of their ends (NaN when missing or
	// constant), then the target node's edge into the target (weight 1).
	Nodes []SummaryNode
	Edges []SummaryEdge
}

// SummaryNode is one node of Summary.
type SummaryNode struct {
	ID, Title, Family string
	Score             float64
	Candidates        int
}

// SummaryEdge is one edge of Summary.
type SummaryEdge struct {
	Source, Target string
	Weight         float64
}

// GroupKey returns a ranked candidate's group: its host (rca.Join) when
// labels is nil, else the values of labels.
func GroupKey(labelNames []string) func(*rca.Ranked) string {
	return func(r *rca.Ranked) string {
		if labelNames == nil {
			return r.Join.Host
		}
		var b strings.Builder
		for _, g := range labelNames {
			b.WriteString(r.Labels[g])
			b.WriteByte(0)
		}
		return b.String()
	}
}

// Summarize builds the Summary of res over graph g (nil = the serving
// graph). A node's representative is its highest-scoring candidate in the
// group of the first-ranked candidate, else in any group. targetFamily is
// the target's metric family (FamilyOf), which names its node.
func Summarize(res *RootCauseResult, g *rca.Graph, group func(*rca.Ranked) string, targetFamily string) Summary {
	if g == nil {
		g = rca.ServingGraph()
	}
	values := map[string][]float64{}
	for _, c := range res.Candidates {
		values[c.Name] = c.Values
	}
	// best[node][group] is the highest-scoring candidate of node in group.
	best := map[string]map[string]*rca.Ranked{}
	for i := range res.Ranking {
		r := &res.Ranking[i]
		if r.Node == "" {
			continue
		}
		if best[r.Node] == nil {
			best[r.Node] = map[string]*rca.Ranked{}
		}
		if b := best[r.Node][group(r)]; b == nil || r.Score > b.Score {
			best[r.Node][group(r)] = r
		}
	}
	s := Summary{Stage: map[string]string{}}
	for i := range res.Ranking {
		r := &res.Ranking[i]
		s.Stage[r.Name] = g.StageOf(r.Node, func(node string) float64 {
			if x := best[node][group(r)]; x != nil {
				return x.Score
			}
			return math.Inf(-1)
		})
	}
	topGroup := ""
	if len(res.Ranking) > 0 {
		topGroup = group(&res.Ranking[0])
	}
	rep := func(node string) *rca.Ranked {
		if r := best[node][topGroup]; r != nil {
			return r
		}
		var out *rca.Ranked
		for _, r := range best[node] {
			if out == nil || r.Score > out.Score {
				out = r
			}
		}
		return out
	}
	counts := map[string]int{}
	for _, c := range res.Ranking {
		counts[c.Node]++
	}
	s.Nodes = append(s.Nodes, SummaryNode{ID: "target", Title: res.Target.Name, Family: "target", Score: math.NaN()})
	for _, n := range g.Nodes {
		score := math.NaN()
		if r := rep(n.Name); r != nil {
			score = r.Score
		}
		s.Nodes = append(s.Nodes, SummaryNode{ID: n.Name, Title: n.Title, Family: n.Family, Score: score, Candidates: counts[n.Name]})
	}
	for _, e := range g.Edges {
		w := math.NaN()
		if a, b := rep(e.From), rep(e.To); a != nil && b != nil {
			if r, ok := rca.Correlation(values[a.Name], values[b.Name]); ok {
				w = math.Abs(r)
			}
		}
		s.Edges = append(s.Edges, SummaryEdge{Source: e.From, Target: e.To, Weight: w})
	}
	if n, ok := rca.NodeFor(targetFamily, nil); ok {
		s.Edges = append(s.Edges, SummaryEdge{Source: n, Target: "target", Weight: 1})
	}
	return s
}
