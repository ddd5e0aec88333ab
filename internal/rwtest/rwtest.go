// Package rwtest is a remote-write receiver for tests: it decodes every
// request (1.0 or 2.0), optionally passes it on unchanged to a real
// receiver, and counts each sample the sender got an acknowledgement for, so
// a test can tell a lost sample from a duplicated one even where the real
// receiver silently drops an identical resend.
package rwtest

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// Key names one sample: its series (labels.String) and timestamp.
type Key struct {
	Series string
	T      int64
}

// Metadata is what a write said about a metric family.
type Metadata struct{ Type, Help, Unit string }

// Recorder is an http.Handler receiving remote write.
type Recorder struct {
	// Upstream, when set, is the URL every request is passed on to; the
	// samples are recorded only when it answers 2xx, and its answer is
	// the sender's.
	Upstream string
	// Down, while true, answers 503 without looking at the request, as a
	// receiver that is restarting does.
	Down atomic.Bool

	mu        sync.Mutex
	acks      map[Key]int
	refused   map[Key]int
	values    map[Key]float64
	headers   []http.Header
	metadata  map[string]Metadata
	requests  int
	protos    map[string]int
	exemplars map[Key]float64
}

// New returns an empty recorder passing requests on to upstream (empty for
// none).
func New(upstream string) *Recorder {
	return &Recorder{Upstream: upstream, acks: map[Key]int{}, refused: map[Key]int{}, values: map[Key]float64{}, metadata: map[string]Metadata{}, protos: map[string]int{}, exemplars: map[Key]float64{}}
}

type decoded struct {
	samples   map[Key]float64
	exemplars map[Key]float64
	order     []Key
	metadata  map[string]Metadata
	proto     string
	hist      int
}

func decode(contentType string, body []byte) (*decoded, error) {
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	d := &decoded{samples: map[Key]float64{}, exemplars: map[Key]float64{}, metadata: map[string]Metadata{}}
	add := func(ls labels.Labels, t int64, v float64) {
		k := Key{Series: ls.String(), T: t}
		d.samples[k] = v
		d.order = append(d.order, k)
	}
	if strings.Contains(contentType, "io.prometheus.write.v2.Request") {
		d.proto = "v2"
		var req writev2.Request
		if err := req.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("decode v2: %w", err)
		}
		b := labels.NewScratchBuilder(8)
		for i := range req.Timeseries {
			ts := &req.Timeseries[i]
			ls, err := ts.ToLabels(&b, req.Symbols)
			if err != nil {
				return nil, fmt.Errorf("v2 labels: %w", err)
			}
			for _, s := range ts.Samples {
				add(ls, s.Timestamp, s.Value)
			}
			for _, h := range ts.Histograms {
				d.hist++
				add(ls, h.Timestamp, h.ToFloatHistogram().Count)
			}
			for _, e := range ts.Exemplars {
				d.exemplars[Key{Series: ls.String(), T: e.Timestamp}] = e.Value
			}
			if ts.Metadata.Type != 0 || ts.Metadata.HelpRef != 0 {
				m, err := ts.ToMetadata(req.Symbols)
				if err == nil {
					d.metadata[ls.Get("__name__")] = Metadata{Type: string(m.Type), Help: m.Help, Unit: m.Unit}
				}
			}
		}
		return d, nil
	}
	d.proto = "v1"
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("decode v1: %w", err)
	}
	for _, ts := range req.Timeseries {
		b := labels.NewScratchBuilder(len(ts.Labels))
		for _, l := range ts.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		ls := b.Labels()
		for _, s := range ts.Samples {
			add(ls, s.Timestamp, s.Value)
		}
		for _, h := range ts.Histograms {
			d.hist++
			add(ls, h.Timestamp, h.ToFloatHistogram().Count)
		}
		for _, e := range ts.Exemplars {
			d.exemplars[Key{Series: ls.String(), T: e.Timestamp}] = e.Value
		}
	}
	for _, m := range req.Metadata {
		d.metadata[m.MetricFamilyName] = Metadata{Type: strings.ToLower(m.Type.String()), Help: m.Help, Unit: m.Unit}
	}
	return d, nil
}

func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.Down.Load() {
		http.Error(w, "receiver down", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, err := decode(req.Header.Get("Content-Type"), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	status := http.StatusNoContent
	if r.Upstream != "" {
		up, err := http.NewRequestWithContext(req.Context(), http.MethodPost, r.Upstream, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		up.Header = req.Header.Clone()
		resp, err := http.DefaultClient.Do(up)
		if err != nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		msg, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		if resp.StatusCode/100 != 2 {
			if resp.StatusCode == http.StatusConflict {
				r.mu.Lock()
				for _, k := range d.order {
					r.refused[k]++
				}
				r.mu.Unlock()
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(msg)
			return
		}
		status = resp.StatusCode
	} else if d.proto == "v2" {
		w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", strconv.Itoa(len(d.order)-d.hist))
		w.Header().Set("X-Prometheus-Remote-Write-Histograms-Written", strconv.Itoa(d.hist))
		w.Header().Set("X-Prometheus-Remote-Write-Exemplars-Written", "0")
	}
	r.mu.Lock()
	r.requests++
	r.protos[d.proto]++
	r.headers = append(r.headers, req.Header.Clone())
	for _, k := range d.order {
		r.acks[k]++
		r.values[k] = d.samples[k]
	}
	for n, m := range d.metadata {
		r.metadata[n] = m
	}
	for k, v := range d.exemplars {
		r.exemplars[k] = v
	}
	r.mu.Unlock()
	w.WriteHeader(status)
}

// Acks returns how many acknowledged requests carried each sample, and its
// value.
func (r *Recorder) Acks() (map[Key]int, map[Key]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := make(map[Key]int, len(r.acks))
	v := make(map[Key]float64, len(r.values))
	for k, n := range r.acks {
		a[k] = n
		v[k] = r.values[k]
	}
	return a, v
}

// Refused returns how many requests the upstream answered 409 Conflict
// carried each sample. Thanos Receive answers 409 to a request holding a
// sample older than one it already has for that series: a resend of a
// request it had written but whose answer was lost (a receiver stopped or
// restarting mid-request). The sender drops such a request, rightly; only
// the receiver's own query API can then tell whether the samples are there.
func (r *Recorder) Refused() map[Key]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.refused)
}

// Count is the number of distinct samples acknowledged so far.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks)
}

// Headers returns the headers of every acknowledged request.
func (r *Recorder) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Metadata returns the metric metadata seen, by family.
func (r *Recorder) Metadata() map[string]Metadata {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.metadata)
}

// Exemplars returns the exemplars seen, keyed by their series and
// timestamp, with their values.
func (r *Recorder) Exemplars() map[Key]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.exemplars)
}

// Protocols returns how many acknowledged requests used each protocol
// ("v1", "v2").
func (r *Recorder) Protocols() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.protos)
}

// Series lists the distinct series seen, sorted.
func (r *Recorder) Series() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := map[string]bool{}
	for k := range r.acks {
		set[k.Series] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
