package api

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
)

var causalT0 = time.Unix(1_700_000_000, 0)

// loadCausal writes two hours at 15 s of outcome = 1 + 3·treatment +
// 2·confounder + small deterministic noise, and returns the columns.
// The treatment has a gap at steps 100–129. PromQL's 5-minute lookback
// (left-open) carries step 99's value through step 118; steps 119–129 have
// no treatment value and alignment must drop them. The returned columns are
// what the endpoint should regress, worked out by hand that way.
func loadCausal(t *testing.T, db storage.AppendableV2) (y, x, z []float64) {
	app := db.AppenderV2(context.Background())
	for i := range 480 {
		ts := causalT0.Add(time.Duration(i) * 15 * time.Second).UnixMilli()
		xi := math.Sin(float64(i)/7) + float64(i%5)*0.1
		zi := math.Cos(float64(i) / 11)
		yi := 1 + 3*xi + 2*zi + 0.01*float64((i*7)%13-6)
		add := func(name string, v float64) {
			if _, err := app.Append(0, labels.FromStrings("__name__", name), 0, ts, v, nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		add("outcome", yi)
		add("confounder", zi)
		switch {
		case i >= 100 && i < 119:
			y, x, z = append(y, yi), append(x, x[99]), append(z, zi)
		case i >= 119 && i < 130:
		default:
			add("treatment", xi)
			y, x, z = append(y, yi), append(x, xi), append(z, zi)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return y, x, z
}

func TestCausalEndpoint(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	y, x, z := loadCausal(t, db)
	ng, err := query.New(query.DefaultOptions(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	h := NewCausalHandler(ng, db)
	end := causalT0.Add(479 * 15 * time.Second)
	params := func(kv ...string) url.Values {
		v := url.Values{"start": {strconv.FormatInt(causalT0.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}, "step": {"15s"}}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	type resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Method string                                        `json:"method"`
			Effect float64                                       `json:"effect"`
			Lower  *float64                                      `json:"lower"`
			Upper  *float64                                      `json:"upper"`
			P      float64                                       `json:"p"`
			Lag    int                                           `json:"lag"`
			N      int                                           `json:"n"`
			CF     *struct{ Observed, Counterfactual []float64 } `json:"counterfactual"`
		} `json:"data"`
	}
	call := func(v url.Values) (int, resp) {
		code, body := get(t, h, "/api/v1/attribution/causal", v)
		var r resp
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return code, r
	}

	// The endpoint must give what the statistics give on the aligned
	// columns: 480 steps less the 11 without a treatment value.
	want, err := causal.BackdoorEffect(causal.Series{Name: "y", Values: y}, causal.Series{Name: "x", Values: x}, []causal.Series{{Name: "z", Values: z}}, -1)
	if err != nil {
		t.Fatal(err)
	}
	code, r := call(params("outcome", "outcome", "treatment", "treatment", "confounder", "confounder"))
	if code != 200 || r.Data.Lower == nil || r.Data.Upper == nil {
		t.Fatalf("backdoor: %d %+v %s", code, r.Data, r.Error)
	}
	if r.Data.N != 469 || math.Abs(r.Data.Effect-want.Coef) > 1e-12 || math.Abs(r.Data.P-want.PValue) > 1e-12 ||
		math.Abs(*r.Data.Lower-want.Lower) > 1e-9 || math.Abs(*r.Data.Upper-want.Upper) > 1e-9 {
		t.Fatalf("backdoor: %d %+v, want effect %v [%v, %v] p %v", code, r.Data, want.Coef, want.Lower, want.Upper, want.PValue)
	}
	// The generating coefficient is 3; the 19 carried-forward treatment
	// values of steps 100–118 pull the fit off it (to about 2.73).
	if math.Abs(r.Data.Effect-3) > 0.5 {
		t.Errorf("effect %v, generated with 3", r.Data.Effect)
	}
	if r.Data.CF == nil || len(r.Data.CF.Observed) != 469 || len(r.Data.CF.Counterfactual) != 469 {
		t.Fatalf("counterfactual missing: %+v", r.Data.CF)
	}

	// Lagged methods need gap-free aligned points, as granger() and
	// lagged_correlation() do: the treatment's hole is refused, naming it.
	for _, m := range []string{"granger", "ccf"} {
		code, body := get(t, h, "/api/v1/attribution/causal", params("outcome", "outcome", "treatment", "treatment", "method", m, "max_lag", "4"))
		if code != 422 || !strings.Contains(body, "gap-free") {
			t.Errorf("%s over a hole: %d %s, want 422 naming the gap", m, code, body)
		}
	}
	// Before the hole (steps 0–99) Granger is the test at the lag AIC
	// picks (the criterion granger() uses).
	g, err := causal.Granger(causal.Series{Name: "y", Values: y[:100]}, causal.Series{Name: "x", Values: x[:100]}, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	early := params("outcome", "outcome", "treatment", "treatment", "method", "granger", "max_lag", "4")
	early.Set("end", strconv.FormatInt(causalT0.Add(99*15*time.Second).Unix(), 10))
	code, r = call(early)
	best := g.Tests[g.BestAIC-1]
	if code != 200 || r.Data.Lag != best.Lag || math.Abs(r.Data.Effect-best.F) > 1e-9*best.F || r.Data.Lower != nil {
		t.Fatalf("granger: %d %+v, want lag %d F %v", code, r.Data, best.Lag, best.F)
	}

	early.Set("method", "ccf")
	early.Set("max_lag", "5")
	code, r = call(early)
	if code != 200 || r.Data.Method != "ccf" || r.Data.Lower == nil || *r.Data.Lower > r.Data.Effect || *r.Data.Upper < r.Data.Effect {
		t.Fatalf("ccf: %d %+v", code, r.Data)
	}

	for _, c := range []struct {
		name string
		v    url.Values
		code int
		msg  string
	}{
		{"missing treatment", params("outcome", "outcome"), 400, "outcome and treatment are required"},
		{"bad method", params("outcome", "outcome", "treatment", "treatment", "method", "magic"), 400, `want backdoor, granger or ccf`},
		{"bad level", params("outcome", "outcome", "treatment", "treatment", "level", "1.5"), 400, `want a number in (0, 1)`},
		{"bad lag", params("outcome", "outcome", "treatment", "treatment", "max_lag", "0"), 400, `want an integer in [1, 100]`},
		{"two series", params("outcome", `{__name__=~"outcome|confounder"}`, "treatment", "treatment"), 422, "returned 2 series"},
		{"bad promql", params("outcome", "sum(", "treatment", "treatment"), 400, "outcome"},
		{"constant treatment", params("outcome", "outcome", "treatment", "vector(1)"), 422, "backdoor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := get(t, h, "/api/v1/attribution/causal", c.v)
			if code != c.code || !strings.Contains(body, c.msg) || !strings.Contains(body, `"status":"error"`) {
				t.Fatalf("got %d %s, want %d containing %q", code, body, c.code, c.msg)
			}
		})
	}
	if code, _ := get(t, h, "/api/v1/attribution/causal", nil); code != http.StatusBadRequest {
		t.Errorf("no parameters: %d", code)
	}
}
