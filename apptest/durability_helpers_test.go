package apptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// The durability tests drive five kinds of writes at once. Every sample,
// record and evidence item carries a value no other one has, and the
// ledger notes, per value, whether the request that carried it was
// acknowledged (2xx), failed (5xx) or got no answer (the server was
// killed). After a restart, every acknowledged value must be back where it
// was written and no failed one may be.
type writeKind int

const (
	kindRW1 writeKind = iota
	kindRW2
	kindOTLP
	kindRecords
	kindEvidence
	numKinds
)

var kindNames = [numKinds]string{"remote write 1.0", "remote write 2.0", "OTLP metrics", "NDJSON records", "evidence"}

// metricOf names the series of each sample kind.
var metricOf = [numKinds]string{kindRW1: "durable_rw1", kindRW2: "durable_rw2", kindOTLP: "durable_otlp"}

type outcome uint8

const (
	acked outcome = iota + 1
	failed
	unknown
)

// where is where a value was written: the series (client and series
// index) and timestamp of a sample; zero for records and evidence.
type where struct {
	c, s int
	t    int64
}

// ledger is the outcome of every value written in one iteration.
type ledger struct {
	mu     sync.Mutex
	values [numKinds]map[int64]where
	out    [numKinds]map[int64]outcome
	// status counts answers per kind: 2xx, 4xx, 5xx, no answer.
	status [numKinds][4]int
}

func newLedger() *ledger {
	l := &ledger{}
	for k := range numKinds {
		l.values[k] = map[int64]where{}
		l.out[k] = map[int64]outcome{}
	}
	return l
}

