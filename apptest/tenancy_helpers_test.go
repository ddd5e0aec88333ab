package apptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"golang.org/x/crypto/bcrypt"
)

// tenantClient talks to a tailroot server as one tenant: the tenant
// header, and basic auth when user is set.
type tenantClient struct {
	url, tenant, user, pass string
}

func (c tenantClient) do(t testing.TB, method, path string, params url.Values, ct string, body []byte, hdr http.Header) (int, http.Header, []byte) {
	t.Helper()
	u := c.url + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if c.tenant != "" {
		req.Header.Set("X-Scope-OrgID", c.tenant)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func (c tenantClient) get(t testing.TB, path string, params url.Values) (int, []byte) {
	t.Helper()
	code, _, b := c.do(t, http.MethodGet, path, params, "", nil, nil)
	return code, b
}

// mustGet is get that fails the test on anything but 200.
func (c tenantClient) mustGet(t testing.TB, path string, params url.Values) []byte {
	t.Helper()
	code, b := c.get(t, path, params)
	if code != http.StatusOK {
		t.Fatalf("%s as %s: %d %s", path, c.tenant, code, b)
	}
	return b
}

// tenantData is what one tenant writes: every label value, metric name,
// request id and node carries mark, so any of it in another tenant's
// answer is found by a substring search.
type tenantData struct {
	mark string
	ts   time.Time
	// values of the tq_metric series, which both tenants write under the
	// same labels.
	value float64
	// scale multiplies the end-to-end times of the records.
	scale float64
	// noSpoof leaves out the tenant_id label the spoofing series and
	// records send: what a tenant sees of them with tenancy on, for the
	// reference server without tenancy.
	noSpoof bool
}

func rw1Body(t testing.TB, d tenantData, extra ...prompb.TimeSeries) []byte {
	t.Helper()
	ms := d.ts.UnixMilli()
	wr := prompb.WriteRequest{
		Timeseries: append([]prompb.TimeSeries{
			// Both tenants write this exact series.
			{
				Labels:    []prompb.Label{{Name: "__name__", Value: "tq_metric"}, {Name: "job", Value: "shared"}},
				Samples:   []prompb.Sample{{Timestamp: ms, Value: d.value}},
				Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: d.mark + "-trace"}}, Value: d.value, Timestamp: ms}},
			},
			{
				Labels:  []prompb.Label{{Name: "__name__", Value: "tq_metric"}, {Name: "job", Value: d.mark + "-job"}},
				Samples: []prompb.Sample{{Timestamp: ms, Value: d.value + 1}},
			},
			{
				Labels:  []prompb.Label{{Name: "__name__", Value: d.mark + "_rw1_total"}, {Name: "job", Value: "x"}},
				Samples: []prompb.Sample{{Timestamp: ms, Value: 5}},
			},
			// A client-sent tenant label is replaced by the writer's tenant.
			{
				Labels:  spoofLabels(d, prompb.Label{Name: "__name__", Value: "tq_spoof"}, prompb.Label{Name: "job", Value: d.mark + "-spoof"}),
				Samples: []prompb.Sample{{Timestamp: ms, Value: 9}},
			},
		}, extra...),
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: d.mark + "_rw1", Help: d.mark + " help"}},
	}
	b, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, b)
}

func spoofLabels(d tenantData, ls ...prompb.Label) []prompb.Label {
	if d.noSpoof {
		return ls
	}
	return append(ls, prompb.Label{Name: "tenant_id", Value: "B"})
}

var rw1Header = http.Header{"X-Prometheus-Remote-Write-Version": {"0.1.0"}}

func rw2Body(t testing.TB, d tenantData) []byte {
	t.Helper()
	wr := writev2.Request{
		Symbols:    []string{"", "__name__", d.mark + "_rw2", "job", d.mark + "-job"},
		Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Timestamp: d.ts.UnixMilli(), Value: 7}}}},
	}
	b, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, b)
}

func otlpMetricsBody(t testing.TB, d tenantData) []byte {
	t.Helper()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", d.mark+"-service")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(d.mark + "_otlp_gauge")
	m.SetDescription(d.mark + " otlp help")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(d.ts.UnixNano()))
	dp.SetDoubleValue(3)
	dp.Attributes().PutStr("job", d.mark+"-job")
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordsBody is n request records of model <mark>-model, e2e
// scale·(from+1)/10 … scale·(from+n)/10 s;
// with spoof, each also sends tenant_id="B".
func recordsBody(d tenantData, from, n int, spoof bool) []byte {
	var b bytes.Buffer
	arr := float64(d.ts.UnixMilli()) / 1000
	for i := from; i < from+n; i++ {
		extra := ""
		if spoof && !d.noSpoof {
			extra = `,"tenant_id":"B"`
		}
		fmt.Fprintf(&b, `{"request_id":"%s-%d","labels":{"model_name":"%s-model","instance":"%s-host"%s},"arrival":%.3f,"finished":%.3f}`+"\n",
			d.mark, i, d.mark, d.mark, extra, arr, arr+d.scale*float64(i+1)/10)
	}
	return b.Bytes()
}

