package ingest

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/tsdb/records"
)

// lineA is the request the decoder tests work through by hand:
//
//	arrival      1700000000.500   (Time = 1700000000500 ms)
//	queued          +0.010
//	scheduled       +0.110   queue   = scheduled − queued     = 0.1
//	first token     +0.410   prefill = first − scheduled      = 0.3, TTFT 0.41
//	tokens at +0.410 +0.430 +0.460 +0.500  gaps 0.02 0.03 0.04
//	last token      +0.500   decode  = last − first           = 0.09
//	finished        +0.520   e2e                              = 0.52
//	explicit stages tokenize 0.004, network 0.003
//	other = 0.52 − (0.1 + 0.004 + 0.3 + 0.09 + 0.003)         = 0.023
//	ITL type-7 quantiles of {0.02, 0.03, 0.04}: p50 0.03,
//	p90 0.03 + 0.8·0.01 = 0.038, p99 0.03 + 0.98·0.01 = 0.0398
//	prompt ids 5 5 7 7: two tokens at ½ each, entropy 1 bit
const lineA = `{"request_id":"r1","trace_id":"0af7651916cd43dd8448eb211c80319c",` +
	`"labels":{"model_name":"llama","instance":"a:1","tenant":""},` +
	`"arrival":1700000000.5,"queued":1700000000.51,"scheduled":1700000000.61,"first_token":1700000000.91,` +
	`"token_times":[1700000000.91,1700000000.93,1700000000.96,1700000001.0],"finished":1700000001.02,` +
	`"stages":{"tokenize":0.004,"network":0.003},"prompt_token_ids":[5,5,7,7]}`

func TestDecodeRequestLineWorked(t *testing.T) {
	it, err := DecodeRequestLine([]byte(lineA), RequestLimits{})
	if err != nil {
		t.Fatal(err)
	}
	r := it.Record
	if r.Time != 1700000000500 || r.RequestID != "r1" || r.TraceID != (records.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}) {
		t.Errorf("time %d id %q trace %x", r.Time, r.RequestID, r.TraceID)
	}
	if !labels.Equal(r.Labels, labels.FromStrings("instance", "a:1", "model_name", "llama")) {
		t.Errorf("labels %s (the empty tenant must be dropped)", r.Labels)
	}
	want := [records.NumStages]float64{0.1, 0.004, 0.3, 0.09, 0, 0.003, 0.023}
	for j, w := range want {
		if !approxEq(r.Stages[j], w, 1e-15) {
			t.Errorf("stage %s = %v, want %v", records.Stage(j), r.Stages[j], w)
		}
	}
	if r.E2E != 0.52 || r.Sum() != r.E2E {
		t.Errorf("e2e %v, stage sum %v: want 0.52 exactly", r.E2E, r.Sum())
	}
	if r.TTFT != 0.41 || !it.HasTTFT {
		t.Errorf("ttft %v (has %v), want 0.41", r.TTFT, it.HasTTFT)
	}
	if len(it.Gaps) != 3 || it.Gaps[0] != 0.02 || it.Gaps[1] != 0.03 || it.Gaps[2] != 0.04 {
		t.Errorf("gaps %v, want [0.02 0.03 0.04]", it.Gaps)
	}
	itl := r.ITL
	if itl.Count != 3 || !approxEq(itl.Sum, 0.09, 1e-15) || itl.Min != 0.02 || itl.Max != 0.04 || itl.P50 != 0.03 ||
		!approxEq(itl.P90, 0.038, 1e-15) || !approxEq(itl.P99, 0.0398, 1e-15) || len(itl.Values) != 3 {
		t.Errorf("itl %+v", itl)
	}
	if r.OutputTokens != 4 || r.PromptTokens != 4 || r.PromptEntropy != 1 || !it.HasEntropy {
		t.Errorf("tokens %d/%d entropy %v (has %v)", r.PromptTokens, r.OutputTokens, r.PromptEntropy, it.HasEntropy)
	}
}

