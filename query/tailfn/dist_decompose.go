package tailfn

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution"
)

// The attribution endpoints over a Cluster: the breakdown of Decompose
// and the A/B interval, from the same protocol rounds as the record
// functions, so that /api/v1/attribution/breakdown, /report and /ab answer
// over every node exactly as tail_mean, tail_euler, tail_excess,
// tail_shapley, tail_heat and quantile_diff_ci do.

// Decompose is Decompose over the cluster: for metric e2e the request
// count, the breakdown (tail_mean, excess and euler by selection and
// sums; shapley from the stage columns of both windows) and the heat
// table cover every node, with the same numbers as one server holding all
// the records (up to the order of addition). What needs whole records
// stays local and says so in a warning: req.Visit, which sees this
// server's records only. Metric ttft decomposes every node's records'
// time to first token, as Decompose does one server's. Method auto falls
// back to the series when no node holds a request. A peer that does not answer fails the call (an error naming
// it, wrapping *PeerError) unless ctx accepts partial responses
// (WithPartialResponse), when the answer covers the other nodes and says
// so in d.Nodes and a warning.
func (c *Cluster) Decompose(ctx context.Context, fb SeriesFallback, req DecomposeRequest) (Decomposition, error) {
	if !slices.Contains(DecomposeMethods, req.Method) {
		return Decomposition{}, fmt.Errorf("method %q: want one of %v", req.Method, DecomposeMethods)
	}
	if req.Metric != "e2e" && req.Metric != "ttft" {
		return Decomposition{}, fmt.Errorf("metric %q: want e2e or ttft", req.Metric)
	}
	// Metric ttft asks every node for its records' time to first token
	// as stages (RecordsTTFT), left out where a record has none.
	records := ""
	if req.Metric == "ttft" {
		records = RecordsTTFT
	}
	var visitWarning string
	if req.Visit != nil {
		if _, err := Load(ctx, c.local, req.Window, req.Visit); err != nil {
			return Decomposition{}, err
		}
		visitWarning = fmt.Sprintf("label summaries and token heat read this server's records only (1 of %d nodes)", len(c.shards))
	}
	var d Decomposition
	empty, emptyBase := false, false
	fn := "attribution " + req.Method
	nodes, err := c.runOn(ctx, fn, func(s *attempt) error {
		d, empty, emptyBase = Decomposition{}, false, false
		v := s.recordsView(req.Window, "e2e", records)
		cs, err := v.summary()
		if err != nil {
			return err
		}
		d.Clamped = cs.clamped
		clampWarning(&d.Warnings, cs.clamped, cs.clampedMax)
		skippedWarning(&d.Warnings, cs.skipped)
		if cs.n == 0 {
			empty = true
			return nil
		}
		d.Requests = cs.n
		switch req.Method {
		case "auto", "tail_mean":
			d.Breakdown, err = distTail(v, cs, req.P, attribution.MethodTailMeanRecords)
		case "excess":
			d.Breakdown, err = distTail(v, cs, req.P, attribution.MethodExcess)
		case "euler":
			d.Breakdown, err = distEuler(v, cs, req.P)
		case "shapley":
			var now, base attribution.Requests
			if now, _, _, err = v.stageColumns(fn); err != nil {
				return err
			}
			bv := s.recordsView(req.Baseline, "e2e", records)
			var bc int
			var bmax float64
			if base, bc, bmax, err = bv.stageColumns(fn); err != nil {
				return err
			}
			clampWarning(&d.Warnings, bc, bmax)
			skippedWarning(&d.Warnings, bv.skipped)
			if base.Len() == 0 {
				emptyBase = true
				return nil
			}
			var res attribution.ShapleyResult
			if res, err = attribution.Shapley(now, base, req.P); err != nil {
				return markUnanswerable(err)
			}
			d.Breakdown = res.Breakdown
		}
		if err != nil {
			return err
		}
		if req.Heat {
			h, err := distHeatTable(v, attribution.DefaultBands())
			if err != nil {
				return err
			}
			d.Heat = &h
		}
		return nil
	})
	if err != nil {
		return Decomposition{Nodes: nodes}, err
	}
	if empty {
		if req.Method == "auto" && req.Metric == "e2e" {
			d, err = fromSeries(ctx, fb, req)
		} else {
			err = noRequests("window")
		}
	} else if emptyBase {
		err = noRequests("baseline window")
	}
	d.Nodes = nodes
	if nodes.Partial() {
		d.Warnings = append(d.Warnings, nodes.warning(fn))
	}
	if visitWarning != "" {
		d.Warnings = append(d.Warnings, visitWarning)
	}
	return d, err
}

