package api

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tailroot/tailroot/query/tailfn"
)

// postShard posts body to a RecordsShard over the attribution test records.
func postShard(t testing.TB, h http.Handler, body []byte, gz bool) (int, envelopeJSON) {
	t.Helper()
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	req := httptest.NewRequest(http.MethodPost, RecordsShardPath, bytes.NewReader(body))
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var env envelopeJSON
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
		t.Fatalf("answer %q: %v", w.Body.String(), err)
	}
	return w.Code, env
}

type envelopeJSON struct {
	Status    string                `json:"status"`
	ErrorType string                `json:"errorType"`
	Error     string                `json:"error"`
	Data      *tailfn.ShardResponse `json:"data"`
}

// TestRecordsShard checks the endpoint's answers on the ten requests of
// model m (S = 1…10 s): counts, sums and values computed by hand, and a
// 4xx naming the problem for each kind of bad request.
func TestRecordsShard(t *testing.T) {
	h := NewRecordsShard(tailfn.NewLocalShard(attributionRecords(t), tailfn.DefaultShardOptions()))
	ok := `{"query":"q1","selector":"{model_name=\"m\"}","Mint":0,"Maxt":300000,` +
		`"summary":true,"at":[8],"sums":[{"lo":9,"no_hi":true}],"values":{"lo":2,"hi":4}}`
	for _, gz := range []bool{false, true} {
		code, env := postShard(t, h, []byte(ok), gz)
		if code != http.StatusOK || env.Data == nil {
			t.Fatalf("gzip=%v: %d %+v", gz, code, env)
		}
		d := env.Data
		if d.N != 10 || d.Summary.Min != 1 || d.Summary.Max != 10 || d.Summary.Sum != 55 || d.Summary.S != 55 {
			t.Errorf("summary %+v of %d, want 10 requests summing to 55 between 1 and 10", d.Summary, d.N)
		}
		if a := d.At[0]; a.Below != 7 || a.AtOrBelow != 8 || a.Next == nil || *a.Next != 9 {
			t.Errorf("at 8: %+v, want 7 below, 8 at or below, next 9", a)
		}
		// S ≥ 9: queue 4+6, prefill 1+1, decode 4+3.
		if s := d.Sums[0]; s.Count != 2 || s.S != 19 || s.Stages[0] != 10 || s.Stages[2] != 2 || s.Stages[3] != 7 {
			t.Errorf("sums over S ≥ 9: %+v", s)
		}
		if v := d.Values; v.Below != 1 || len(v.V) != 3 || v.V[0] != 2 || v.V[2] != 4 {
			t.Errorf("values in [2, 4]: %+v", v)
		}
	}
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"not json", `{"query":`, 400, "decode shard request"},
		{"no query id", `{"selector":"{}","Mint":0,"Maxt":1}`, 400, "query id"},
		{"bad selector", `{"query":"x","selector":"{a=}","Mint":0,"Maxt":1,"summary":true}`, 400, "selector"},
		{"bad field", `{"query":"x","Mint":0,"Maxt":1,"field":"nope","summary":true}`, 400, `field "nope"`},
		{"bad fanout", `{"query":"x","Mint":0,"Maxt":1,"splits":[{"lo":1,"hi":9,"fanout":0}]}`, 400, "fanout"},
		{"bad bandwidth", `{"query":"x","Mint":0,"Maxt":1,"kernel":{"q":1,"bw":0}}`, 400, "bandwidth"},
		{"changed", `{"query":"y","selector":"{model_name=\"m\"}","Mint":0,"Maxt":300000,"expect":3,"summary":true}`, 409, "changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, env := postShard(t, h, []byte(tc.body), false)
			if code != tc.code || env.Status != "error" || !strings.Contains(env.Error, tc.want) {
				t.Errorf("%d %+v, want %d with an error containing %q", code, env, tc.code, tc.want)
			}
		})
	}
}

// FuzzRecordsShard posts arbitrary bodies: the endpoint answers 200, 400
// or 409 in the envelope, and never panics.
func FuzzRecordsShard(f *testing.F) {
	f.Add([]byte(`{"query":"q","selector":"{model_name=\"m\"}","Mint":0,"Maxt":300000,"summary":true,"splits":[{"lo":9218868437227405312,"hi":9223372036854775807,"fanout":7}]}`))
	f.Add([]byte(`{"query":"q","Mint":0,"Maxt":300000,"field":"ttft","at":[0,1e308],"ties":[9],"values":{"lo":0,"lo_open":true,"no_hi":true},"moment":3,"kernel":{"q":1,"bw":0.5},"columns":true}`))
	f.Add([]byte(`{"query":"q","Mint":5,"Maxt":1,"summary":true}`))
	h := NewRecordsShard(tailfn.NewLocalShard(attributionRecords(f), tailfn.DefaultShardOptions()))
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, RecordsShardPath, bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusConflict:
		default:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		var env envelopeJSON
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Status == "" {
			t.Fatalf("answer %q is not an envelope: %v", w.Body, err)
		}
	})
}