// TestDecodeRequestLineITL: RFC 3339 times, gaps as itl, no scheduling
// timestamps (queue and prefill unknown, so they stay in other).
//
//	arrival 22:13:20 (1700000000 s), first token +0.25, last token +1
//	e2e 1 (the end is last_token), decode 0.75, TTFT 0.25, other 0.25
func TestDecodeRequestLineITL(t *testing.T) {
	line := `{"request_id":"r2","arrival":"2023-11-14T22:13:20Z","first_token":"2023-11-14T22:13:20.25Z",` +
		`"last_token":"2023-11-14T22:13:21Z","itl":[0.5,0.25],"prompt_entropy":3.5,"prompt_tokens":100}`
	it, err := DecodeRequestLine([]byte(line), RequestLimits{})
	if err != nil {
		t.Fatal(err)
	}
	r := it.Record
	if r.Time != 1700000000000 || r.E2E != 1 || r.TTFT != 0.25 {
		t.Errorf("time %d e2e %v ttft %v", r.Time, r.E2E, r.TTFT)
	}
	want := [records.NumStages]float64{0, 0, 0, 0.75, 0, 0, 0.25}
	if r.Stages != want {
		t.Errorf("stages %v, want %v", r.Stages, want)
	}
	if r.OutputTokens != 3 || r.ITL.Count != 2 || r.ITL.Sum != 0.75 || r.PromptEntropy != 3.5 || r.PromptTokens != 100 {
		t.Errorf("record %+v", r)
	}
}

// TestDecodeRequestLineRounding: measured stages may overshoot e2e by
// rounding (here 1e-13 s on 1 s, under the 1e-9 tolerance); e2e is then
// their sum and other 0, never negative.
func TestDecodeRequestLineRounding(t *testing.T) {
	line := `{"request_id":"x","arrival":10,"finished":11,"stages":{"tokenize":0.6,"network":0.4000000000001}}`
	it, err := DecodeRequestLine([]byte(line), RequestLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if r := it.Record; r.E2E != 0.6+0.4000000000001 || r.Stages[records.StageOther] != 0 {
		t.Errorf("e2e %v other %v", r.E2E, r.Stages[records.StageOther])
	}
}

func TestDecodeRequestLineBad(t *testing.T) {
	for _, c := range []struct {
		name, line, want string
		lim              RequestLimits
	}{
		{"missing ids", `{"arrival":1,"finished":2}`, "missing ids", RequestLimits{}},
		{"negative timestamp", `{"request_id":"x","arrival":-1,"finished":2}`, "negative timestamp: arrival", RequestLimits{}},
		{"scheduled before queued", `{"request_id":"x","arrival":10,"queued":12,"scheduled":11,"finished":20}`, "non-monotonic timestamps: scheduled", RequestLimits{}},
		{"finished before last token", `{"request_id":"x","arrival":10,"last_token":12,"finished":11}`, "non-monotonic timestamps: finished", RequestLimits{}},
		{"token times decrease", `{"request_id":"x","arrival":1,"token_times":[3,2]}`, "non-monotonic timestamps", RequestLimits{}},
		{"stages over e2e", `{"request_id":"x","arrival":10,"finished":11,"stages":{"tokenize":2}}`, "more than end-to-end", RequestLimits{}},
		{"timestamp stages over e2e", `{"request_id":"x","arrival":10,"queued":10,"scheduled":10.5,"finished":11,"stages":{"network":0.6}}`, "more than end-to-end", RequestLimits{}},
		{"other set", `{"request_id":"x","arrival":1,"finished":2,"stages":{"other":0.1}}`, "stages.other cannot be set", RequestLimits{}},
		{"unknown stage", `{"request_id":"x","arrival":1,"finished":2,"stages":{"gpu":0.1}}`, "unknown stage", RequestLimits{}},
		{"negative stage", `{"request_id":"x","arrival":1,"finished":2,"stages":{"network":-0.1}}`, "not a finite duration", RequestLimits{}},
		{"unknown field", `{"request_id":"x","arival":1}`, "unknown field", RequestLimits{}},
		{"itl and token times", `{"request_id":"x","arrival":1,"token_times":[1,2],"itl":[1]}`, "both token_times and itl", RequestLimits{}},
		{"bad trace id", `{"trace_id":"xyz","arrival":1,"finished":2}`, "32 hex digits", RequestLimits{}},
		{"zero trace id", `{"trace_id":"00000000000000000000000000000000","arrival":1,"finished":2}`, "all zero", RequestLimits{}},
		{"no arrival", `{"request_id":"x","finished":2}`, "arrival is missing", RequestLimits{}},
		{"no end", `{"request_id":"x","arrival":1}`, "no end time", RequestLimits{}},
		{"first token mismatch", `{"request_id":"x","arrival":1,"first_token":2,"token_times":[3,4]}`, "first_token", RequestLimits{}},
		{"prompt tokens mismatch", `{"request_id":"x","arrival":1,"finished":2,"prompt_tokens":3,"prompt_token_ids":[1]}`, "prompt_tokens 3 but 1", RequestLimits{}},
		{"entropy and ids", `{"request_id":"x","arrival":1,"finished":2,"prompt_entropy":1,"prompt_token_ids":[1]}`, "both prompt_entropy", RequestLimits{}},
		{"reserved label", `{"request_id":"x","arrival":1,"finished":2,"labels":{"__name__":"y"}}`, "reserved", RequestLimits{}},
		{"too many labels", `{"request_id":"x","arrival":1,"finished":2,"labels":{"a":"1","b":"2"}}`, "over the limit ingest.max-labels-per-series=1", RequestLimits{MaxLabels: 1}},
		{"label too long", `{"request_id":"x","arrival":1,"finished":2,"labels":{"a":"123"}}`, "over the limit ingest.max-label-value-length=2", RequestLimits{MaxLabelValueLength: 2}},
		{"too many tokens", `{"request_id":"x","arrival":1,"itl":[1,1,1],"finished":9}`, "3 tokens, over the limit of 2", RequestLimits{MaxTokens: 2}},
		{"negative itl", `{"request_id":"x","arrival":1,"itl":[-1],"finished":9}`, "itl[0]", RequestLimits{}},
		{"two values", `{"request_id":"x","arrival":1,"finished":2} {}`, "more than one JSON value", RequestLimits{}},
		{"not json", `hello`, "invalid character", RequestLimits{}},
		{"bad rfc3339", `{"request_id":"x","arrival":"yesterday","finished":2}`, "not RFC 3339", RequestLimits{}},
		{"request id too long", `{"request_id":"` + strings.Repeat("x", 1025) + `","arrival":1,"finished":2}`, "longer than 1024", RequestLimits{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRequestLine([]byte(c.line), c.lim)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrBadRequestLine) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to wrap ErrBadRequestLine and mention %q", err, c.want)
			}
		})
	}
}

