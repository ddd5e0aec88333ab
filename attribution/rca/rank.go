package rca

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/tailroot/tailroot/attribution/causal"
)

// Candidate is one series that might be the root cause.
type Candidate struct {
	// Name identifies the candidate in results and errors, e.g.
	// `tailroot_runqueue_delay_seconds{instance="a:8000"}`.
	Name string
	// Metric is the metric name the node mapping reads (NodeFor); Labels
	// are the candidate's labels (the mapping's "node" and "stage" labels,
	// and the grouping labels of Options.GroupLabels).
	Metric string
	Labels map[string]string
	// Node, when set, is the candidate's graph node and overrides NodeFor.
	Node string
	// Values is sampled on the target's time grid.
	Values []float64
}

// Options configures Rank. Zero values select the documented defaults.
type Options struct {
	// ChangePoint > 0 is the first index of the anomalous window; 0 runs
	// BOCPD (Detect) on the target and takes its most likely change point
	// with at least MinBefore points before it (see ChangePoint).
	ChangePoint int
	Detect      causal.BOCPDOptions
	// MinBefore is the fewest points a detected change point leaves before
	// it: the healthy baseline every score is measured against. 0 =
	// max(8, n/5), so a two-hour window keeps at least 24 minutes of
	// baseline and an early blip cannot pass for the incident.
	MinBefore int
	// Graph is the causal graph; nil = ServingGraph().
	Graph *Graph
	// GroupLabels are the labels whose values must be equal for two
	// candidates to be linked by a graph edge (a node's metrics affect the
	// same server's stages, not another's). A candidate without any of them
	// links to every group. nil = {"instance"}; empty non-nil = link all.
	GroupLabels []string
	// MaxParents caps the parent series in one node's regression: those most
	// correlated with it before the change are kept. 0 = 6.
	MaxParents int
	// Alpha is the false discovery rate for the Benjamini–Hochberg step.
	// 0 = 0.05.
	Alpha float64
	// MinShift is the residual level shift, in units of the residual's
	// pre-change interquartile range, a candidate needs to count as
	// anomalous. 0 = 2.
	MinShift float64
	// ChangeMethod selects the change-point method when ChangePoint is 0
	// (see Onset and ChangeMethods). "" = MethodMeanShift (on ranks), the
	// most accurate on incidents with known onsets (docs/causal.md).
	ChangeMethod string
	// MaxLag is the largest lag, in steps, of the Granger test that asks
	// whether a candidate carries information about the target beyond the
	// change itself; the lag is chosen by AIC. 0 = 4 (one minute at 15 s,
	// the width of a rate(…[1m]) window).
	MaxLag int
	// LeadTolerance is how many steps after the upper end of the target's
	// 95 % change-time set a candidate's own change may come and still
	// count as "before or with" it (rate windows and scrape offsets smear
	// onsets). 0 = 4.
	LeadTolerance int
	// MinTargetZ and MinTargetChange decide whether the target changed at
	// all: its mean shift at the change point must have |z| ≥ MinTargetZ
	// (autocorrelation-corrected, see Change.Z) and move by at least
	// MinTargetChange of its mean before (when that is positive); else the
	// verdict is VerdictNoIncident. 0 = 3 (about the 95 % point of the
	// largest two-sample statistic over splits of pure noise in the middle
	// 60 % of the window) and 0.03.
	MinTargetZ, MinTargetChange float64
	// Direction is the target's harmful direction: a change the other way
	// is an improvement and answers VerdictNoIncident. "" = inferred from
	// the target's name (HarmfulDirection); DirectionBoth counts either.
	Direction Direction
	// TargetMetric is the metric whose series per group (GroupLabels, or
	// the joined host) are slices of an aggregate target, such as each
	// host's mean TTFT under the fleet's (slice.go). "" = the metric name
	// the target's name starts with, if it starts with one.
	TargetMetric string
	// HACLag is the Newey–West lag of the shift test; 0 = ⌈√n⌉, long enough
	// for the minutes-long autocorrelation of serving metrics at 15 s steps
	// (the usual 4(n/100)^(2/9) is 5 at n = 480 and overstates significance
	// there).
	HACLag int
}

// Ranked is one candidate's result.
type Ranked struct {
	Name, Metric string
	// Node is the graph node ("" when unmapped) and Family its
	// Benjamini–Hochberg family.
	Node, Family string
	Labels       map[string]string
	// Rank is 1 for the most likely root cause.
	Rank int
	// Score is the RHT score: the BARO robust score of the candidate's
	// residual after regressing it on its graph parents over the points
	// before the change point (see Rank). For a candidate without parent
	// series it equals BARO.
	Score float64
	// BARO is the plain robust score of the candidate itself
	// (causal.RobustScores).
	BARO float64
	// Shift is the sustained part of the residual r's change: the farther
	// of the lower and upper quartile of r after the change point from
	// median(r_before), over IQR(r_before). Unlike the median it still sees
	// a fault that covers only a quarter of the window after a change point
	// detected early.
	Shift float64
	// At is the index where Score is attained.
	At int
	// PValue tests "the residual's mean did not shift at the change point"
	// (OLS of r on a step, Newey–West errors, normal reference); QValue is
	// its Benjamini–Hochberg adjustment within Family.
	PValue, QValue float64
	// Anomalous is QValue ≤ Alpha and Shift ≥ MinShift, or a smaller
	// sustained step at the change (Shift ≥ 1, PValue ≤ Alpha/candidates,
	// its own split in the change-time set).
	Anomalous bool
	// Explained names an anomalous candidate upstream of this one in the
	// graph (same group), which explains its change; "" if none.
	Explained string
	// Parents are the parent series the regression used.
	Parents []string
	// Join is how the candidate was tied to a host for the graph's edges.
	Join Join
	// Onset is the candidate's own least-squares change point and Lead =
	// (the target's least-squares change point) − Onset the steps it moved
	// before the target (negative: after). Precedes is Onset ≤ (the upper
	// end of the target's 95 % change-time set) + LeadTolerance. Both are
	// computed for anomalous candidates only (Onset −1 otherwise).
	Onset, Lead int
	Precedes    bool
	// GrangerP is the p-value of the incremental-prediction F-test "the
	// candidate's present and past (x_t … x_{t−L}) do not help predict the
	// target beyond the target's own past and the step 1[t ≥ ChangePoint]"
	// (Granger's test with the instantaneous term, since rate windows make
	// cause and effect move in the same step), at the L in 0..MaxLag that
	// minimises AIC; GrangerLag is L. GrangerQ is its Benjamini–Hochberg
	// adjustment across the anomalous candidates (only they are tested).
	// NaN when untested or untestable (a candidate that only steps, or is
	// constant).
	GrangerP, GrangerQ float64
	GrangerLag         int
	// Informative is GrangerQ ≤ Alpha.
	Informative bool
	// Bypassed is true for an anomalous mapped candidate none of whose
	// first downstream stages (with candidates in its group) is anomalous.
	Bypassed bool
	// Reason says in words why the candidate ranks where it does.
	Reason string
}

