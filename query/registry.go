package query

import (
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/promql/parser"
)

// Registry is the set of functions tailroot's parser accepts: every upstream
// PromQL function plus tailroot's own. Functions are registered at package
// init (before any engine is built) by the packages that implement them.
//
// Every tailroot function is planned (see PlannedFunc): it is evaluated
// above the engine, so registering never writes the upstream engine's
// package-level promql.FunctionCalls, and two registries (two engines in
// one process, tests in parallel) cannot see each other's functions.
// Names must not collide with upstream functions.
type Registry struct {
	mu       sync.RWMutex
	funcs    map[string]*parser.Function
	plannedF map[string]PlannedFunc
}

var (
	defaultRegistry     *Registry
	defaultRegistryOnce sync.Once
)

// DefaultRegistry is the registry `tailroot serve` evaluates with.
func DefaultRegistry() *Registry {
	defaultRegistryOnce.Do(func() { defaultRegistry = NewRegistry() })
	return defaultRegistry
}

// NewRegistry returns a registry holding the upstream PromQL functions.
func NewRegistry() *Registry {
	return &Registry{funcs: maps.Clone(parser.Functions), plannedF: map[string]PlannedFunc{}}
}

// RegisterPlanned adds a function evaluated by the planner above the
// engine (see PlannedFunc). Its signature is type-checked by the parser
// like any function; its return type must be an instant vector.
func (r *Registry) RegisterPlanned(f *parser.Function, impl PlannedFunc) error {
	if f == nil || f.Name == "" {
		return fmt.Errorf("register function: empty name")
	}
	if impl == nil {
		return fmt.Errorf("register function %s: nil implementation", f.Name)
	}
	if f.ReturnType != parser.ValueTypeVector {
		return fmt.Errorf("register function %s: planned functions return instant vectors, not %s", f.Name, f.ReturnType)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.funcs[f.Name]; ok {
		return fmt.Errorf("register function %s: name already registered", f.Name)
	}
	r.funcs[f.Name] = f
	r.plannedF[f.Name] = impl
	return nil
}

// MustRegisterPlanned is RegisterPlanned for package init; it panics on a
// programming error (a duplicate name or a bad signature).
func (r *Registry) MustRegisterPlanned(f *parser.Function, impl PlannedFunc) {
	if err := r.RegisterPlanned(f, impl); err != nil {
		panic("BUG: " + err.Error())
	}
}

func (r *Registry) planned(name string) PlannedFunc {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.plannedF[name]
}

// hasPlanned is a cheap filter: whether qs mentions a planned function.
func (r *Registry) hasPlanned(qs string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for n := range r.plannedF {
		if strings.Contains(qs, n) {
			return true
		}
	}
	return false
}

// Functions returns a copy of the registered signatures, for parser.Options.
func (r *Registry) Functions() map[string]*parser.Function {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return maps.Clone(r.funcs)
}

// Names lists tailroot's own functions (those not in upstream PromQL).
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for n := range r.funcs {
		if _, up := parser.Functions[n]; !up {
			out = append(out, n)
		}
	}
	return out
}
