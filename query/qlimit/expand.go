package qlimit

import (
	"strconv"
	"strings"
)

// CheckExpansion measures what expanding q's MetricsQL WITH templates would
// produce, without expanding them: the token count of the expanded query
// (MaxSize) and how deep template references nest (MaxDepth). metricsql's
// own expansion copies every template at every use, so 22 nested
// definitions of the form aN = aN-1 + aN-1 fit in 400 bytes and expand to
// gigabytes; this check computes the same sizes as numbers, memoized per
// template and argument sizes, and stops at the first one over the limit,
// so its cost is bounded by the query's length, not by its expansion.
//
// The scoping follows metricsql: a template sees the ones defined before it
// (in its WITH and the enclosing ones) and its parameters; a name that is no
// template is one token. The count is a token count of the expanded text,
// close to, and never far below, what metricsql builds. It also counts the
// built-in templates (ru, ttf, range_median, alias).
func CheckExpansion(q string, l Limits) error {
	if err := Check(q, l); err != nil {
		return err
	}
	if l.MaxSize <= 0 && l.MaxDepth <= 0 {
		return nil
	}
	nodes := tree(q)
	x := &expander{limits: l, memo: map[string]int{}}
	n, err := x.size(nodes, builtinScope(), 0)
	if err != nil {
		return err
	}
	if l.MaxSize > 0 && n > l.MaxSize {
		return x.sizeErr(n)
	}
	return nil
}

// node is a token, or a bracketed group of nodes when open is set.
type node struct {
	tok      token
	children []node
	group    bool
}

// tree nests tokens by their brackets. It is lenient as scan is: a stray
// closing bracket is a token, an unclosed group ends at the end of q.
func tree(q string) []node {
	root := &node{group: true}
	stack := []*node{root}
	scan(q, func(t token) bool {
		top := stack[len(stack)-1]
		switch t.kind {
		case tokOpen:
			top.children = append(top.children, node{tok: t, group: true})
			stack = append(stack, &top.children[len(top.children)-1])
		case tokClose:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			} else {
				top.children = append(top.children, node{tok: t})
			}
		default:
			top.children = append(top.children, node{tok: t})
		}
		return true
	})
	return root.children
}

// template is one WITH definition, or a parameter bound to the size of
// its argument (fixed set, no body).
type template struct {
	id     string // unique per definition, the memo key
	name   string
	params []string
	body   []node
	scope  *scope // the templates visible to the body
	fixed  int    // a bound parameter's size
	isArg  bool
	isFunc bool // defined with a parameter list, f(x) = …
}

// scope is a linked list, newest first, as metricsql scans its list
// backwards for the latest definition of a name.
type scope struct {
	t    *template
	next *scope
}

func (s *scope) lookup(name string) *template {
	for ; s != nil; s = s.next {
		if s.t.name == name {
			return s.t
		}
	}
	return nil
}

type expander struct {
	limits Limits
	memo   map[string]int
	nextID int
}

func (x *expander) sizeErr(n int) error {
	return &Error{Limit: "query.max-size", Value: x.limits.MaxSize, Got: n, What: "size in tokens after expanding WITH templates"}
}

// add sums sizes, saturating well above any limit.
func (x *expander) add(a, b int) (int, error) {
	s := a + b
	if s < a || s > 1<<40 {
		s = 1 << 40
	}
	if x.limits.MaxSize > 0 && s > x.limits.MaxSize {
		return s, x.sizeErr(s)
	}
	return s, nil
}

