package ingest

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// TestOTLPValidation sends the hostile OTLP points next to a good
// one: each bad one is rejected and named in partial_success, the good one
// is stored, and nothing is stored for the bad ones (in particular no
// sample at 1915 from a wrapped timestamp).
func TestOTLPValidation(t *testing.T) {
	db := openTestDB(t)
	opts := OTLPOptions{Rules: DefaultOptions().Rules()}
	h := NewOTLPMetrics(db, db.Metadata, opts, nil, nil)
	now := pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute).Truncate(time.Millisecond))

	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	gauge := func(name string) pmetric.NumberDataPoint {
		m := ms.AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(1)
		return dp
	}
	gauge("good")
	raw := make(map[string]any, 100001)
	for i := range 100001 {
		raw["l"+strconv.Itoa(i)] = "v"
	}
	// FromRaw, not PutStr: PutStr looks for the key first, quadratic here.
	if err := gauge("many_labels").Attributes().FromRaw(raw); err != nil {
		t.Fatal(err)
	}
	gauge("long_value").Attributes().PutStr("a", strings.Repeat("v", 200<<10))
	gauge("bad_utf8").Attributes().PutStr("a", "\xff\xfe")
	gauge("wrapped_time").SetTimestamp(pcommon.Timestamp(math.MaxInt64 + 1000))
	gauge("future").SetTimestamp(pcommon.NewTimestampFromTime(time.Now().Add(time.Hour)))

	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w := postOTLP(t, h, "/api/v1/otlp/v1/metrics", "application/x-protobuf", false, body)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s", took)
	}
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	resp := pmetricotlp.NewExportResponse()
	if err := resp.UnmarshalProto(w.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
	ps := resp.PartialSuccess()
	msg := ps.ErrorMessage()
	if ps.RejectedDataPoints() != 5 {
		t.Errorf("rejected %d, want 5: %s", ps.RejectedDataPoints(), msg)
	}
	for _, want := range []string{
		"100005 labels, over the limit ingest.max-labels-per-series=64",
		"value is 204800 bytes, over the limit ingest.max-label-value-length=4096",
		"not valid UTF-8",
		"timestamp out of range",
		"ahead of the server clock",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("partial success does not say %q: %.500s", want, msg)
		}
	}
	if len(msg) > 8<<10 {
		t.Errorf("partial success message is %d bytes: it quotes the input", len(msg))
	}
	if s := one(t, db, "good", "job", "svc"); s.f != 1 {
		t.Errorf("good point: %v", s)
	}
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	names, _, err := q.LabelValues(t.Context(), "__name__", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n != "good" && n != "target_info" {
			t.Errorf("stored %q", n)
		}
	}
}