// Result is a root-cause ranking.
type Result struct {
	// ChangePoint is the first index of the anomalous window and
	// ChangeProb BOCPD's probability for it (NaN when it was given or
	// another method found it).
	ChangePoint int
	ChangeProb  float64
	// Change is the target's change with its 95 % confidence set (Low =
	// High = ChangePoint when it was given).
	Change Change
	// Verdict is VerdictIncident, VerdictNoIncident (the target did not
	// change) or VerdictUnexplained (it changed, but no candidate that
	// moved before or with it carries information about it).
	Verdict string
	// VerdictReason says in words why the verdict is what it is (the
	// target's change, or that it improved) and Why says it in one of the
	// Why* codes (stable, for a label); Direction is the harmful
	// direction the verdict used.
	VerdictReason string
	Why           string
	Direction     Direction
	// Ranking holds every candidate, most likely root cause first.
	Ranking []Ranked
	// Baseline is plain BARO over the same candidates and change point.
	Baseline []causal.RobustScore
	Graph    *Graph
}

const minBefore = 8 // points a regression needs before the change point

// Verdicts.
const (
	VerdictIncident    = "incident"
	VerdictNoIncident  = "no incident"
	VerdictUnexplained = "unexplained"
)

// Why codes: the reason for a verdict in one word (Result.Why).
const (
	WhyChanged      = "changed"       // incident: the target changed clearly
	WhyCorroborated = "corroborated"  // incident: a weak change a root cause vouches for
	WhyImproved     = "improved"      // no incident: the change went the harmless way
	WhyNoChange     = "no change"     // no incident: |z| under MinTargetZ
	WhyTooSmall     = "too small"     // no incident: under MinTargetChange of the mean
	WhyWandered     = "wandered"      // no incident: neither the target nor its root cause stepped
	WhyLoadStep     = "load stepped"  // incident: a weak change after an arrival rate stepped clearly
	WhyNoCause      = "no cause"      // unexplained: no candidate passes the causal checks
	WhyNoCandidates = "no candidates" // unexplained: nothing to rank
)

// Rank ranks root-cause candidates for a change in target (for example a
// model's P99 or mean latency):
//
//  0. The harmful direction is Options.Direction, or HarmfulDirection of
//     the target's name.
//  1. The change point c is OnsetDirected's (Options.ChangeMethod, default
//     the least-squares split on ranks, among splits that move the harmful
//     way) unless Options.ChangePoint gives it.
//  2. Each candidate x is mapped to a graph node (NodeFor) and regressed, by
//     OLS over t < c, on the series of its node's graph parents in its
//     group (regression-based hypothesis testing, Li et al., "Causal
//     Inference-Based Root Cause Analysis for Online Service Systems with
//     Intervention Recognition", KDD 2022):
//     x_t = a + Σ_j b_j·p_{j,t} + r_t. The fit predicts x for every t and
//     r_t = x_t − x̂_t: a change of x that its parents explain leaves r
//     unchanged.
//  3. Score = max_{t ≥ c} |r_t − median(r_{<c})| / IQR(r_{<c}) (BARO's
//     robust score on the residual), Shift = max(|Q25(r_{≥c}) − m|,
//     |Q75(r_{≥c}) − m|) / IQR(r_{<c}) with m = median(r_{<c}), and a
//     Newey–West test of a mean shift of r at c gives a p-value, adjusted
//     by Benjamini–Hochberg within each node family.
//  4. A candidate is anomalous when QValue ≤ Alpha and Shift ≥ MinShift
//     (or the shift is a sustained step at the change, see sustained, or
//     a sustained move of a graph ancestor of an anomalous candidate;
//     for an arrival rate under a running batch that moved, at the
//     family's false discovery rate alone: littlesLaw),
//     and explained when an anomalous candidate sits upstream of it in the
//     graph (in its group): descendant adjustment. A fault enters the graph
//     somewhere and moves everything downstream; the regression cannot
//     always tell (a parent that never varied before the change teaches it
//     nothing, and queues grow nonlinearly), but the graph can.
//  5. Causal checks (checkCauses): Precedes (its own least-squares onset,
//     on values or, when that one is too late, on ranks (ownSplit), is no
//     later than the target's 95 % change-time set allows, or a
//     proposed change's set when Rank ranks at a candidate's proposal),
//     Informative (incremental-prediction F-test conditional on the step,
//     BH across candidates) and not Bypassed (a stage it acts on moved, by
//     a shift of MinShift IQR or a sustained step at the change). A
//     candidate passing them (an untestable mapped one passes on the
//     graph's word) can be a root cause; explanation prefers an upstream
//     candidate that passes.
//  6. Ranking: passing and not explained by a passing candidate first —
//     those that explain another anomalous candidate before those that
//     explain none (a decoy moves nothing downstream), each by Shift (a
//     fault moves its root cause for as long as it lasts; a noisy series
//     crosses the threshold by a little, and its one-point maximum says
//     less) — then passing and explained, then anomalous but failing,
//     then the rest, all but the first by Score; ties go upstream first
//     (graph level), then to input order. Each row gets a Reason.
//  7. Verdict: VerdictNoIncident when the target's change goes the
//     harmless way, or is under MinTargetZ or MinTargetChange and no root
//     cause that informs about the target (itself, or through an
//     informative anomaly it explains) corroborates it (see corroborates:
//     for an aggregate target, the move at the cause's split may show in
//     the target's slice on the cause's host instead, slice.go;
//     with ChangePoint 0, the change times of corroboratedOnsets are tried
//     too), or when neither the target nor its first root cause stepped
//     (stepped: load that wanders moves a latency without a step; an
//     arrival rate as first root cause steps when its split rises with
//     |z| ≥ 4), unless an arrival rate stepped clearly and the target
//     moved the harmful way after it and, ranked there, that rate is the
//     first root cause (loadstep.go: VerdictIncident, WhyLoadStep),
//     VerdictUnexplained when the first row does not pass the checks,
//     else VerdictIncident. VerdictReason says which.
//
// Candidates must be aligned with target (one value per target point).
// Errors wrap the causal package's sentinels: ErrNaN for a non-finite value,
// ErrLength for a misaligned candidate, ErrTooShort when fewer than 8
// points precede the change point or fewer than 3 follow it, ErrArgument
// for a candidate mapped to a node not in the graph.
func Rank(target causal.Series, cands []Candidate, opts Options) (*Result, error) {
	if opts.Direction == "" {
		opts.Direction = HarmfulDirection(target.Name, "", "")
	}
	if _, err := ParseDirection(string(opts.Direction)); err != nil {
		return nil, fmt.Errorf("rank: %w", err)
	}
	res, err := rank(target, cands, opts, nil)
	if err != nil || opts.ChangePoint > 0 || res.Verdict != VerdictNoIncident {
		return res, err
	}
	// The target's own split found nothing clear. A fault too mild to move
	// an aggregate target clearly still steps its root cause: try the
	// change times such steps point at (corroboratedOnsets), and keep the
	// ranking at one only if its first root cause vouches for it.
	for _, ch := range corroboratedOnsets(target, cands, opts, opts.Direction) {
		alt, err := rank(target, cands, opts, &ch)
		if err == nil && alt.Verdict == VerdictIncident {
			return alt, nil
		}
	}
	// Nor did a root cause vouch for it. A mild surge still steps the
	// arrival rate clearly (loadstep.go): try the times such steps point
	// at, and keep the ranking at one whose first root cause is that rate.
	if res.Why == WhyImproved {
		return res, nil
	}
	for _, ch := range loadSteps(target, cands, opts, opts.Direction) {
		alt, err := rank(target, cands, opts, &ch)
		if err == nil && alt.Verdict == VerdictIncident {
			return alt, nil
		}
	}
	return res, nil
}

