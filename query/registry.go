package query

import (
	"fmt"
	"maps"
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
	mu    sync.RWMutex
	funcs map[string]*parser.Function
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
	return &Registry{funcs: maps.Clone(parser.Functions)}
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