func (l *ledger) note(k writeKind, ids []int64, ws []where, code int, err error) {
	o, col := unknown, 3
	switch {
	case err != nil:
	case code >= 200 && code < 300:
		o, col = acked, 0
	case code >= 500:
		o, col = failed, 2
	default:
		o, col = failed, 1 // a 4xx is a test failure, reported by check
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status[k][col]++
	for i, id := range ids {
		l.out[k][id] = o
		if ws != nil {
			l.values[k][id] = ws[i]
		}
	}
}

func (l *ledger) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for k := range numKinds {
		n := [4]int{}
		for _, o := range l.out[k] {
			n[o]++
		}
		fmt.Fprintf(&b, "%s: %d acknowledged, %d in 5xx answers, %d unanswered (requests 2xx/4xx/5xx/none %v); ",
			kindNames[k], n[acked], n[failed], n[unknown], l.status[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// load runs one client per kind (two for remote write 1.0) against a
// server, all writes tagged with the label or node it=<iter>.
type load struct {
	url  string
	iter int
	l    *ledger
	next *atomic.Int64

	stop   chan struct{}
	wg     sync.WaitGroup
	client *http.Client
}

const (
	seriesPerRequest  = 10
	samplesPerSeries  = 5
	recordsPerRequest = 20
	itemsPerRequest   = 10
)

func startLoad(t *testing.T, url string, iter int, l *ledger, next *atomic.Int64, seed uint64) *load {
	t.Helper()
	ld := &load{
		url: url, iter: iter, l: l, next: next, stop: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second},
	}
	clients := []writeKind{kindRW1, kindRW1, kindRW2, kindOTLP, kindRecords, kindEvidence}
	for c, k := range clients {
		ld.wg.Add(1)
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		go ld.run(t, k, c, rng)
	}
	return ld
}

// halt stops the clients and waits for their last requests.
func (ld *load) halt() {
	close(ld.stop)
	ld.wg.Wait()
}

func (ld *load) run(t *testing.T, k writeKind, c int, rng *rand.Rand) {
	defer ld.wg.Done()
	var lastT int64
	for {
		select {
		case <-ld.stop:
			return
		default:
		}
		var (
			ids  []int64
			ws   []where
			req  *http.Request
			err  error
			code int
		)
		switch k {
		case kindRW1, kindRW2, kindOTLP:
			t0 := max(lastT+1, time.Now().UnixMilli())
			lastT = t0 + samplesPerSeries - 1
			for s := range seriesPerRequest {
				for j := range samplesPerSeries {
					ids = append(ids, ld.next.Add(1))
					ws = append(ws, where{c: c, s: s, t: t0 + int64(j)})
				}
			}
			req, err = ld.sampleRequest(k, c, ids, ws)
		case kindRecords:
			n := 1 + rng.IntN(recordsPerRequest)
			for range n {
				ids = append(ids, ld.next.Add(1))
			}
			req, err = ld.recordsRequest(c, ids)
		case kindEvidence:
			n := 1 + rng.IntN(itemsPerRequest)
			for range n {
				ids = append(ids, ld.next.Add(1))
			}
			req, err = ld.evidenceRequest(ids)
		}
		if err != nil {
			t.Errorf("build %s request: %v", kindNames[k], err)
			return
		}
		resp, err := ld.client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
			if code >= 400 && code < 500 {
				t.Errorf("%s: %d %s", kindNames[k], code, body)
			}
		}
		ld.l.note(k, ids, ws, code, err)
		switch {
		case err != nil || code >= 500:
			time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
		case k == kindEvidence:
			// The read-back returns at most 10,000 items per node.
			time.Sleep(3 * time.Millisecond)
		}
	}
}

func (ld *load) sampleRequest(k writeKind, c int, ids []int64, ws []where) (*http.Request, error) {
	it := strconv.Itoa(ld.iter)
	var (
		body []byte
		hdr  = http.Header{}
		path = "/api/v1/write"
	)
	switch k {
	case kindRW1:
		var wr prompb.WriteRequest
		for s := range seriesPerRequest {
			ts := prompb.TimeSeries{Labels: []prompb.Label{
				{Name: "__name__", Value: metricOf[k]},
				{Name: "c", Value: strconv.Itoa(c)},
				{Name: "it", Value: it},
				{Name: "s", Value: strconv.Itoa(s)},
			}}
			for j := range samplesPerSeries {
				i := s*samplesPerSeries + j
				ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: ws[i].t, Value: float64(ids[i])})
			}
			wr.Timeseries = append(wr.Timeseries, ts)
		}
		b, err := wr.Marshal()
		if err != nil {
			return nil, err
		}
		body = snappy.Encode(nil, b)
		hdr.Set("Content-Type", "application/x-protobuf")
		hdr.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	case kindRW2:
		wr := writev2.Request{Symbols: []string{"", "__name__", metricOf[k], "c", strconv.Itoa(c), "it", it, "s"}}
		for s := range seriesPerRequest {
			wr.Symbols = append(wr.Symbols, strconv.Itoa(s))
			ts := writev2.TimeSeries{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6, 7, uint32(len(wr.Symbols) - 1)}}
			for j := range samplesPerSeries {
				i := s*samplesPerSeries + j
				ts.Samples = append(ts.Samples, writev2.Sample{Timestamp: ws[i].t, Value: float64(ids[i])})
			}
			wr.Timeseries = append(wr.Timeseries, ts)
		}
		b, err := wr.Marshal()
		if err != nil {
			return nil, err
		}
		body = snappy.Encode(nil, b)
		hdr.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
		hdr.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	case kindOTLP:
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "durable")
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(metricOf[k])
		g := m.SetEmptyGauge()
		for i, id := range ids {
			dp := g.DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.Timestamp(ws[i].t * 1e6))
			dp.SetDoubleValue(float64(id))
			dp.Attributes().PutStr("c", strconv.Itoa(c))
			dp.Attributes().PutStr("it", it)
			dp.Attributes().PutStr("s", strconv.Itoa(ws[i].s))
		}
		b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		if err != nil {
			return nil, err
		}
		body, path = b, "/api/v1/otlp/v1/metrics"
		hdr.Set("Content-Type", "application/x-protobuf")
	}
	req, err := http.NewRequest(http.MethodPost, ld.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = hdr
	return req, nil
}

func (ld *load) recordsRequest(c int, ids []int64) (*http.Request, error) {
	var b bytes.Buffer
	now := float64(time.Now().UnixMilli()) / 1000
	for _, id := range ids {
		fmt.Fprintf(&b, `{"request_id":"d%d","labels":{"model_name":"durable","it":"%d","c":"%d"},"arrival":%.3f,"finished":%.3f}`+"\n",
			id, ld.iter, c, now-1, now-0.5)
	}
	req, err := http.NewRequest(http.MethodPost, ld.url+"/api/v1/requests", &b)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	return req, nil
}

