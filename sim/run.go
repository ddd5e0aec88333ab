package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retry backoff bounds, as Prometheus' remote-write queue defaults
// (min_backoff 30ms, max_backoff 5s) rounded up at the low end.
var (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// writePath is where a tailroot server (or Prometheus with the receiver on)
// accepts remote write.
const writePath = "/api/v1/write"

// Run sends Backfill worth of history ending at Start, then one step every
// Interval until ctx is done. Steps that fall due while a request is in
// flight or being retried are sent together afterwards, so a slow or absent
// server delays steps but loses none. Server errors (5xx), 429 and
// connection errors are retried with exponential backoff for as long as ctx
// lives; other 4xx answers mean the server will never take the batch, which
// is then logged at error level with its sample count and skipped.
//
// Run returns nil when ctx is done (logging any batch still unsent) and an
// error only when the options do not allow it to start.
func (s *Simulator) Run(ctx context.Context) error {
	o := &s.opts
	if o.URL == "" {
		return errors.New("run: Options.URL is empty")
	}
	endpoint := strings.TrimRight(o.URL, "/") + writePath
	start := o.Start
	if start.IsZero() {
		start = time.Now()
	}
	n := int64(o.Backfill / o.Interval)
	next := start.Add(-time.Duration(n) * o.Interval)
	if !o.Resume.IsZero() {
		// The steps up to Resume are stored: send only the gap, so a
		// restart neither re-sends samples (which the TSDB would reject
		// as out of order) nor duplicates records.
		next = o.Resume.Add(o.Interval)
		n = max(0, int64(time.Until(next)/o.Interval)+1)
	}
	log := o.Logger.With("url", endpoint, "proto", o.ProtoMsg)
	log.Info("simulator starting", "series_per_step", s.NumSeries(),
		"instances", len(s.instances), "backfill_steps", n, "interval", o.Interval)

	p := &pusher{s: s, url: endpoint, log: log}
	for {
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				log.Info("simulator stopped", "steps_sent", p.steps, "samples_sent", p.samples)
				return nil
			case <-t.C:
			}
		}
		// Take every step that is due, up to a batch of samples.
		var acc []Series
		steps, samples := 0, 0
		now := time.Now()
		for !next.After(now) && (steps == 0 || samples+s.NumSeries() <= o.BatchSamples) {
			acc = merge(acc, s.Step(next))
			steps++
			samples += s.NumSeries()
			next = next.Add(o.Interval)
		}
		if err := p.push(ctx, acc, steps); err != nil {
			log.Warn("simulator stopped with steps unsent", "steps_unsent", steps, "samples_unsent", samples,
				"steps_sent", p.steps, "samples_sent", p.samples)
			return nil
		}
		// The steps are stored once their series are: report them before
		// the records go, so a stop while records are in flight loses
		// those records (at most one batch) rather than making a resumed
		// Run send the stored series again, which the TSDB would refuse.
		if o.Sent != nil {
			o.Sent(next.Add(-o.Interval))
		}
		if recs := s.TakeRecords(); o.RecordSink != nil && len(recs) > 0 {
			if err := o.RecordSink(ctx, recs); err != nil {
				if ctx.Err() != nil {
					log.Warn("simulator stopped with records unsent", "records_unsent", len(recs))
					return nil
				}
				log.Error("records dropped", "records", len(recs), "err", err)
			}
		}
	}
}

// merge appends the samples of step (one Step result) to acc, which holds
// earlier steps' series in the same order.
func merge(acc, step []Series) []Series {
	if acc == nil {
		return step
	}
	if len(acc) != len(step) {
		panic(fmt.Sprintf("BUG: step has %d series, earlier steps %d", len(step), len(acc)))
	}
	for i := range acc {
		acc[i].Samples = append(acc[i].Samples, step[i].Samples...)
		acc[i].Histograms = append(acc[i].Histograms, step[i].Histograms...)
	}
	return acc
}

// batches splits series into requests of at most max samples each, cutting
// a series between samples where needed; samples keep their time order.
func batches(series []Series, maxSamples int) [][]Series {
	var (
		out [][]Series
		cur []Series
		n   int
	)
	for _, s := range series {
		for len(s.Samples)+len(s.Histograms) > 0 {
			room := maxSamples - n
			part := Series{Labels: s.Labels, Metadata: s.Metadata}
			k := min(room, len(s.Samples))
			part.Samples, s.Samples = s.Samples[:k:k], s.Samples[k:]
			room -= k
			k = min(room, len(s.Histograms))
			part.Histograms, s.Histograms = s.Histograms[:k:k], s.Histograms[k:]
			room -= k
			if len(part.Samples)+len(part.Histograms) > 0 {
				cur = append(cur, part)
				n += len(part.Samples) + len(part.Histograms)
			}
			if room == 0 {
				out = append(out, cur)
				cur, n = nil, 0
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

type pusher struct {
	s       *Simulator
	url     string
	log     *slog.Logger
	enc     encoder
	steps   int
	samples int
	// rejected counts samples in batches the server refused for good.
	rejected int
}

// push sends steps worth of merged series, split into batches. It returns
// an error only when ctx ends before every batch is acknowledged.
func (p *pusher) push(ctx context.Context, series []Series, steps int) error {
	o := &p.s.opts
	for _, b := range batches(series, o.BatchSamples) {
		n := 0
		for _, s := range b {
			n += len(s.Samples) + len(s.Histograms)
		}
		body, err := p.enc.encode(o.ProtoMsg, b)
		if err != nil {
			// Our own series failed to encode: a bug, not a server problem.
			panic(fmt.Sprintf("BUG: %v", err))
		}
		ok, err := p.send(ctx, body, n)
		if err != nil {
			return err
		}
		if !ok {
			p.rejected += n
			continue
		}
		p.samples += n
	}
	p.steps += steps
	return nil
}

// send posts one body until the server accepts it (true), rejects it for
// good (false, logged), or ctx ends (then it returns ctx's error).
func (p *pusher) send(ctx context.Context, body []byte, samples int) (bool, error) {
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		retry, after, err := p.post(ctx, body)
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if !retry {
			p.log.Error("remote write rejected, batch dropped", "samples", samples, "err", err)
			return false, nil
		}
		wait := backoff
		if after > 0 {
			wait = min(after, maxBackoff)
		}
		p.log.Warn("remote write failed, retrying", "attempt", attempt, "samples", samples, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// post makes one attempt. retry says whether a failure may succeed later;
// after is the server's Retry-After, if any.
func (p *pusher) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	o := &p.s.opts
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("User-Agent", "tailroot-sim")
	if o.ProtoMsg == ProtoMsgV1 {
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	} else {
		req.Header.Set("Content-Type", "application/x-protobuf;proto="+ProtoMsgV2)
		req.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return true, 0, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("server returned %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	if resp.StatusCode/100 == 5 || resp.StatusCode == http.StatusTooManyRequests {
		if sec, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && sec > 0 {
			after = time.Duration(sec) * time.Second
		}
		return true, after, err
	}
	return false, 0, err
}