// rank is Rank at the target's own change (given nil) or at given.
func rank(target causal.Series, cands []Candidate, opts Options, given *Change) (*Result, error) {
	g := opts.Graph
	if g == nil {
		g = ServingGraph()
	}
	groupLabels := opts.GroupLabels
	maxParents := opts.MaxParents
	if maxParents <= 0 {
		maxParents = 6
	}
	alpha := opts.Alpha
	if alpha <= 0 {
		alpha = 0.05
	}
	minShift := opts.MinShift
	if minShift <= 0 {
		minShift = 2
	}
	n := len(target.Values)
	if err := checkSeries(target, n); err != nil {
		return nil, fmt.Errorf("rank: target: %w", err)
	}
	series := make([]causal.Series, len(cands))
	for i, c := range cands {
		series[i] = causal.Series{Name: c.Name, Values: c.Values}
		if err := checkSeries(series[i], n); err != nil {
			return nil, fmt.Errorf("rank: candidate %d: %w", i, err)
		}
	}
	dir := opts.Direction
	if dir == "" {
		dir = DirectionBoth
	}
	res := &Result{Graph: g, ChangePoint: opts.ChangePoint, ChangeProb: math.NaN(), Direction: dir}
	if given != nil {
		res.Change, res.ChangePoint = *given, given.At
	} else if res.ChangePoint <= 0 {
		ch, err := OnsetDirected(target, opts.ChangeMethod, opts.MinBefore, dir)
		if err != nil {
			return nil, fmt.Errorf("rank: %w", err)
		}
		res.Change, res.ChangePoint, res.ChangeProb = ch, ch.At, ch.Prob
	}
	cp := res.ChangePoint
	if cp < minBefore || n-cp < 3 {
		return nil, fmt.Errorf("rank: change point %d of %d points leaves %d before and %d after, need %d and 3: %w",
			cp, n, cp, n-cp, minBefore, causal.ErrTooShort)
	}
	if opts.ChangePoint > 0 && given == nil {
		res.Change = Change{At: cp, Low: cp, High: cp, Prob: math.NaN(), Method: "given"}
		res.Change.Shift, res.Change.Z = newCumsum(target.Values).shiftZ(target.Values, cp)
	}
	res.Verdict = VerdictIncident
	minZ, minChange := opts.MinTargetZ, opts.MinTargetChange
	if minZ <= 0 {
		minZ = 3
	}
	if minChange <= 0 {
		minChange = 0.03
	}
	pre := newCumsum(target.Values).mean(0, cp)
	small := pre > 0 && math.Abs(res.Change.Shift) < minChange*pre
	// A change the harmless way (a latency that fell) is an improvement.
	harm := dir.harmful(res.Change.Shift)
	// clear: the target's change needs no corroboration. weak: it passes
	// the pointwise 5 % test only, which a split searched for over the
	// window does not justify on its own (see corroborates).
	clear := math.Abs(res.Change.Z) >= minZ && !small && harm
	weak := !clear && !small && harm && math.Abs(res.Change.Z) >= weakZ(dir) && opts.ChangePoint <= 0
	res.VerdictReason, res.Why = changeWords(res.Change, pre, dir), WhyChanged
	if !clear {
		res.Verdict = VerdictNoIncident
		res.VerdictReason, res.Why = noIncidentReason(target, res.Change, pre, minZ, minChange, dir, opts)
	}
	if len(cands) == 0 {
		if res.Verdict == VerdictIncident {
			res.Verdict, res.Why = VerdictUnexplained, WhyNoCandidates
			res.VerdictReason += "; there are no candidates"
		}
		return res, nil
	}
	base, err := causal.RobustScores(series, cp, false)
	if err != nil {
		return nil, fmt.Errorf("rank: %w", err)
	}
	res.Baseline = base
	baro := make(map[string]float64, len(base))
	for _, b := range base {
		baro[b.Name] = b.Score
	}

	// Node, family and group of every candidate.
	rk := make([]Ranked, len(cands))
	groups := make([]string, len(cands))
	var joins []Join
	if groupLabels == nil {
		ls := make([]map[string]string, len(cands))
		for i, c := range cands {
			ls[i] = c.Labels
		}
		joins = JoinHosts(ls)
	}
	byNode := map[string][]int{}
	for i, c := range cands {
		node := c.graphNode()
		fam := FamilyOther
		if node != "" {
			nd, ok := g.Node(node)
			if !ok {
				return nil, fmt.Errorf("rank: candidate %q: node %q is not in the graph: %w", c.Name, node, causal.ErrArgument)
			}
			fam = nd.Family
			byNode[node] = append(byNode[node], i)
		}
		rk[i] = Ranked{
			Name: c.Name, Metric: c.Metric, Node: node, Family: fam, Labels: c.Labels, BARO: baro[c.Name], Onset: -1,
			GrangerP: math.NaN(), GrangerQ: math.NaN(),
		}
		if joins != nil {
			rk[i].Join, groups[i] = joins[i], joins[i].Host
		} else {
			groups[i] = groupKey(c.Labels, groupLabels)
			rk[i].Join = Join{Host: groups[i], How: "labels " + strings.Join(groupLabels, ",")}
			if groups[i] == "" {
				rk[i].Join.How = "fleet-wide"
			}
		}
	}
	linked := func(i, j int) bool {
		return groups[i] == "" || groups[j] == "" || groups[i] == groups[j]
	}

	st := newStats(n, cp)
	// rawShift is each candidate's own Shift, before its parents explain
	// any of it: what the bypass check asks of a stage.
	rawShift := make([]float64, len(cands))
	stageMoved := make([]bool, len(cands))
	hacLag := opts.HACLag
	if hacLag <= 0 {
		hacLag = int(math.Ceil(math.Sqrt(float64(n))))
	}
	for i, c := range cands {
		var parents []int
		if rk[i].Node != "" {
			for _, pn := range g.Parents(rk[i].Node) {
				for _, j := range byNode[pn] {
					if linked(i, j) {
						parents = append(parents, j)
					}
				}
			}
		}
		resid, used := st.residual(c.Values, cands, parents, maxParents)
		for _, j := range used {
			rk[i].Parents = append(rk[i].Parents, cands[j].Name)
		}
		rk[i].Score, rk[i].At, rk[i].Shift = st.robust(resid, st.scale(c.Values)*1e-6)
		_, _, rawShift[i] = st.robust(c.Values, st.scale(c.Values)*1e-6)
		rk[i].PValue = st.shiftTest(resid, hacLag)
		if rk[i].Node != "" && g.Node0(rk[i].Node).Family == FamilyStage {
			// Whether a stage moved (the bypass check below) is asked of its
			// own values, by the anomaly rule's two ways: a shift of at
			// least MinShift IQR, or a sustained step at the change.
			raw := Ranked{Shift: rawShift[i], PValue: st.shiftTest(c.Values, hacLag)}
			stageMoved[i] = rawShift[i] >= minShift || sustained(&raw, c.Values, len(cands), alpha, res.Change, opts)
		}
	}

	// Benjamini–Hochberg within each family.
	fams := map[string][]int{}
	for i := range rk {
		fams[rk[i].Family] = append(fams[rk[i].Family], i)
	}
	for _, idx := range fams {
		p := make([]float64, len(idx))
		for k, i := range idx {
			p[k] = rk[i].PValue
		}
		q, err := causal.BenjaminiHochberg(p)
		if err != nil {
			return nil, fmt.Errorf("rank: BUG: %w", err)
		}
		for k, i := range idx {
			rk[i].QValue = q[k]
			rk[i].Anomalous = q[k] <= alpha && (rk[i].Shift >= minShift || sustained(&rk[i], cands[i].Values, len(rk), alpha, res.Change, opts))
		}
	}

	// Causal checks: a root cause moves before or with the target and
	// carries information about it beyond the change itself.
	checkCauses(target, cands, rk, cp, opts, alpha, dir, given)
	// worthy: a candidate that can be a root cause. A mapped candidate
	// whose information cannot be tested (it only steps, as a throttle
	// bitmask does) keeps the benefit of the graph; an unmapped one needs
	// the evidence.
	//
	// A mapped candidate whose stages did not move cannot have moved the
	// target: when some of the first stage nodes downstream of it (on each
	// path, the stage it acts on directly) have candidates in its group
	// and none of them moved — by the anomaly rule's two ways, a shift of
	// MinShift IQRs or a sustained step at the change, on their own values,
	// not the residual: a stage its parents explain still moved — it is
	// Bypassed (a backup job's network burst while the frontend time
	// stays flat). A mild load surge moves the queue by a sustained 1–2
	// IQR: under the floor, but a move.
	bypass := func() {
		for i := range rk {
			if rk[i].Node == "" || !rk[i].Anomalous || g.Node0(rk[i].Node).Family == FamilyStage {
				continue
			}
			seen, moved := 0, false
			for st := range g.FirstStages(rk[i].Node) {
				for _, j := range byNode[st] {
					if linked(i, j) {
						seen++
						moved = moved || stageMoved[j]
					}
				}
			}
			rk[i].Bypassed = seen > 0 && !moved
		}
	}
	bypass()
	worthy := func(r *Ranked) bool {
		return r.Anomalous && r.Precedes && !r.Bypassed && (r.Informative || r.Node != "")
	}

	// An upstream that moved is anomalous: a mapped candidate whose shift
	// is a sustained move (Shift ≥ 1, QValue ≤ Alpha, PValue ≤ Alpha/m) but
	// whose own split lies outside the change-time set (sustained asks
	// that, against drift) counts when it is a graph ancestor, in its
	// group, of an anomalous candidate that passes the causal checks: the
	// effect that moved at the change is the evidence the ancestor moved
	// there too. A gauge read at the scrape (the running batch, which
	// follows arrivals × service time by Little's law) is a cleaner reading
	// of a mild surge or throttle than the 1-minute request rate or a
	// jittery clock, so it clears the bar while its cause does not, and
	// without this the effect ranks first. The checks are then run again
	// with the ancestors among the anomalies.
	var promoted bool
	for i := range rk {
		r := &rk[i]
		if r.Anomalous || r.Node == "" || r.QValue > alpha || r.Shift < 1 {
			continue
		}
		bonferroni := r.PValue <= alpha/float64(len(rk))
		for j := range rk {
			if !worthy(&rk[j]) || rk[j].Node == "" || !linked(i, j) || !g.Ancestors(rk[j].Node)[r.Node] {
				continue
			}
			if bonferroni || littlesLaw(g, r.Node, rk[j].Node) {
				r.Anomalous, promoted = true, true
				break
			}
		}
	}
	if promoted {
		checkCauses(target, cands, rk, cp, opts, alpha, dir, given)
		bypass()
	}

	// Descendant adjustment: an anomalous candidate upstream explains,
	// one that passed the causal checks in preference.
	byWorthy := make([]bool, len(rk))
	for i := range rk {
		if rk[i].Node == "" {
			continue
		}
		anc := g.Ancestors(rk[i].Node)
		best := -1
		better := func(j int) bool {
			if best < 0 || worthy(&rk[j]) != worthy(&rk[best]) {
				return best < 0 || worthy(&rk[j])
			}
			return rk[j].Score > rk[best].Score
		}
		for j := range rk {
			if j == i || !rk[j].Anomalous || !anc[rk[j].Node] || !linked(i, j) {
				continue
			}
			if better(j) {
				best = j
			}
		}
		if best >= 0 {
			rk[i].Explained, byWorthy[i] = rk[best].Name, worthy(&rk[best])
		}
	}
	// Tiers: 0 root causes (passed the checks, nothing upstream that
	// passed explains them), 1 explained, 2 anomalous but failing the
	// checks, 3 the rest.
	tiers := make([]int, len(rk))
	for i := range rk {
		switch r := &rk[i]; {
		case worthy(r) && !byWorthy[i]:
			tiers[i] = 0
		case worthy(r):
			tiers[i] = 1
		case r.Anomalous:
			tiers[i] = 2
		default:
			tiers[i] = 3
		}
	}
	// explains: the root causes the graph links to another anomaly they
	// explain. A fault moves what lies downstream of it; a decoy (a
	// backup job's burst, mapped or not) moves nothing else, so among
	// root causes those that explain another anomalous candidate come
	// first, whatever the size of the decoy's own jump.
	explains := make([]bool, len(rk))
	for i := range rk {
		if rk[i].Explained == "" {
			continue
		}
		for j := range rk {
			if rk[j].Name == rk[i].Explained {
				explains[j] = true
			}
		}
	}
	order := make([]int, len(rk))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := &rk[a], &rk[b]
		if c := cmp.Compare(tiers[a], tiers[b]); c != 0 {
			return c
		}
		if tiers[a] == 0 {
			if explains[a] != explains[b] {
				if explains[a] {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(rb.Shift, ra.Shift); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(rb.Score, ra.Score); c != 0 {
			return c
		}
		return cmp.Compare(g.Level(ra.Node), g.Level(rb.Node))
	})
	res.Ranking = make([]Ranked, len(rk))
	for k, i := range order {
		res.Ranking[k] = rk[i]
		res.Ranking[k].Rank = k + 1
		res.Ranking[k].Reason = reason(&res.Ranking[k], tiers[i], alpha, minShift)
	}
	// A root cause carries information about the target itself (its
	// Granger test) or through what it explains: a clock that only steps
	// tests uninformative, while the decode time it slows, which the graph
	// says it explains, predicts the target.
	informs := func(i int) bool {
		if rk[i].Informative {
			return true
		}
		for j := range rk {
			if rk[j].Explained == rk[i].Name && rk[j].Informative {
				return true
			}
		}
		return false
	}
	if weak && len(order) > 0 && tiers[order[0]] == 0 && informs(order[0]) &&
		corroborates(target.Values, sliceOf(cands, groups, targetMetric(target.Name, opts), order[0]), &rk[order[0]], cands[order[0]].Values, res.Change, opts, dir) {
		res.Verdict, res.Why = VerdictIncident, WhyCorroborated
		res.VerdictReason = changeWords(res.Change, pre, dir) + ", too weak to stand alone but corroborated by " + rk[order[0]].Name + ", which stepped there"
	}
	if res.Verdict == VerdictNoIncident && given != nil && len(order) > 0 {
		loadStepVerdict(res, &rk[order[0]], tiers[order[0]], cands[order[0]].Values, pre, dir, opts.MinBefore)
	}
	if res.Verdict == VerdictIncident && len(order) > 0 && tiers[order[0]] == 0 {
		// The load exemption is for a target that changed clearly on its
		// own: a weak change that a rate's wander corroborated must still
		// show a step.
		load := isLoadNode(rk[order[0]].Node) && dir != DirectionDown && res.Why == WhyChanged
		if ok, words := stepped(target.Values, res.Change.At, res.Change.Shift, cands[order[0]].Values, load); !ok {
			res.Verdict, res.Why = VerdictNoIncident, WhyWandered
			res.VerdictReason = changeWords(res.Change, pre, dir) + ", but " + words + ": the target wandered with its load, which is no incident"
			return res, nil
		}
	}
	if res.Verdict == VerdictIncident && (len(order) == 0 || tiers[order[0]] != 0) {
		res.Verdict, res.Why = VerdictUnexplained, WhyNoCause
		res.VerdictReason += "; no candidate that moved before or with it passes the causal checks"
	} else if res.Verdict == VerdictIncident {
		res.VerdictReason += "; " + rk[order[0]].Name + " ranks first"
	}
	return res, nil
}

// weakZ is the pointwise 5 % point of the target's shift statistic at a
// change time that is not searched for (weakTargetZ): two-sided when
// either direction counts, one-sided (1.645) when the harmful direction
// is known, because then only one tail is a finding.
func weakZ(dir Direction) float64 {
	if dir.sign() != 0 {
		return weakTargetOneSided
	}
	return weakTargetZ
}

// weakTargetOneSided is the standard normal's 95 % point.
const weakTargetOneSided = 1.6448536269514722

// changeWords describes the target's change ch (pre its mean before).
func changeWords(ch Change, pre float64, dir Direction) string {
	verb := "rose"
	if ch.Shift < 0 {
		verb = "fell"
	}
	rel := ""
	if pre > 0 {
		rel = fmt.Sprintf(" %.1f %%", 100*math.Abs(ch.Shift)/pre)
	}
	return fmt.Sprintf("the target %s%s at the change (z = %.2f, direction %s)", verb, rel, ch.Z, dir)
}

// noIncidentReason says why the target's change at ch is no incident, in
// words and as a Why code: it went the harmless way, or the largest change
// either way did (an improvement), or it is too small.
func noIncidentReason(target causal.Series, ch Change, pre, minZ, minChange float64, dir Direction, opts Options) (string, string) {
	improved := func(c Change) bool {
		return !dir.harmful(c.Shift) && math.Abs(c.Z) >= minZ && !(pre > 0 && math.Abs(c.Shift) < minChange*pre)
	}
	switch {
	case !dir.harmful(ch.Shift):
		return changeWords(ch, pre, dir) + ": the target improved, which is no incident", WhyImproved
	case dir.sign() != 0 && opts.ChangePoint <= 0:
		if u, err := Onset(target, opts.ChangeMethod, opts.MinBefore); err == nil && improved(u) {
			return changeWords(u, newCumsum(target.Values).mean(0, u.At), dir) +
				fmt.Sprintf(": the target improved, which is no incident; its largest change the harmful way has z = %.2f", ch.Z), WhyImproved
		}
	}
	if pre > 0 && math.Abs(ch.Shift) < minChange*pre {
		return changeWords(ch, pre, dir) + fmt.Sprintf(": less than %g %% of its mean, no change", 100*minChange), WhyTooSmall
	}
	return changeWords(ch, pre, dir) + fmt.Sprintf(": |z| under %g, no change", minZ), WhyNoChange
}

// sustained reports whether r's shift, smaller than MinShift, is a
// sustained move at the change all the same: its residual's quartile
// after the change left the interquartile box before it (Shift ≥ 1), the
// Newey–West test of the shift holds at the Bonferroni level α/m over all
// m candidates, and x's own least-squares split lies within the target's
// 95 % change-time set widened by LeadTolerance (a step at the change, not
// a drift that any split of the window would call a shift). MinShift
// guards against the shift test's optimism on autocorrelated noise; a step
// at the change that clears every candidate's share of α needs no such
// guard. A 15 % load surge in 1-minute request rates, whose Poisson noise
// is 5 %, moves the rate by 1.4 IQR with p ≈ 1e-7.
func sustained(r *Ranked, x []float64, m int, alpha float64, ch Change, opts Options) bool {
	if r.Shift < 1 || r.PValue > alpha/float64(m) {
		return false
	}
	_, tol := corroborationLimits(opts)
	k, _ := newCumsum(x).bestSplit(0, len(x), 2, len(x)-2)
	return k >= ch.Low-tol && k <= ch.High+tol
}

// ownSplit is a candidate's own least-squares change time as the causal
// checks read it: its split on values, or, when that lies outside
// [lo, hi], its split on ranks if that one lies inside. A series that
// moves twice — a surge at the change and its load's wander later, or a
// wander first and the surge after — holds two splits of about equal
// weight, and values and ranks weigh them differently (values the larger
// jump, ranks the longer-held level), so one single split can land on
// either; both are changes of the series.
func ownSplit(x []float64, lo, hi, minBefore int) int {
	k, _ := newCumsum(x).bestSplit(0, len(x), 2, len(x)-2)
	if k >= lo && k <= hi {
		return k
	}
	// The split on ranks as Onset's mean_shift finds it (the same bounds),
	// without its 95 % set, which the checks do not read.
	n := len(x)
	first := pointsBefore(n, minBefore)
	if first > n-3 {
		return k
	}
	if r, _ := newCumsum(ranks(x)).bestSplit(0, n, first, n-3); r >= lo && r <= hi {
		return r
	}
	return k
}

// weakTargetZ is the pointwise two-sided 5 % point of the target's shift
// statistic: enough when the change time is not searched for but
// corroborated by a root cause that stepped there (corroborates).
const weakTargetZ = 1.96

// corroborates reports whether the first-ranked root cause r (values x)
// vouches for a target change too small to count on its own. The target's
// |z| ≥ MinTargetZ guards against the largest of many splits of noise
// passing for a change; at a split pointed at by a candidate that itself
// stepped clearly there, the target's change is not searched for, and the
// pointwise test (|z| ≥ 1.96, or 1.645 one-sided when the harmful
// direction is known) is the right one. Required of r (besides informing
// about the target, which Rank checks: itself or through an informative
// anomaly it explains, not only on the graph's word): it precedes the
// target; its own least-squares split has |z| ≥ MinTargetZ — a
// sustained step of its own, the kind a fault makes and slow wander rarely
// does — and lies within the target's 95 % change-time set widened by
// LeadTolerance; and at that split the target itself moved the same,
// harmful, way with pointwise |z| ≥ weakZ. A mild load surge moves one host's request
// rate by 15 % (z ≈ 5) and the fleet's TTFT by 3–5 % (z ≈ 2–3): the rate
// is the evidence. When slice (the target's slice on r's host, slice.go)
// is given and r's split lies within stepWindow of the change ranked,
// the target or its slice may show the move, each at sliceZ (two tests,
// a Bonferroni share each); farther away the slice is not asked, since
// it would then relocate the target's change rather than localise it.
func corroborates(target, slice []float64, r *Ranked, x []float64, ch Change, opts Options, dir Direction) bool {
	if !r.Precedes {
		return false
	}
	minZ, tol := corroborationLimits(opts)
	own, err := Onset(causal.Series{Name: r.Name, Values: x}, MethodMeanShift, opts.MinBefore)
	if err != nil || math.Abs(own.Z) < minZ || own.At < ch.Low-tol || own.At > ch.High+tol {
		return false
	}
	sign := math.Copysign(1, ch.Z)
	if slice == nil || own.At < ch.At-stepWindow || own.At > ch.At+stepWindow {
		return movedAt(target, own.At, weakZ(dir), sign, dir)
	}
	// The target's slice on the cause's host is a second test (slice.go).
	return movedAt(target, own.At, sliceZ(dir), sign, dir) || movedAt(slice, own.At, sliceZ(dir), sign, dir)
}

func corroborationLimits(opts Options) (minZ float64, tol int) {
	minZ, tol = opts.MinTargetZ, opts.LeadTolerance
	if minZ <= 0 {
		minZ = 3
	}
	if tol <= 0 {
		tol = 4
	}
	return minZ, tol
}

// maxProposals is how many candidate-proposed change times Rank tries.
const maxProposals = 3

// corroboratedOnsets proposes change times for a target whose own split
// is not clear. Each mapped candidate whose own least-squares split (on
// ranks) has |z| ≥ MinTargetZ proposes that split if the target's
// pointwise shift statistic there is at least 1.96 and its shift at least
// MinTargetChange of its mean before. A proposal inside the 95 % set
// (widened by LeadTolerance) of a stronger one (by the candidate's |z|)
// is the same change; of the rest,
// the maxProposals with the largest target |z| are returned, largest
// first, each with the proposer's 95 % set. A proposal is only a
// question: Rank keeps the ranking at it only when its first root cause
// passes every check and corroborates it. Several series of one host move
// together (a surge moves the rate, the batch and the power), so the
// proposals cluster; a noisy series elsewhere proposes a time of its own,
// which is why more than one is tried.
func corroboratedOnsets(target causal.Series, cands []Candidate, opts Options, dir Direction) []Change {
	minZ, tol := corroborationLimits(opts)
	minChange := opts.MinTargetChange
	if minChange <= 0 {
		minChange = 0.03
	}
	at := newTargetSplits(target.Values)
	var props []proposal
	for _, c := range cands {
		node := c.graphNode()
		if node == "" {
			continue // an unmapped series explains nothing on its own
		}
		own, err := Onset(causal.Series{Name: c.Name, Values: c.Values}, MethodMeanShift, opts.MinBefore)
		if err != nil || math.Abs(own.Z) < minZ {
			continue
		}
		z, pre, shift := at.split(own.At)
		if math.Abs(z) < weakZ(dir) || !dir.harmful(z) || (pre > 0 && math.Abs(shift) < minChange*pre) {
			continue
		}
		props = append(props, proposal{Change{At: own.At, Low: own.Low, High: own.High, Shift: shift, Z: z, Prob: math.NaN(), Method: "corroborated by " + c.Name}, math.Abs(own.Z)})
	}
	strongestFirst(props)
	var out []Change
	for _, p := range props {
		if !slices.ContainsFunc(out, func(c Change) bool { return p.ch.At >= c.Low-tol && p.ch.At <= c.High+tol }) {
			out = append(out, p.ch)
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int { return cmp.Compare(math.Abs(b.Z), math.Abs(a.Z)) })
	return out[:min(len(out), maxProposals)]
}

// targetSplits answers, at a split a candidate proposes as the target's
// change time, what the target's own statistics there are: the
// rank-based z of a mean shift (as Onset computes it), the mean before and
// the shift of the means in the target's values.
type targetSplits struct {
	tr       []float64
	tcs, raw *cumsum
}

func newTargetSplits(values []float64) targetSplits {
	tr := ranks(values)
	return targetSplits{tr: tr, tcs: newCumsum(tr), raw: newCumsum(values)}
}

func (s targetSplits) split(at int) (z, pre, shift float64) {
	_, z = s.tcs.shiftZ(s.tr, at)
	pre = s.raw.mean(0, at)
	return z, pre, s.raw.mean(at, len(s.tr)) - pre
}

// proposal is a change time a candidate proposes, with the strength of
// the candidate's own split.
type proposal struct {
	ch  Change
	own float64
}

// strongestFirst orders proposals by their candidate's own strength,
// strongest first, keeping the candidates' order among equals.
func strongestFirst(props []proposal) {
	slices.SortStableFunc(props, func(a, b proposal) int { return cmp.Compare(b.own, a.own) })
}

// checkCauses fills Onset, Lead, Precedes and the Granger fields of rk.
// The information test conditions on the step 1[t ≥ cp], so a candidate
// that merely jumps when the target does (a decoy starting at the same
// moment) carries no information; one whose fluctuations move the target
// does.
func checkCauses(target causal.Series, cands []Candidate, rk []Ranked, cp int, opts Options, alpha float64, dir Direction, given *Change) {
	n := len(target.Values)
	maxLag := opts.MaxLag
	if maxLag <= 0 {
		maxLag = 4
	}
	tol := opts.LeadTolerance
	if tol <= 0 {
		tol = 4
	}
	step := make([]float64, n)
	for t := cp; t < n; t++ {
		step[t] = 1
	}
	// The change itself takes a few steps (a fault ramps, rate windows
	// smear it): impulse dummies for the points around it keep the test
	// from reading the shape of the transition as information.
	var impulses [][]float64
	for t := cp - tol - 2; t <= cp+tol+maxLag+2; t++ {
		if t > 0 && t < n {
			d := make([]float64, n)
			d[t] = 1
			impulses = append(impulses, d)
		}
	}
	// Both sides are standardised within each regime (median and IQR
	// before and after the change): the test asks whether they co-move,
	// and a series whose spread jumps with its level (a ×20 burst) must
	// not pass for informative through the change of scale.
	ys := perRegime(target.Values, cp)
	var idx []int
	var ps []float64
	// Onsets are compared by one method on both sides: the least-squares
	// split of the target, whatever found the change point.
	tc, err := OnsetDirected(target, MethodMeanShift, opts.MinBefore, dir)
	if err != nil {
		tc = Change{At: cp, High: cp}
	}
	if given != nil {
		// A change time a candidate proposed (corroboratedOnsets,
		// loadSteps) replaces the target's own split, which found nothing
		// clear there: "before or with" is asked of the change ranked.
		tc = *given
	}
	tk := tc.At
	for i, c := range cands {
		if rk[i].Anomalous {
			k := ownSplit(c.Values, 0, tc.High+tol, opts.MinBefore)
			rk[i].Onset, rk[i].Lead = k, tk-k
			rk[i].Precedes = k <= tc.High+tol
		}
		if !rk[i].Anomalous {
			continue // only anomalous candidates can be root causes
		}
		p, lag, ok := incremental(ys, perRegime(c.Values, cp), step, impulses, maxLag)
		if !ok {
			continue
		}
		rk[i].GrangerP, rk[i].GrangerLag = p, lag
		ps = append(ps, p)
		idx = append(idx, i)
	}
	if len(ps) == 0 {
		return
	}
	qs, err := causal.BenjaminiHochberg(ps)
	if err != nil {
		return
	}
	for k, i := range idx {
		rk[i].GrangerQ = qs[k]
		rk[i].Informative = qs[k] <= alpha
	}
}

// incremental is the F-test of x_t … x_{t−L} in
//
//	y_t = a + b·step_t + Σ_k d_k·1[t = k] + Σ_{j=1}^{max(L,1)} φ_j y_{t−j} [+ Σ_{l=0}^{L} c_l x_{t−l}] + e_t
//
// (k over the transition, see checkCauses)
// on the common rows t = maxLag..n−1, L ∈ 0..maxLag chosen by AIC of the
// unrestricted fit (llf = −m/2·(ln 2π + ln(RSS/m) + 1), AIC = −2 llf + 2k,
// as causal.Granger). ok is false when a fit is singular.
func incremental(y, x, step []float64, impulses [][]float64, maxLag int) (p float64, lag int, ok bool) {
	n := len(y)
	m := n - maxLag
	if m < 2*maxLag+8 {
		return 0, 0, false
	}
	col := func(v []float64, k int) causal.Series {
		return causal.Series{Name: fmt.Sprint(k), Values: v[maxLag-k : n-k]}
	}
	yt := col(y, 0)
	bestAIC := math.Inf(1)
	for L := 0; L <= maxLag; L++ {
		base := []causal.Series{col(step, 0)}
		for _, d := range impulses {
			if c := col(d, 0); slices.Contains(c.Values, 1) {
				base = append(base, c)
			}
		}
		for j := 1; j <= max(L, 1); j++ {
			base = append(base, col(y, j))
		}
		r, err := causal.OLS(yt, base, true)
		if err != nil {
			return 0, 0, false
		}
		full := slices.Clone(base)
		for l := 0; l <= L; l++ {
			full = append(full, col(x, l))
		}
		u, err := causal.OLS(yt, full, true)
		if err != nil {
			return 0, 0, false
		}
		aic := float64(m)*(math.Log(2*math.Pi)+math.Log(u.RSS/float64(m))+1) + 2*float64(u.K)
		if !(aic < bestAIC) {
			continue
		}
		df1, df2 := float64(L+1), float64(u.DFResid)
		var pv float64
		switch {
		case u.RSS <= 0 && r.RSS > 0:
			pv = 0
		case u.RSS <= 0:
			pv = 1
		default:
			f := (r.RSS - u.RSS) / df1 / (u.RSS / df2)
			pv = distuv.F{D1: df1, D2: df2}.Survival(math.Max(0, f))
		}
		bestAIC, p, lag, ok = aic, pv, L, true
	}
	return p, lag, ok
}

// perRegime returns (x − median)/IQR computed separately over x[:cp] and
// x[cp:] (IQR 1 where it is 0).
func perRegime(x []float64, cp int) []float64 {
	out := make([]float64, len(x))
	for _, r := range [][2]int{{0, cp}, {cp, len(x)}} {
		seg := slices.Clone(x[r[0]:r[1]])
		slices.Sort(seg)
		med := quantileSorted(seg, 0.5)
		iqr := quantileSorted(seg, 0.75) - quantileSorted(seg, 0.25)
		if !(iqr > 0) {
			iqr = 1
		}
		for t := r[0]; t < r[1]; t++ {
			out[t] = (x[t] - med) / iqr
		}
	}
	return out
}

// reason explains a row's place in words.
func reason(r *Ranked, tier int, alpha, minShift float64) string {
	var b strings.Builder
	if r.Anomalous {
		fmt.Fprintf(&b, "shifted %.3g IQR after the change (q = %.2g)", r.Shift, r.QValue)
	} else {
		fmt.Fprintf(&b, "not anomalous: shift %.3g IQR (needs %g), q = %.2g (needs ≤ %g)", r.Shift, minShift, r.QValue, alpha)
	}
	if r.Onset >= 0 {
		switch {
		case r.Lead > 0:
			fmt.Fprintf(&b, "; moved %d steps before the target", r.Lead)
		case r.Lead == 0:
			b.WriteString("; moved with the target")
		case r.Precedes:
			fmt.Fprintf(&b, "; moved %d steps after the target (within tolerance)", -r.Lead)
		default:
			fmt.Fprintf(&b, "; moved %d steps after the target, too late to cause it", -r.Lead)
		}
	}
	switch {
	case !r.Anomalous:
	case math.IsNaN(r.GrangerQ):
		b.WriteString("; no information test (it only steps or is constant)")
	case r.Informative:
		fmt.Fprintf(&b, "; predicts the target beyond the change (Granger lag %d, q = %.2g)", r.GrangerLag, r.GrangerQ)
	default:
		fmt.Fprintf(&b, "; carries no information about the target beyond the change (Granger q = %.2g)", r.GrangerQ)
	}
	if r.Bypassed {
		b.WriteString("; none of the stages it acts on moved")
	}
	switch tier {
	case 0:
		b.WriteString("; nothing upstream explains it: a root cause")
	case 1:
		fmt.Fprintf(&b, "; explained by %s upstream", r.Explained)
	case 2:
		b.WriteString("; fails the causal checks: ranked below those that pass")
	}
	return b.String()
}

// ChangePoint returns the onset of the change in target and its
// probability (causal.BOCPDResult.ChangeProb): among the indices that leave
// at least opts.MinBefore points (default max(8, n/5)) before and 3 after,
// the earliest whose BOCPD change probability (opts.Detect) is at least 0.9
// times the largest. An incident often builds up (a queue grows, then
// spills): the onset, not the most violent later jump, is where its root
// cause moved, and the baseline must end there.
//
// Errors: ErrNaN; ErrTooShort when no index qualifies.
func ChangePoint(target causal.Series, opts Options) (int, float64, error) {
	n := len(target.Values)
	lo := opts.MinBefore
	if lo <= 0 {
		lo = max(minBefore, n/5)
	}
	if lo > n-3 {
		return 0, 0, fmt.Errorf("change point: target %q has %d points, need %d before a change and 3 after: %w",
			target.Name, n, lo, causal.ErrTooShort)
	}
	det, err := causal.BOCPD(target, opts.Detect)
	if err != nil {
		return 0, 0, fmt.Errorf("change point: %w", err)
	}
	best := lo
	for s := lo; s <= n-3; s++ {
		if det.ChangeProb[s] > det.ChangeProb[best] {
			best = s
		}
	}
	for s := lo; s < best; s++ {
		if det.ChangeProb[s] >= 0.9*det.ChangeProb[best] {
			return s, det.ChangeProb[s], nil
		}
	}
	return best, det.ChangeProb[best], nil
}

// checkSeries checks that s has n finite values.
func checkSeries(s causal.Series, n int) error {
	if len(s.Values) != n {
		return fmt.Errorf("series %q has %d points, the target %d: %w", s.Name, len(s.Values), n, causal.ErrLength)
	}
	for i, v := range s.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("series %q: value %v at index %d: %w", s.Name, v, i, causal.ErrNaN)
		}
	}
	return nil
}