func (ld *load) evidenceRequest(ids []int64) (*http.Request, error) {
	node := fmt.Sprintf("durable-%d", ld.iter)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var items []string
	for _, id := range ids {
		items = append(items, fmt.Sprintf(`{"kind":"stack","time":%q,"node":%q,"pid":%d,"latency":0.001,"frames":[{"address":"0x1"}]}`, now, node, id))
	}
	body := fmt.Sprintf(`{"node":%q,"evidence":[%s]}`, node, strings.Join(items, ","))
	req, err := http.NewRequest(http.MethodPost, ld.url+"/api/v1/evidence", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// stored reads back what iteration iter wrote: per kind, value → where.
func stored(t *testing.T, app *App, iter int) [numKinds]map[int64]where {
	t.Helper()
	var got [numKinds]map[int64]where
	for k := range numKinds {
		got[k] = map[int64]where{}
	}
	q := fmt.Sprintf(`{__name__=~"%s|%s|%s",it="%d"}[1d]`, metricOf[kindRW1], metricOf[kindRW2], metricOf[kindOTLP], iter)
	code, body := app.Get(t, "/api/v1/query", url.Values{"query": {q}, "time": {strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)}})
	if code != http.StatusOK {
		t.Fatalf("query %s: %d %s", q, code, body)
	}
	var res struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	for _, s := range res.Data.Result {
		k := map[string]writeKind{metricOf[kindRW1]: kindRW1, metricOf[kindRW2]: kindRW2, metricOf[kindOTLP]: kindOTLP}[s.Metric["__name__"]]
		c, _ := strconv.Atoi(s.Metric["c"])
		si, _ := strconv.Atoi(s.Metric["s"])
		for _, v := range s.Values {
			ts, _ := v[0].(float64)
			vs, _ := v[1].(string)
			f, err := strconv.ParseFloat(vs, 64)
			if err != nil {
				t.Fatalf("sample value %v: %v", v[1], err)
			}
			got[k][int64(f)] = where{c: c, s: si, t: int64(math.Round(ts * 1000))}
		}
	}
	for _, r := range getRecords(t, app, fmt.Sprintf(`{model_name="durable",it="%d"}`, iter)) {
		id, err := strconv.ParseInt(strings.TrimPrefix(r.RequestID, "d"), 10, 64)
		if err != nil {
			t.Fatalf("record id %q", r.RequestID)
		}
		if _, dup := got[kindRecords][id]; dup {
			t.Errorf("record %s stored twice", r.RequestID)
		}
		got[kindRecords][id] = where{}
	}
	code, body = app.Get(t, "/api/v1/evidence", url.Values{
		"node": {fmt.Sprintf("durable-%d", iter)}, "limit": {"10000"},
		"start": {strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)}, "end": {strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
	})
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/evidence: %d %s", code, body)
	}
	var ev struct {
		Data []struct {
			PID int64 `json:"pid"`
		} `json:"data"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("decode evidence %s: %v", body, err)
	}
	if len(ev.Warnings) > 0 {
		t.Fatalf("evidence read-back cut short: %v", ev.Warnings)
	}
	for _, it := range ev.Data {
		got[kindEvidence][it.PID] = where{}
	}
	return got
}

// check compares what iteration iter stored with its ledger: every
// acknowledged value at the place it was written, no value of a 5xx
// answer. It returns the acknowledged count.
func (l *ledger) check(t *testing.T, what string, got [numKinds]map[int64]where, iter int) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for k := range numKinds {
		lost, moved, resurrected, ack, fail := 0, 0, 0, 0, 0
		for id, o := range l.out[k] {
			g, ok := got[k][id]
			switch o {
			case acked:
				ack++
				if !ok {
					lost++
				} else if g != l.values[k][id] {
					moved++
				}
			case failed:
				fail++
				if ok {
					resurrected++
				}
			}
		}
		total += ack
		if lost+moved+resurrected > 0 {
			t.Errorf("%s, iteration %d, %s: %d of %d acknowledged values lost, %d at another series or time, %d of %d values of 5xx answers present",
				what, iter, kindNames[k], lost, ack, moved, resurrected, fail)
		}
	}
	return total
}
