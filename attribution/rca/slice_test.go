package rca

import (
	"slices"
	"testing"
)

func TestTargetMetric(t *testing.T) {
	for _, tc := range []struct {
		name, given, want string
	}{
		{"vllm:time_to_first_token_seconds (fleet mean)", "", "vllm:time_to_first_token_seconds"},
		{`vllm:e2e_request_latency_seconds{instance="a:8000"}`, "", "vllm:e2e_request_latency_seconds"},
		{"ttft", "", "ttft"},
		{"sum(rate(vllm:time_to_first_token_seconds_sum[1m]))", "", ""},
		{"rate(x[1m])", "", ""},
		{"9lives", "", ""},
		{"", "", ""},
		{"sum(rate(a_sum[1m])) / sum(rate(a_count[1m]))", "a", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := targetMetric(tc.name, Options{TargetMetric: tc.given}); got != tc.want {
				t.Errorf("targetMetric(%q, %q) = %q, want %q", tc.name, tc.given, got, tc.want)
			}
		})
	}
}

func TestSliceOf(t *testing.T) {
	cands := []Candidate{
		{Metric: "rate", Values: []float64{0}},
		{Metric: "ttft", Values: []float64{1}},
		{Metric: "ttft", Values: []float64{2}},
		{Metric: "rate", Values: []float64{3}},
		{Metric: "ttft", Values: []float64{4}},
		{Metric: "ttft", Values: []float64{5}},
		{Metric: "rate", Values: []float64{6}},
		{Metric: "rate", Values: []float64{7}},
	}
	groups := []string{"a", "a", "b", "b", "c", "c", "", "c"}
	for _, tc := range []struct {
		name   string
		metric string
		i      int
		want   []float64
	}{
		{"same host", "ttft", 0, []float64{1}},
		{"other host", "ttft", 3, []float64{2}},
		{"two series of the metric on the host", "ttft", 7, nil},
		{"no group", "ttft", 6, nil},
		{"no target metric", "", 0, nil},
		{"metric absent", "queue", 0, nil},
		{"the slice itself", "ttft", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sliceOf(cands, groups, tc.metric, tc.i); !slices.Equal(got, tc.want) {
				t.Errorf("sliceOf(%q, %d) = %v, want %v", tc.metric, tc.i, got, tc.want)
			}
		})
	}
}