func groupKey(lbls map[string]string, names []string) string {
	var b strings.Builder
	for _, n := range names {
		if v := lbls[n]; v != "" {
			b.WriteString(n)
			b.WriteByte('=')
			b.WriteString(v)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// stats holds the scratch space of one ranking.
type stats struct {
	n, cp   int
	sorted  []float64
	resid   []float64
	step    []float64
	predict []float64
}

func newStats(n, cp int) *stats {
	step := make([]float64, n)
	for t := cp; t < n; t++ {
		step[t] = 1
	}
	return &stats{n: n, cp: cp, sorted: make([]float64, n), resid: make([]float64, n), step: step, predict: make([]float64, n)}
}

// residual regresses x on the candidates in parents over t < cp and returns
// x − x̂ over all t (a fresh slice) and the parents used: at most max, those
// with the largest |correlation| with x before cp, skipping parents that
// are constant there or collinear with those already chosen. Without usable
// parents the residual is x itself.
func (s *stats) residual(x []float64, cands []Candidate, parents []int, maxP int) ([]float64, []int) {
	pre := x[:s.cp]
	type pc struct {
		j int
		r float64
	}
	var ranked []pc
	for _, j := range parents {
		r, ok := Correlation(pre, cands[j].Values[:s.cp])
		if ok {
			ranked = append(ranked, pc{j, math.Abs(r)})
		}
	}
	slices.SortStableFunc(ranked, func(a, b pc) int { return cmp.Compare(b.r, a.r) })
	limit := min(maxP, s.cp-3) // leave residual degrees of freedom
	var used []int
	var cols []causal.Series
	var fit *causal.OLSResult
	for _, p := range ranked {
		if len(used) >= limit {
			break
		}
		try := append(cols, causal.Series{Name: cands[p.j].Name, Values: cands[p.j].Values[:s.cp]})
		f, err := causal.OLS(causal.Series{Name: "x", Values: pre}, try, true)
		if err != nil {
			if errors.Is(err, causal.ErrSingular) {
				continue // collinear with the parents already chosen
			}
			break
		}
		cols, fit = try, f
		used = append(used, p.j)
	}
	out := make([]float64, s.n)
	if fit == nil {
		copy(out, x)
		return out, nil
	}
	for t := range s.n {
		v := fit.Coef[0]
		for k, j := range used {
			v += fit.Coef[k+1] * cands[j].Values[t]
		}
		out[t] = x[t] - v
	}
	return out, used
}

// scale is the interquartile range of x before the change point.
func (s *stats) scale(x []float64) float64 {
	pre := s.sorted[:s.cp]
	copy(pre, x[:s.cp])
	slices.Sort(pre)
	return quantileSorted(pre, 0.75) - quantileSorted(pre, 0.25)
}

// robust returns BARO's score of r at the change point, its index, and the
// shift (see Ranked.Shift) in the same units. The scale is the IQR of r
// before the change, but at least floor: a child its parents explain
// exactly (e2e = TTFT + decode) leaves a residual of rounding errors, whose
// spread must not become the unit.
func (s *stats) robust(r []float64, floor float64) (score float64, at int, shift float64) {
	pre := s.sorted[:s.cp]
	copy(pre, r[:s.cp])
	slices.Sort(pre)
	med := quantileSorted(pre, 0.5)
	iqr := max(quantileSorted(pre, 0.75)-quantileSorted(pre, 0.25), floor)
	if iqr < 10*0x1p-52 {
		iqr = 1 // as causal.RobustScores: a flat series is scored in its own units
	}
	score, at = math.Inf(-1), s.cp
	for t := s.cp; t < s.n; t++ {
		if z := math.Abs(r[t]-med) / iqr; z > score {
			score, at = z, t
		}
	}
	post := s.sorted[s.cp:]
	copy(post, r[s.cp:])
	slices.Sort(post)
	shift = math.Max(math.Abs(quantileSorted(post, 0.25)-med), math.Abs(quantileSorted(post, 0.75)-med)) / iqr
	return score, at, shift
}

// shiftTest returns the two-sided p-value of b in r_t = a + b·1[t ≥ cp] + e_t
// with Newey–West errors at lag L; 1 when r is constant, 0 when r is
// constant on each side but shifts.
func (s *stats) shiftTest(r []float64, lag int) float64 {
	fit, err := causal.OLS(causal.Series{Name: "residual", Values: r}, []causal.Series{{Name: "step", Values: s.step}}, true)
	if err != nil {
		return 1
	}
	if fit.RSS == 0 {
		if fit.Coef[1] == 0 {
			return 1
		}
		return 0
	}
	hac, err := fit.HAC(min(lag, s.n-1), false)
	if err != nil || !(hac.StdErr[1] > 0) {
		return 1
	}
	z := fit.Coef[1] / hac.StdErr[1]
	return 2 * distuv.UnitNormal.Survival(math.Abs(z))
}

// Correlation is the Pearson correlation of a and b (equal lengths); ok is
// false when either is constant.
func Correlation(a, b []float64) (r float64, ok bool) {
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		da, db := a[i]-ma, b[i]-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	if saa == 0 || sbb == 0 {
		return 0, false
	}
	return sab / math.Sqrt(saa*sbb), true
}

// quantileSorted is numpy's linear percentile of sorted s at p ∈ [0, 1].
func quantileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	h := p * float64(len(s)-1)
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// littlesLaw reports whether an arrival-rate candidate on node input
// counts as having moved because the running batch on node state did:
// by Little's law the batch is arrivals × service time, so it cannot
// rise unless one of them did, and it reads the arrivals through the
// gauge (read at the scrape) without the Poisson noise of a 1-minute
// request rate. Then the rate's shift needs only its family's false
// discovery rate (QValue ≤ Alpha, Shift ≥ 1), not the Bonferroni bar of
// an upstream that moved: the batch that passed the causal checks
// vouches for the time.
func littlesLaw(g *Graph, input, state string) bool {
	return isLoadNode(input) && state == "batch" && slices.Contains(g.Parents(state), input)
}
