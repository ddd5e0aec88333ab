package depcheck

import (
	"fmt"
	"slices"
	"strings"
)

// Package is one package of the graph: module-relative path ("api",
// "query/tailfn"), and its imports as full import paths.
type Package struct {
	Path        string
	Imports     []string
	TestImports []string // of _test.go files, in-package and external
}

// Graph is the module's packages; Module is the module path that prefixes
// the imports of its own packages.
type Graph struct {
	Module   string
	Packages []Package
}

// Rule says what packages matching From (minus Unless) never import.
// Either Never lists forbidden module-relative prefixes, or Only lists the
// only allowed imports: "std" (the standard library), module-relative
// prefixes, or external module prefixes (with a dot: gonum.org/v1/gonum).
type Rule struct {
	From   string   // "*" for every package
	Unless []string // packages under From the rule does not cover
	Never  []string
	Only   []string
	Tests  bool // whether test imports count too
	Why    string
}

// Exception lets one edge through a rule, with the reason.
type Exception struct {
	From, To string // module-relative
	Test     bool   // the edge is a test import
	Why      string
}

// Violation is one forbidden edge.
type Violation struct {
	From, To string
	Test     bool
	Rule     *Rule
}

func (v Violation) String() string {
	kind := "imports"
	if v.Test {
		kind = "imports in tests"
	}
	return fmt.Sprintf("%s %s %s: %s", v.From, kind, v.To, v.Rule.Why)
}

// under reports whether path is prefix or below it, by whole segments.
func under(path, prefix string) bool {
	return prefix == "*" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

func (r *Rule) covers(pkg string) bool {
	if !under(pkg, r.From) {
		return false
	}
	for _, u := range r.Unless {
		if under(pkg, u) {
			return false
		}
	}
	return true
}

// allows reports whether the rule lets pkg import imp (a full import path;
// rel is its module-relative path, "" for a package outside the module).
func (r *Rule) allows(pkg, imp, rel string) bool {
	if rel == pkg {
		return true // itself, from an external test package
	}
	if r.Only != nil {
		for _, o := range r.Only {
			switch {
			case o == "std":
				if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
					return true
				}
			case strings.Contains(o, "."):
				if under(imp, o) {
					return true
				}
			default:
				if rel != "" && under(rel, o) {
					return true
				}
			}
		}
		return false
	}
	if rel == "" {
		return true
	}
	for _, n := range r.Never {
		if under(rel, n) {
			return false
		}
	}
	return true
}

// Check returns the edges of g that a rule forbids and no exception lets
// through, and the exceptions that matched no edge (stale ones).
func Check(g Graph, rules []Rule, exceptions []Exception) (violations []Violation, unused []Exception) {
	used := make([]bool, len(exceptions))
	excepted := func(from, to string, test bool) bool {
		for i, e := range exceptions {
			if e.From == from && e.To == to && e.Test == test {
				used[i] = true
				return true
			}
		}
		return false
	}
	for _, p := range g.Packages {
		for ri := range rules {
			r := &rules[ri]
			if !r.covers(p.Path) {
				continue
			}
			check := func(imps []string, test bool) {
				for _, imp := range imps {
					rel := ""
					if imp == g.Module {
						rel = "."
					} else if strings.HasPrefix(imp, g.Module+"/") {
						rel = strings.TrimPrefix(imp, g.Module+"/")
					}
					if r.allows(p.Path, imp, rel) {
						continue
					}
					to := rel
					if to == "" {
						to = imp
					}
					if excepted(p.Path, to, test) {
						continue
					}
					violations = append(violations, Violation{From: p.Path, To: to, Test: test, Rule: r})
				}
			}
			check(p.Imports, false)
			if r.Tests {
				// A test import already imported by the package proper was
				// judged above.
				var extra []string
				for _, t := range p.TestImports {
					if !slices.Contains(p.Imports, t) {
						extra = append(extra, t)
					}
				}
				check(extra, true)
			}
		}
	}
	for i, e := range exceptions {
		if !used[i] {
			unused = append(unused, e)
		}
	}
	return violations, unused
}

// Table renders rules as the Markdown table of docs/architecture.md.
func Table(rules []Rule) string {
	var b strings.Builder
	b.WriteString("| packages | never import | tests too | why |\n|---|---|---|---|\n")
	for _, r := range rules {
		from := "every package"
		if r.From != "*" {
			from = "`" + r.From + "/…`"
		}
		if len(r.Unless) > 0 {
			from += " except " + codeList(r.Unless)
		}
		never := codeList(r.Never)
		if r.Only != nil {
			never = "anything but " + codeList(r.Only)
		}
		tests := "no"
		if r.Tests {
			tests = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", from, never, tests, r.Why)
	}
	return b.String()
}

func codeList(ps []string) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = "`" + p + "`"
	}
	return strings.Join(out, ", ")
}
