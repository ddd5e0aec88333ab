package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/tailroot/tailroot/query"
)

// featureList is Prometheus' repeatable, comma-separated --enable-feature.
type featureList []string

func (f *featureList) String() string { return strings.Join(*f, ",") }

func (f *featureList) Set(v string) error {
	for o := range strings.SplitSeq(v, ",") {
		if o = strings.TrimSpace(o); o != "" {
			*f = append(*f, o)
		}
	}
	return nil
}

// applyFeatures sets the options Prometheus' --enable-feature names, with
// Prometheus' meaning. Features that are permanent in Prometheus 3 are
// accepted as no-ops, as Prometheus does; features tailroot does not have
// are refused by name, since starting without them would silently change
// what the user asked for.
func applyFeatures(features []string, q *query.Options, logger *slog.Logger) error {
	var unknown []string
	for _, f := range features {
		switch f {
		case "promql-experimental-functions":
			q.ExperimentalFunctions = true
		case "promql-delayed-name-removal":
			q.DelayedNameRemoval = true
		case "promql-binop-fill-modifiers":
			q.BinopFillModifiers = true
		case "promql-unquoted-utf8-names":
			q.UnquotedUTF8Names = true
		case "native-histograms", "ooo-native-histograms", "promql-duration-expr", "promql-extended-range-selectors", "exemplar-storage", "use-start-timestamps":
			logger.Warn("this option for --enable-feature is always on in tailroot and therefore a no-op", "option", f)
		default:
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("--enable-feature: %s not supported by tailroot (supported: promql-experimental-functions, promql-delayed-name-removal, promql-binop-fill-modifiers, promql-unquoted-utf8-names)", strings.Join(unknown, ", "))
	}
	return nil
}
