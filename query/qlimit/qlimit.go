package qlimit

import (
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Limits bound what one query string may cost before it is evaluated. Zero
// or negative in a field means that limit is off; DefaultLimits gives the
// ones tailroot serves with.
type Limits struct {
	// MaxLength is the longest query accepted, in bytes.
	MaxLength int
	// MaxSize is the most tokens a query may have, counted before parsing,
	// and after MetricsQL WITH templates are expanded.
	MaxSize int
	// MaxDepth is the deepest nesting accepted: brackets before parsing,
	// the syntax tree after parsing (a chain a+b+c+… is as deep as it is
	// long, and printing it is quadratic in that depth), and template
	// references inside templates when WITH is expanded.
	MaxDepth int
}

// DefaultLimits returns the limits of `tailroot serve`: room for the
// longest dashboard queries seen in practice (regexps of a few thousand
// alternatives, a few hundred joined selectors), while a 40 KB a+a+… or a
// 400-byte WITH query that expands to gigabytes is refused in microseconds.
func DefaultLimits() Limits {
	return Limits{MaxLength: 128 << 10, MaxSize: 20000, MaxDepth: 128}
}

// Error is a refusal: the query is over the limit named by Limit. The API
// answers it with 400 bad_data, like a parse error, since the same query
// is refused every time.
type Error struct {
	// Limit names the limit as its serve flag does (query.max-length,
	// query.max-size, query.max-depth).
	Limit string
	// Value is the limit, Got what the query has (at least).
	Value, Got int
	// What says what was measured.
	What string
}

func (e *Error) Error() string {
	return fmt.Sprintf("query %s is over the limit: %d, more than %s=%d", e.What, e.Got, e.Limit, e.Value)
}

// Check measures q without parsing it: its length, its tokens and its
// bracket nesting. It costs one pass over q and allocates nothing.
func Check(q string, l Limits) error {
	if l.MaxLength > 0 && len(q) > l.MaxLength {
		return &Error{Limit: "query.max-length", Value: l.MaxLength, Got: len(q), What: "length in bytes"}
	}
	if l.MaxSize <= 0 && l.MaxDepth <= 0 {
		return nil
	}
	var tokens, depth, maxDepth int
	scan(q, func(t token) bool {
		tokens++
		switch t.kind {
		case tokOpen:
			depth++
			maxDepth = max(maxDepth, depth)
		case tokClose:
			depth = max(depth-1, 0)
		}
		return (l.MaxSize <= 0 || tokens <= l.MaxSize) && (l.MaxDepth <= 0 || maxDepth <= l.MaxDepth)
	})
	if l.MaxSize > 0 && tokens > l.MaxSize {
		return &Error{Limit: "query.max-size", Value: l.MaxSize, Got: tokens, What: "size in tokens"}
	}
	if l.MaxDepth > 0 && maxDepth > l.MaxDepth {
		return &Error{Limit: "query.max-depth", Value: l.MaxDepth, Got: maxDepth, What: "bracket nesting"}
	}
	return nil
}

// CheckExpr measures a parsed expression's depth, which bounds what
// printing it (format_query, parse_query) and evaluating it recursively
// cost. It stops walking as soon as the limit is passed.
func CheckExpr(e parser.Expr, l Limits) error {
	if l.MaxDepth <= 0 || e == nil {
		return nil
	}
	if d := depth(e, 1, l.MaxDepth); d > l.MaxDepth {
		return &Error{Limit: "query.max-depth", Value: l.MaxDepth, Got: d, What: "expression depth"}
	}
	return nil
}

// depth returns the depth of the tree under n, or the first depth over
// limit it meets.
func depth(n parser.Node, at, limit int) int {
	if at > limit {
		return at
	}
	deepest := at
	for _, c := range parser.Children(n) {
		if c == nil {
			continue
		}
		if d := depth(c, at+1, limit); d > deepest {
			deepest = d
			if d > limit {
				return d
			}
		}
	}
	return deepest
}

// Parser is a parser.Parser that refuses queries over its limits before
// (and, for depth, right after) parsing them. The engine, format_query,
// parse_query and the series matchers all parse through it.
type Parser struct {
	parser.Parser
	Limits Limits
}

// ParseExpr implements parser.Parser.
func (p Parser) ParseExpr(q string) (parser.Expr, error) {
	if err := Check(q, p.Limits); err != nil {
		return nil, err
	}
	e, err := p.Parser.ParseExpr(q)
	if err != nil {
		return e, err
	}
	if err := CheckExpr(e, p.Limits); err != nil {
		return nil, err
	}
	return e, nil
}

// ParseMetricSelector implements parser.Parser.
func (p Parser) ParseMetricSelector(q string) ([]*labels.Matcher, error) {
	if err := Check(q, p.Limits); err != nil {
		return nil, err
	}
	return p.Parser.ParseMetricSelector(q)
}

// ParseMetricSelectors implements parser.Parser.
func (p Parser) ParseMetricSelectors(qs []string) ([][]*labels.Matcher, error) {
	for _, q := range qs {
		if err := Check(q, p.Limits); err != nil {
			return nil, err
		}
	}
	return p.Parser.ParseMetricSelectors(qs)
}
