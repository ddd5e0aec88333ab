package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// Series import: an OpenMetrics text file (as `promtool tsdb
// dump-openmetrics` writes it) becomes remote write 2.0 requests to
// /api/v1/write. Every sample must carry a timestamp: the TSDB takes a
// sample it already holds (same series, time and value) as a no-op, so a
// rerun adds nothing, which a sample stamped on arrival would not allow.

// omSample is one parsed sample.
type omSample struct {
	ls labels.Labels
	t  int64
	v  float64
}

// loadOpenMetrics parses path; a syntax error stops the file (the parser
// cannot resynchronise), a sample without a timestamp is rejected.
func (im *importer) loadOpenMetrics(path string, data []byte) error {
	p := textparse.NewOpenMetricsParser(data, labels.NewSymbolTable())
	n := 0
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parse OpenMetrics after %d samples: %w", n, err)
		}
		if e != textparse.EntrySeries {
			continue
		}
		n++
		_, ts, v := p.Series()
		var ls labels.Labels
		p.Labels(&ls)
		if ts == nil {
			im.reject(fmt.Sprintf("%s: sample %d %s", path, n, ls), "no timestamp: a rerun could not tell it from a new sample")
			continue
		}
		im.samples = append(im.samples, omSample{ls: ls, t: *ts, v: v})
	}
}

// pushSamples sends the samples in batches; consecutive samples of one
// series share a time series entry.
func (im *importer) pushSamples(ctx context.Context, sum *importSummary) error {
	const perRequest = 10000
	for i := 0; i < len(im.samples); i += perRequest {
		part := im.samples[i:min(i+perRequest, len(im.samples))]
		st := writev2.NewSymbolTable()
		var req writev2.Request
		for k := range part {
			s := &part[k]
			if k == 0 || !labels.Equal(s.ls, part[k-1].ls) {
				req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(s.ls, nil)})
			}
			last := &req.Timeseries[len(req.Timeseries)-1]
			last.Samples = append(last.Samples, writev2.Sample{Value: s.v, Timestamp: s.t})
		}
		req.Symbols = st.Symbols()
		body, err := req.Marshal()
		if err != nil {
			return fmt.Errorf("encode remote write request: %w", err)
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, im.server+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, body)))
		if err != nil {
			return err
		}
		hr.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
		hr.Header.Set("Content-Encoding", "snappy")
		hr.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
		resp, err := im.client.Do(hr)
		if err != nil {
			return fmt.Errorf("push samples: %w", err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		written, herr := strconv.Atoi(resp.Header.Get("X-Prometheus-Remote-Write-Samples-Written"))
		switch {
		case resp.StatusCode/100 == 2:
			sum.SamplesAccepted += len(part)
		case resp.StatusCode == http.StatusBadRequest && herr == nil:
			sum.SamplesAccepted += written
			sum.SamplesRejected += len(part) - written
			sum.Reasons = append(sum.Reasons, rejection{fmt.Sprintf("samples %d–%d", i+1, i+len(part)), strings.TrimSpace(string(msg))})
		default:
			return fmt.Errorf("push samples: %s: %s (rerun to resume: stored samples are not added twice)", resp.Status, bytes.TrimSpace(msg))
		}
	}
	return nil
}