func TestParseUnixSeconds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"1700000000", 1700000000_000000000},
		{"1700000000.000000001", 1700000000_000000001},
		{"1700000000.5", 1700000000_500000000},
		{"1700000000.1234567899", 1700000000_123456789}, // sub-ns digits dropped
		{"1.7e9", 1700000000_000000000},
		{"0", 0},
		{"-1.5", -1500000000},
	} {
		got, err := parseUnixSeconds(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseUnixSeconds(%s) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	if _, err := parseUnixSeconds("99999999999"); err == nil {
		t.Error("year 5138 accepted")
	}
}

func TestPromptEntropy(t *testing.T) {
	for _, c := range []struct {
		ids  []int64
		want float64
	}{
		{nil, 0},
		{[]int64{7}, 0},
		{[]int64{7, 7, 7}, 0},
		{[]int64{1, 1, 2, 2}, 1},
		{[]int64{4, 3, 2, 1}, 2},
		// −(¾·log₂¾ + ¼·log₂¼) = 0.75·0.415037499278844 + 0.5 = 0.811278124459133
		{[]int64{1, 1, 1, 2}, 0.811278124459133},
	} {
		if got := PromptEntropy(c.ids); !approxEq(got, c.want, 1e-15) {
			t.Errorf("PromptEntropy(%v) = %v, want %v", c.ids, got, c.want)
		}
	}
}

func TestPositionBucket(t *testing.T) {
	for _, c := range []struct {
		p    int
		want string
	}{{1, "1"}, {2, "2"}, {3, "4"}, {4, "4"}, {5, "8"}, {4096, "4096"}, {4097, "+Inf"}, {1 << 20, "+Inf"}} {
		if got := positionBound(attribution.TokenPositionBucket(c.p)); got != c.want {
			t.Errorf("position %d in bucket %s, want %s", c.p, got, c.want)
		}
	}
}

// TestRequestsSchema keeps docs/requests.schema.json and the decoder in
// step: the schema lists exactly the fields the decoder reads, its stage
// names are the settable stages, and its examples decode.
func TestRequestsSchema(t *testing.T) {
	raw, err := os.ReadFile("../docs/requests.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"properties"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	var fields []string
	rt := reflect.TypeFor[requestLine]()
	for i := range rt.NumField() {
		fields = append(fields, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	var props []string
	for k := range schema.Properties {
		props = append(props, k)
	}
	slices.Sort(fields)
	slices.Sort(props)
	if !slices.Equal(fields, props) {
		t.Errorf("schema properties %v, decoder fields %v", props, fields)
	}
	var stages []string
	for k := range schema.Properties["stages"].Properties {
		stages = append(stages, k)
	}
	slices.Sort(stages)
	var want []string
	for k := range stageIndex {
		want = append(want, k)
	}
	slices.Sort(want)
	if !slices.Equal(stages, want) {
		t.Errorf("schema stages %v, settable stages %v", stages, want)
	}
	if len(schema.Examples) == 0 {
		t.Fatal("schema has no example")
	}
	for i, ex := range schema.Examples {
		if _, err := DecodeRequestLine(ex, RequestLimits{}); err != nil {
			t.Errorf("example %d: %v", i, err)
		}
	}
}
