package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gorilla/mux"

	"github.com/tailroot/tailroot/internal/httpapi"
)

// RoutesPath serves the route table (GET): every path this server answers
// and the methods each takes, so docs/api.md can be checked against the
// router a running binary really has, routes added by any package included.
const RoutesPath = "/api/v1/status/routes"

// Route is one path the server answers and the methods it takes. Path uses
// {name} for a path parameter; Methods is empty for a route that takes
// every method (its handler decides).
type Route struct {
	Path    string   `json:"path"`
	Methods []string `json:"methods"`
}

// probedMethods are the methods tried on each route of the Prometheus API
// router, whose table cannot be walked (prometheus/common/route hides its
// httprouter): a method the route lacks answers 405 there.
var probedMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// routeProbe is the context key of a probe request: the instrumentation
// wrapper writes the name of the route that matched instead of running
// its handler, so listing the routes never runs a query or an admin call.
type routeProbe struct{}

// upstreamRoutes collects the paths the Prometheus API registers, through
// the router's instrumentation hook, which sees every registration.
type upstreamRoutes struct {
	mu    sync.Mutex
	names []string
}

func (u *upstreamRoutes) instrument(name string, h http.HandlerFunc) http.HandlerFunc {
	u.mu.Lock()
	if !slices.Contains(u.names, name) {
		u.names = append(u.names, name)
	}
	u.mu.Unlock()
	return func(w http.ResponseWriter, r *http.Request) {
		if p, ok := r.Context().Value(routeProbe{}).(*string); ok {
			*p = name
			return
		}
		// The Prometheus API gzips each response with a gzip writer of
		// its own (about 1 MB allocated a response, more than a small
		// query costs); the server's handler compresses with pooled
		// writers (Server.Handler), which decided on the request's
		// Accept-Encoding before this, so the API is told nothing is
		// accepted.
		r.Header.Del("Accept-Encoding")
		h(w, r)
	}
}

var routeParam = regexp.MustCompile(`[:*]([A-Za-z_][A-Za-z0-9_]*)`)

// Routes returns the route table, sorted by path. Routes of the
// Prometheus API (mounted under /api/v1/ behind the catch-all) are listed
// one by one, with the methods found by probing them.
func (s *Server) Routes() []Route {
	s.routesOnce.Do(func() { s.routes = s.buildRoutes() })
	return slices.Clone(s.routes)
}

func (s *Server) buildRoutes() []Route {
	byPath := map[string][]string{}
	add := func(path string, methods ...string) {
		m := byPath[path]
		for _, x := range methods {
			if !slices.Contains(m, x) {
				m = append(m, x)
			}
		}
		byPath[path] = m
	}
	_ = s.router.Walk(func(rt *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		if rt == s.catchAll {
			for _, name := range s.upstream.names {
				path := "/api/v1" + routeParam.ReplaceAllString(name, "{$1}")
				if _, ok := byPath[path]; ok {
					// Shadowed by a route of this router, which wins.
					continue
				}
				add(path, s.probeUpstream(name)...)
			}
			return nil
		}
		tpl, err := rt.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, err := rt.GetMethods()
		if err != nil {
			methods = nil // no method matcher: any method
		}
		add(tpl, methods...)
		return nil
	})
	out := make([]Route, 0, len(byPath))
	for p, m := range byPath {
		if m == nil {
			m = []string{}
		}
		sort.Slice(m, func(i, j int) bool { return methodOrder(m[i]) < methodOrder(m[j]) })
		out = append(out, Route{Path: p, Methods: m})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// probeUpstream returns the methods the Prometheus API router routes to
// name, by sending it a probe request per method.
func (s *Server) probeUpstream(name string) []string {
	path := "/api/v1" + routeParam.ReplaceAllString(name, "$1")
	var methods []string
	for _, m := range probedMethods {
		var got string
		req := httptest.NewRequestWithContext(context.WithValue(context.Background(), routeProbe{}, &got), m, path, nil)
		s.apiRouter.ServeHTTP(httptest.NewRecorder(), req)
		if got == name {
			methods = append(methods, m)
		}
	}
	return methods
}

func methodOrder(m string) int {
	if i := slices.Index(probedMethods, strings.ToUpper(m)); i >= 0 {
		return i
	}
	return len(probedMethods)
}

// serveRoutes answers GET RoutesPath.
func (s *Server) serveRoutes(w http.ResponseWriter, _ *http.Request) {
	httpapi.WriteData(w, s.Routes())
}
