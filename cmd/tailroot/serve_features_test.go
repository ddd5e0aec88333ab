package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
)

// TestEnableFeature: experimental PromQL functions are refused by default,
// as in Prometheus 3.16 ("function \"info\" is not enabled"), and allowed
// with --enable-feature=promql-experimental-functions; features tailroot
// lacks are refused by name.
func TestEnableFeature(t *testing.T) {
	parse := func(args ...string) *serveConfig {
		c, _, err := parseServeFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		if err := applyFeatures(c.features, &c.query, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	newQuery := func(o query.Options, qs string) error {
		ng, err := query.New(o, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ng.Close()
		_, err = ng.NewInstantQuery(context.Background(), storage.QueryableFunc(func(int64, int64) (storage.Querier, error) {
			return storage.NoopQuerier(), nil
		}), promql.NewPrometheusQueryOpts(false, 0, nil), qs, time.Now())
		return err
	}
	def := parse()
	if err := newQuery(def.query, `info(up)`); err == nil || !strings.Contains(err.Error(), `function "info" is not enabled`) {
		t.Errorf("info() by default: %v", err)
	}
	on := parse("--enable-feature=promql-experimental-functions,promql-delayed-name-removal", "--enable-feature", "native-histograms")
	if !on.query.ExperimentalFunctions || !on.query.DelayedNameRemoval || on.query.BinopFillModifiers {
		t.Errorf("features not applied: %+v", on.query)
	}
	if err := newQuery(on.query, `info(up)`); err != nil {
		t.Errorf("info() with the feature: %v", err)
	}
	c, _, err := parseServeFlags([]string{"--enable-feature=memory-snapshot-on-shutdown"})
	if err != nil {
		t.Fatal(err)
	}
	if err := applyFeatures(c.features, &c.query, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "memory-snapshot-on-shutdown") {
		t.Errorf("unsupported feature: %v", err)
	}
}