func tenantEvidenceBody(d tenantData) []byte {
	node := d.mark + "-node"
	item := fmt.Sprintf(`{"kind":"stack","time":%q,"node":%q,"pid":42,"comm":"%s-comm","latency":0.25,"frames":[{"address":"0x1","function":"%s_fn"}]}`,
		d.ts.UTC().Format(time.RFC3339Nano), node, d.mark, d.mark)
	return []byte(fmt.Sprintf(`{"node":%q,"evidence":[%s]}`, node, item))
}

// writeAll writes d through every ingest path as c and fails on any
// refusal.
func writeAll(t *testing.T, c tenantClient, d tenantData) {
	t.Helper()
	for _, w := range []struct {
		path, ct string
		body     []byte
		hdr      http.Header
		want     int
	}{
		{"/api/v1/write", "application/x-protobuf", rw1Body(t, d), rw1Header, http.StatusNoContent},
		{"/api/v1/write", "application/x-protobuf;proto=io.prometheus.write.v2.Request", rw2Body(t, d), http.Header{"X-Prometheus-Remote-Write-Version": {"2.0.0"}}, http.StatusNoContent},
		{"/api/v1/otlp/v1/metrics", "application/x-protobuf", otlpMetricsBody(t, d), nil, http.StatusOK},
		{"/api/v1/requests", "application/x-ndjson", recordsBody(d, 0, 10, false), nil, http.StatusOK},
		{"/api/v1/requests", "application/x-ndjson", recordsBody(d, 10, 10, true), nil, http.StatusOK},
		{"/api/v1/evidence", "application/json", tenantEvidenceBody(d), nil, http.StatusOK},
	} {
		code, _, b := c.do(t, http.MethodPost, w.path, nil, w.ct, w.body, w.hdr)
		if code != w.want {
			t.Fatalf("write %s as %s: %d %s, want %d", w.path, c.tenant, code, b, w.want)
		}
	}
}

// remoteReadNames runs a remote read of every series as c and returns the
// label sets it got.
func remoteReadNames(t *testing.T, c tenantClient, start, end time.Time) []string {
	t.Helper()
	rr := prompb.ReadRequest{Queries: []*prompb.Query{{
		StartTimestampMs: start.UnixMilli(), EndTimestampMs: end.UnixMilli(),
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: ".+"}},
	}}}
	b, err := rr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	code, _, body := c.do(t, http.MethodPost, "/api/v1/read", nil, "application/x-protobuf", snappy.Encode(nil, b),
		http.Header{"X-Prometheus-Remote-Read-Version": {"0.1.0"}})
	if code != http.StatusOK {
		t.Fatalf("remote read as %s: %d %s", c.tenant, code, body)
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	var resp prompb.ReadResponse
	if err := resp.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range resp.Results {
		for _, s := range r.Timeseries {
			var parts []string
			for _, l := range s.Labels {
				parts = append(parts, l.Name+"="+l.Value)
			}
			out = append(out, strings.Join(parts, ","))
		}
	}
	sort.Strings(out)
	return out
}

// tenancyConfigFile writes the tenancy configuration of the test: alice
// may read and write A, bob B; A has tight limits, B none.
func tenancyConfigFile(t *testing.T) string {
	t.Helper()
	ha, err := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := bcrypt.GenerateFromPassword([]byte("bob-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`users:
  - username: alice
    password_hash: %q
    tenants: [A]
  - username: bob
    password_hash: %q
    tenants: [B]
overrides:
  A:
    max_active_series: %d
    samples_per_second: %d
    records_per_second: %d
    max_concurrent_queries: 1
`, ha, hb, limitSeries, limitSamples, limitRecords)
	p := filepath.Join(t.TempDir(), "tenancy.yml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A's limits. Its data phase writes 7 series, 7 samples and 20 records.
const (
	limitSeries  = 40
	limitSamples = 200
	limitRecords = 30
)

// manySeries is a remote-write body of n series named name with k samples
// each, one millisecond apart.
func manySeries(t testing.TB, name string, n, k int, ts time.Time) []byte {
	t.Helper()
	var wr prompb.WriteRequest
	for i := range n {
		s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "i", Value: strconv.Itoa(i)}}}
		for j := range k {
			s.Samples = append(s.Samples, prompb.Sample{Timestamp: ts.UnixMilli() + int64(j), Value: float64(j)})
		}
		wr.Timeseries = append(wr.Timeseries, s)
	}
	b, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, b)
}

// metricSets decodes a vector or matrix answer into its sorted label sets
// (rendered as name=value lists) and values.
func metricSets(t testing.TB, body []byte) []string {
	t.Helper()
	var d struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	decodeDataTB(t, body, &d)
	var out []string
	for _, r := range d.Result {
		var parts []string
		for k, v := range r.Metric {
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		val := fmt.Sprint(r.Value[1])
		if r.Values != nil {
			val = fmt.Sprint(r.Values)
		}
		out = append(out, strings.Join(parts, ",")+" "+val)
	}
	slices.Sort(out)
	return out
}

func decodeDataTB(t testing.TB, body []byte, v any) {
	t.Helper()
	var r Response
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("answer %s (%v)", body, err)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
}
