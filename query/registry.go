package query

import (
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Registry is the set of functions tailroot's parser accepts: every upstream
// PromQL function plus tailroot's own. Functions are registered at package
// init (before any engine is built) by the packages that implement them.
//
// The upstream engine looks calls up in the package-level map
// promql.FunctionCalls, so registering writes there too; names must not
// collide with upstream functions.
type Registry struct {
	mu       sync.RWMutex
	funcs    map[string]*parser.Function
	plannedF map[string]PlannedFunc
}

var (
	defaultRegistry     *Registry
	defaultRegistryOnce sync.Once
	callsMu             sync.Mutex
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

// Register adds a function. It fails when the name is taken, when the
// signature is incomplete, or when call is nil.
func (r *Registry) Register(f *parser.Function, call promql.FunctionCall) error {
	if f == nil || f.Name == "" {
		return fmt.Errorf("register function: empty name")
	}
	if call == nil {
		return fmt.Errorf("register function %s: nil call", f.Name)
	}
	if f.ReturnType != parser.ValueTypeVector && f.ReturnType != parser.ValueTypeScalar {
		return fmt.Errorf("register function %s: return type %s is not vector or scalar", f.Name, f.ReturnType)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.funcs[f.Name]; ok {
		return fmt.Errorf("register function %s: name already registered", f.Name)
	}
	callsMu.Lock()
	defer callsMu.Unlock()
	if existing, ok := promql.FunctionCalls[f.Name]; ok && existing != nil {
		return fmt.Errorf("register function %s: name collides with an engine function", f.Name)
	}
	promql.FunctionCalls[f.Name] = call
	r.funcs[f.Name] = f
	return nil
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
