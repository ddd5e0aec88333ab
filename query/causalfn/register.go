package causalfn

import (
	"fmt"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/query"
)

var (
	matrix = parser.ValueTypeMatrix
	scalar = parser.ValueTypeScalar
	vector = parser.ValueTypeVector
	str    = parser.ValueTypeString
)

// planned are the functions evaluated by the planner above the engine: each
// needs whole windows of several series at once.
var planned = []struct {
	f    *parser.Function
	impl query.PlannedFunc
}{
	{&parser.Function{Name: "granger", ArgTypes: []parser.ValueType{matrix, matrix, scalar, matrix}, Variadic: 1, ReturnType: vector}, funcGranger},
	{&parser.Function{Name: "lagged_correlation", ArgTypes: []parser.ValueType{matrix, matrix, scalar}, ReturnType: vector}, funcLaggedCorrelation},
	{&parser.Function{Name: "backdoor_effect", ArgTypes: []parser.ValueType{matrix, matrix, matrix}, Variadic: 1, ReturnType: vector}, funcBackdoorEffect},
	{&parser.Function{Name: "counterfactual", ArgTypes: []parser.ValueType{matrix, matrix, scalar, matrix}, Variadic: 1, ReturnType: vector}, funcCounterfactual},
	{&parser.Function{Name: "change_point", ArgTypes: []parser.ValueType{matrix, scalar}, Variadic: 1, ReturnType: vector}, funcChangePoint},
	{&parser.Function{Name: "robust_score", ArgTypes: []parser.ValueType{matrix, matrix}, Variadic: -1, ReturnType: vector}, funcRobustScore},
	{&parser.Function{Name: "root_cause", ArgTypes: []parser.ValueType{matrix, matrix}, Variadic: -1, ReturnType: vector}, funcRootCause},
	{&parser.Function{Name: "drift", ArgTypes: []parser.ValueType{matrix, matrix, scalar}, Variadic: 1, ReturnType: vector}, funcDrift},
	{&parser.Function{Name: "statistic", ArgTypes: []parser.ValueType{vector, str}, ReturnType: vector}, funcStatistic},
}

// Names lists the functions Register adds.
func Names() []string {
	var out []string
	for _, p := range planned {
		out = append(out, p.f.Name)
	}
	return out
}

// Register adds the causal functions to r. Call it before building an
// engine over r (query.New copies the registry's signatures). It fails if
// a name is already registered, for example by a second call.
func Register(r *query.Registry) error {
	for _, p := range planned {
		if err := r.RegisterPlanned(p.f, p.impl); err != nil {
			return fmt.Errorf("causal functions: %w", err)
		}
	}
	return nil
}
