package apptest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tailroot/tailroot/api"
)

// repoFile reads a file of the repository by its path from the root.
func repoFile(t testing.TB, rel string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(self)), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// apiDocSpan is one `METHODS PATH` span of a docs/api.md heading.
var apiDocSpan = regexp.MustCompile("`((?:[A-Z]+)(?:/[A-Z]+)*) (/[^`\\s]*)`")

// apiDocRoutes reads the endpoints docs/api.md documents: every level-3
// heading's `METHODS PATH` spans, methods joined by "/", ANY for a route
// that takes every method. A path documented twice merges its methods.
func apiDocRoutes(doc string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "### ") {
			continue
		}
		for _, m := range apiDocSpan.FindAllStringSubmatch(line, -1) {
			methods := out[m[2]]
			if methods == nil {
				methods = []string{}
			}
			if m[1] != "ANY" {
				for _, x := range strings.Split(m[1], "/") {
					if !slices.Contains(methods, x) {
						methods = append(methods, x)
					}
				}
			}
			out[m[2]] = methods
		}
	}
	return out
}

// checkAPIDoc compares the documented endpoints with the server's route
// table and returns one line per difference, each saying what to change.
func checkAPIDoc(doc string, routes []api.Route) []string {
	documented := apiDocRoutes(doc)
	heading := func(r api.Route) string {
		m := "ANY"
		if len(r.Methods) > 0 {
			m = strings.Join(r.Methods, "/")
		}
		return fmt.Sprintf("### `%s %s`", m, r.Path)
	}
	var problems []string
	served := map[string]bool{}
	for _, r := range routes {
		served[r.Path] = true
		got, ok := documented[r.Path]
		if !ok {
			problems = append(problems, fmt.Sprintf("route %s is not documented: add a section %s to docs/api.md with its parameters", r.Path, heading(r)))
			continue
		}
		want := slices.Clone(r.Methods)
		sort.Strings(want)
		got = slices.Clone(got)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("route %s takes %v, docs/api.md says %v: make its heading %s", r.Path, r.Methods, got, heading(r)))
		}
	}
	for p := range documented {
		if !served[p] {
			problems = append(problems, fmt.Sprintf("docs/api.md documents %s, which the server does not route: remove the section or add the route", p))
		}
	}
	sort.Strings(problems)
	return problems
}

// TestAPIReference checks docs/api.md against the route table of the real
// binary, started with the flags that route optional endpoints
// (/-/reload), so every route any package adds must be documented.
func TestAPIReference(t *testing.T) {
	app := Start(t, t.TempDir(), "--web.enable-lifecycle", "--web.enable-admin-api")
	code, body := app.Get(t, api.RoutesPath, nil)
	var env struct {
		Status string      `json:"status"`
		Data   []api.Route `json:"data"`
	}
	if code != 200 || json.Unmarshal(body, &env) != nil || env.Status != "success" {
		t.Fatalf("%s: %d %s", api.RoutesPath, code, body)
	}
	if len(env.Data) < 40 {
		t.Fatalf("route table has %d routes, want the whole API: %s", len(env.Data), body)
	}
	for _, p := range checkAPIDoc(repoFile(t, "docs/api.md"), env.Data) {
		t.Error(p)
	}
}

// TestCheckAPIDoc shows the check failing on each kind of mismatch.
func TestCheckAPIDoc(t *testing.T) {
	doc := "# x\n### `GET/POST /api/v1/query`\n### `POST /v1/traces` · `POST /api/v1/otlp/v1/traces`\n### `ANY /metrics`\n### `GET /gone`\n" +
		"a `GET /not/a/heading` span\n"
	routes := []api.Route{
		{Path: "/api/v1/query", Methods: []string{"GET", "POST"}},
		{Path: "/v1/traces", Methods: []string{"POST"}},
		{Path: "/api/v1/otlp/v1/traces", Methods: []string{"POST", "PUT"}},
		{Path: "/metrics", Methods: []string{}},
		{Path: "/not/a/heading", Methods: []string{"GET"}},
	}
	got := strings.Join(checkAPIDoc(doc, routes), "\n")
	for _, want := range []string{
		"route /api/v1/otlp/v1/traces takes [POST PUT], docs/api.md says [POST]: make its heading ### `POST/PUT /api/v1/otlp/v1/traces`",
		"route /not/a/heading is not documented: add a section ### `GET /not/a/heading` to docs/api.md",
		"docs/api.md documents /gone, which the server does not route",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems\n%s\nlack %q", got, want)
		}
	}
	if n := len(strings.Split(got, "\n")); n != 3 {
		t.Errorf("%d problems, want 3:\n%s", n, got)
	}
}

// apiParamRead matches where tailroot's own handlers read a request
// parameter: r.FormValue("x"), r.Form.Get("x"), f.Get("x"), r.Form["x"],
// r.URL.Query().Get("x") and the attribution helpers' timeParam(r, "x"…).
var apiParamRead = regexp.MustCompile(`(?:FormValue|Form\.Get|\bf\.Get|Query\(\)\.Get)\("([^"]+)"\)|(?:\bForm|\bf)\["([^"]+)"\]|(?:timeParam|levelParam|durationParam|selectorParam)\(r, "([^"]+)"`)

// apiParamSources are the files of tailroot's own HTTP handlers; the
// Prometheus API's parameters are documented from its source instead.
var apiParamSources = []string{"api/*.go", "ingest/requests_http.go"}

// TestAPIReferenceParameters checks that every parameter tailroot's own
// handlers read is named in docs/api.md, so a new one cannot go
// undocumented.
func TestAPIReferenceParameters(t *testing.T) {
	doc := repoFile(t, "docs/api.md")
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	seen := 0
	for _, pat := range apiParamSources {
		files, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			rel, _ := filepath.Rel(root, f)
			for _, m := range apiParamRead.FindAllStringSubmatch(repoFile(t, rel), -1) {
				name := m[1] + m[2] + m[3]
				seen++
				if !strings.Contains(doc, "`"+name+"`") {
					t.Errorf("parameter %s, read in %s, is not in docs/api.md: add it to its endpoint's table as `%s`", name, rel, name)
				}
			}
		}
	}
	if seen < 30 {
		t.Errorf("found only %d parameter reads: has the handlers' code changed shape?", seen)
	}
}