// size is the token count of nodes expanded in sc. depth is the number of
// template expansions it is nested in.
func (x *expander) size(nodes []node, sc *scope, depth int) (int, error) {
	total := 0
	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		var s int
		var err error
		switch {
		case n.group:
			s, err = x.size(n.children, sc, depth)
			s += 2
		case n.tok.kind == tokIdent && strings.EqualFold(n.tok.text, "with") && i+1 < len(nodes) && nodes[i+1].group && nodes[i+1].tok.text == "(":
			inner := x.define(nodes[i+1].children, sc)
			s, err = x.size(nodes[i+2:], inner, depth)
			i = len(nodes)
		case n.tok.kind == tokIdent:
			t := sc.lookup(n.tok.text)
			switch {
			case t == nil:
				s = 1
			case t.isArg:
				s = t.fixed
			case t.isFunc && i+1 < len(nodes) && nodes[i+1].group && nodes[i+1].tok.text == "(":
				args := splitCommas(nodes[i+1].children)
				sizes := make([]int, len(args))
				for j, a := range args {
					if sizes[j], err = x.size(a, sc, depth); err != nil {
						return 0, err
					}
				}
				s, err = x.expand(t, sizes, depth+1)
				i++
			case t.isFunc:
				s = 1
			default:
				s, err = x.expand(t, nil, depth+1)
			}
		default:
			s = 1
		}
		if err != nil {
			return 0, err
		}
		if total, err = x.add(total, s); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// expand is the size of template t with arguments of the given sizes.
func (x *expander) expand(t *template, args []int, depth int) (int, error) {
	if x.limits.MaxDepth > 0 && depth > x.limits.MaxDepth {
		return 0, &Error{Limit: "query.max-depth", Value: x.limits.MaxDepth, Got: depth, What: "WITH template nesting"}
	}
	var key strings.Builder
	key.WriteString(t.id)
	for _, a := range args {
		key.WriteByte(',')
		key.WriteString(strconv.Itoa(a))
	}
	if s, ok := x.memo[key.String()]; ok {
		return s, nil
	}
	sc := t.scope
	for i, p := range t.params {
		a := 1
		if i < len(args) {
			a = args[i]
		}
		sc = &scope{t: &template{name: p, isArg: true, fixed: a}, next: sc}
	}
	s, err := x.size(t.body, sc, depth)
	if err != nil {
		return 0, err
	}
	x.memo[key.String()] = s
	return s, nil
}

// define reads the definitions of one WITH (name = body, or
// name(params) = body, comma-separated) and returns the scope the WITH's
// expression sees. Each body sees the definitions before it.
func (x *expander) define(defs []node, sc *scope) *scope {
	for _, d := range splitCommas(defs) {
		if len(d) < 2 || d[0].group || d[0].tok.kind != tokIdent {
			continue
		}
		t := &template{name: d[0].tok.text, scope: sc}
		rest := d[1:]
		if rest[0].group && rest[0].tok.text == "(" {
			t.isFunc = true
			for _, p := range splitCommas(rest[0].children) {
				if len(p) == 1 && p[0].tok.kind == tokIdent {
					t.params = append(t.params, p[0].tok.text)
				}
			}
			rest = rest[1:]
		}
		if len(rest) == 0 || rest[0].group || rest[0].tok.kind != tokAssign {
			continue
		}
		t.body = rest[1:]
		x.nextID++
		t.id = strconv.Itoa(x.nextID)
		sc = &scope{t: t, next: sc}
	}
	return sc
}

// splitCommas splits nodes at their top-level commas.
func splitCommas(nodes []node) [][]node {
	var out [][]node
	start := 0
	for i, n := range nodes {
		if !n.group && n.tok.kind == tokComma {
			out = append(out, nodes[start:i])
			start = i + 1
		}
	}
	if start < len(nodes) {
		out = append(out, nodes[start:])
	}
	return out
}

// builtinDefs are the templates metricsql defines for every query
// (getDefaultWithArgExprs); only their sizes matter here.
const builtinDefs = `ru(freev, maxv) = clamp_min(maxv - clamp_min(freev, 0), 0) / clamp_min(maxv, 0) * 100,
ttf(freev) = smooth_exponential(clamp_max(clamp_max(-freev, 0) / clamp_max(deriv_fast(freev), 0), 365*24*3600), clamp_max(step()/300, 1)),
range_median(q) = range_quantile(0.5, q),
alias(q, name) = label_set(q, "__name__", name)`

func builtinScope() *scope {
	x := &expander{}
	sc := x.define(tree(builtinDefs), nil)
	for s := sc; s != nil; s = s.next {
		s.t.id = "builtin:" + s.t.id
	}
	return sc
}