// clampWarning is the warning Decompose gives for requests with
// overlapping stages.
func clampWarning(warnings *[]string, clamped int, clampedMax float64) {
	if clamped > 0 {
		*warnings = append(*warnings, fmt.Sprintf("%d requests had overlapping stages (negative other, down to -%gs); other was set to 0", clamped, clampedMax))
	}
}

// skippedWarning is the warning Decompose gives for records metric ttft
// leaves out.
func skippedWarning(warnings *[]string, skipped int) {
	if skipped > 0 {
		*warnings = append(*warnings, fmt.Sprintf("%d requests without a TTFT, or with queue+tokenize+prefill above it, were left out", skipped))
	}
}

// QuantileDiff is the A/B comparison of the attribution endpoint:
// P_p(b) − P_p(a) with its interval.
type QuantileDiff struct {
	Interval attribution.Interval
	A, B     float64 // the two quantiles
	NA, NB   int     // the requests of each window
	Nodes    Nodes
	Warnings []string
}

// QuantileDiff is attribution.QuantileDiffCI(b, a, …) of field over the
// cluster's nodes, as quantile_diff_ci computes it (the bootstrap and
// Maritz–Jarrett from their rank spans up to ClusterOptions.MaxCIValues
// values, else by the order statistic with a warning saying so). Field
// ttft is over the records that have one (Population.WithTTFT), as the
// A/B endpoint compares them. Errors:
// ErrNoRequests when a window holds no request on any node; attribution.ErrInvalidMethod
// for a method refused at this p and n; ErrUnanswerable when the data
// cannot answer; a peer that does not answer as for Decompose.
func (c *Cluster) QuantileDiff(ctx context.Context, wa, wb Window, field string, p, level float64, opts attribution.CIOptions) (QuantileDiff, error) {
	if err := CheckField(field); err != nil {
		return QuantileDiff{}, err
	}
	const fn = "attribution ab"
	records := ""
	if field == "ttft" {
		records = RecordsWithTTFT
	}
	var out QuantileDiff
	var empty bool
	nodes, err := c.runOn(ctx, fn, func(s *attempt) error {
		out, empty = QuantileDiff{}, false
		va, vb := s.recordsView(wa, field, records), s.recordsView(wb, field, records)
		ca, err := va.summary()
		if err != nil {
			return err
		}
		cb, err := vb.summary()
		if err != nil {
			return err
		}
		out.NA, out.NB = ca.n, cb.n
		if ca.n == 0 || cb.n == 0 {
			empty = true
			return nil
		}
		if err := attribution.CheckDiffCI(cb.n, ca.n, p, level, opts.Method); err != nil {
			if errors.Is(err, attribution.ErrInvalidMethod) {
				return err
			}
			return markUnanswerable(err)
		}
		var annos annotations.Annotations
		iv, qb, qa, err := distDiff(vb, cb, va, ca, p, level, opts, c.opts.MaxCIValues, fn, &annos)
		var de dataError
		if asDataError(err, &de) {
			return markUnanswerable(de.err)
		}
		if err != nil {
			return err
		}
		out.Interval, out.A, out.B = iv, qa, qb
		for _, a := range annos.AsErrors() {
			out.Warnings = append(out.Warnings, a.Error())
		}
		slices.Sort(out.Warnings)
		return nil
	})
	out.Nodes = nodes
	if err != nil {
		return out, err
	}
	if empty {
		return out, noRequests("window")
	}
	if nodes.Partial() {
		out.Warnings = append(out.Warnings, nodes.warning(fn))
	}
	return out, nil
}
