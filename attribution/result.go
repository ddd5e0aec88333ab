package attribution

import "fmt"

// Method names the computation that produced a number, so a report never
// shows a figure without saying where it came from.
type Method uint8

// Methods. The zero value is invalid so a forgotten assignment shows.
const (
	// MethodTailMeanRecords: E[X_i | S ≥ q] from request records (TailMean).
	MethodTailMeanRecords Method = iota + 1
	// MethodEuler: E[X_i | S ≈ q] over ranks near the quantile (Euler).
	MethodEuler
	// MethodExcess: E[X_i | S ≥ q] − E[X_i] (Excess).
	MethodExcess
	// MethodShapley: counterfactual Shapley values of P_p (Shapley).
	MethodShapley
	// MethodTailMeanAccumulators: tail-mean allocation from per-bucket
	// stage sums (TailMeanAccumulators).
	MethodTailMeanAccumulators
	// MethodComonotonicBound: Σ_i of per-stage tail means, an upper bound
	// on P_p(S) and E[S | S ≥ q] for any dependence (ComonotonicBound).
	MethodComonotonicBound
	// MethodComonotonicQuantile: Σ_i q_i(p), P_p(S) if stages were
	// comonotonic; not a bound (ComonotonicQuantile).
	MethodComonotonicQuantile
	// MethodIndependenceEstimate: P_p(S) by convolution of stage
	// distributions assumed independent (IndependenceEstimate).
	MethodIndependenceEstimate
	// MethodMean: per-stage means, which add up to E[S] under any
	// dependence (HistogramMeans).
	MethodMean
)

var methodNames = [...]string{
	MethodTailMeanRecords:      "tail_mean_records",
	MethodEuler:                "euler",
	MethodExcess:               "excess",
	MethodShapley:              "shapley",
	MethodTailMeanAccumulators: "tail_mean_accumulators",
	MethodComonotonicBound:     "comonotonic_bound",
	MethodComonotonicQuantile:  "comonotonic_quantile",
	MethodIndependenceEstimate: "independence_estimate",
	MethodMean:                 "mean",
}

// String returns the snake_case name used in labels and JSON.
func (m Method) String() string {
	if int(m) < len(methodNames) && methodNames[m] != "" {
		return methodNames[m]
	}
	return fmt.Sprintf("method(%d)", uint8(m))
}

// MarshalText implements encoding.TextMarshaler with String.
func (m Method) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// Kind says how a number relates to the quantity it stands for.
type Kind uint8

// Kinds. The zero value is invalid so a forgotten assignment shows.
const (
	// KindExact: the defined statistic of the given data, computed without
	// approximation (up to float rounding).
	KindExact Kind = iota + 1
	// KindEstimate: an approximation of a quantity the inputs do not
	// determine; Lower/Upper fields, when set, bracket the quantity.
	KindEstimate
	// KindBound: the quantity lies on one side of the number; the doc of the
	// producing function says which side.
	KindBound
)

var kindNames = [...]string{KindExact: "exact", KindEstimate: "estimate", KindBound: "bound"}

// String returns "exact", "estimate" or "bound".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler with String.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Breakdown is a per-stage decomposition of one target quantity.
//
// Contrib[i] is stage Stages[i]'s share of Target, and
// Target = Σ_i Contrib[i] + Residual. Residual is zero up to rounding for
// the allocations that add up by construction (tail mean, excess, Shapley,
// accumulators); for Euler it is the gap between q and the window's mean S.
type Breakdown struct {
	Method Method
	Kind   Kind
	// P is the quantile level.
	P float64
	// Quantile is q = P_p(S) of the data the breakdown conditions on.
	Quantile float64
	// Target is the decomposed quantity: E[S | S ≥ q] (tail mean), q (Euler),
	// E[S | S ≥ q] − E[S] (excess), P_p(now) − P_p(baseline) (Shapley),
	// E[S] (mean).
	Target float64
	Stages []string
	// Contrib holds one value per stage, in Stages order.
	Contrib  []float64
	Residual float64
	// Count is the number of requests (or, for accumulators and histograms,
	// the summed bucket counts) that the conditional means average over.
	Count float64
	// Bounds, set only where the method yields them (accumulators,
	// histogram means without sums); nil or NaN otherwise. Each pair
	// brackets the corresponding exact records value.
	Lower, Upper                 []float64
	TargetLower, TargetUpper     float64
	QuantileLower, QuantileUpper float64
}

// Estimate is a single number with its provenance, for results that are not
// a per-stage decomposition of a target (bounds and quantile estimates from
// histograms).
type Estimate struct {
	Method Method
	Kind   Kind
	P      float64
	Value  float64
	// Lower and Upper bracket the quantity where known and are NaN
	// otherwise. For an upper bound, Upper == Value and Lower is NaN.
	Lower, Upper float64
	Stages       []string
	// PerStage holds the per-stage terms when Value is their sum
	// (comonotonic bound and quantile); nil otherwise.
	PerStage []float64
}
