// Package builtin assembles the function registry `tailroot serve`
// evaluates with: every upstream PromQL function, the tail-decomposition
// functions over request records and series (query/tailfn) and the causal
// functions (query/causalfn). Tests that must see the engine exactly as the
// server wires it build it from here.
package builtin

import (
	"fmt"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/causalfn"
	"github.com/tailroot/tailroot/query/tailfn"
)

// Registry returns a fresh registry with all of tailroot's functions; src
// is the request-record store the record functions read.
func Registry(src tailfn.RecordSource) (*query.Registry, error) {
	r := query.NewRegistry()
	if err := tailfn.Register(r, src); err != nil {
		return nil, fmt.Errorf("tail functions: %w", err)
	}
	if err := causalfn.Register(r); err != nil {
		return nil, fmt.Errorf("causal functions: %w", err)
	}
	return r, nil
}
