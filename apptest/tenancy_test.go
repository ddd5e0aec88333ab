package apptest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// aValue matches a sample value of tenant A's tq_metric in a query answer.
var aValue = regexp.MustCompile(`"10[0-9]{2}(\.[0-9]+)?"`)

// TestTenancy runs tailroot with --tenancy.enabled and two tenants: alice
// writes as A through every ingest path (remote write 1.0 and 2.0, OTLP
// metrics, NDJSON records, evidence), bob as B. Every datum of A carries
// the string "secreta"; B's carry "secretb". The test proves that:
//   - no read path answers B with anything of A (the string never appears),
//     while the same path answers A with its data (so the check can fail);
//   - a table of PromQL injection attempts as B returns exactly what a
//     server without tenancy that only ever saw B's writes returns;
//   - B's delete_series of everything leaves A's series;
//   - A's limits (active series, samples/s, records/s, concurrent queries)
//     answer 429 with Retry-After naming the limit, while B is unaffected;
//   - requests without a tenant, with a bad one or with one the user is not
//     granted get 401, 400 and 403.
func TestTenancy(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	ts := now.Add(-30 * time.Second)
	app := Start(t, t.TempDir(), "--tenancy.enabled", "--tenancy.config.file", tenancyConfigFile(t),
		"--web.enable-admin-api", "--records.derive-interval", "0")
	// The reference: tenancy off, only B's writes.
	ref := Start(t, t.TempDir(), "--records.derive-interval", "0")

	alice := tenantClient{url: app.URL, tenant: "A", user: "alice", pass: "alice-pw"}
	bob := tenantClient{url: app.URL, tenant: "B", user: "bob", pass: "bob-pw"}
	refB := tenantClient{url: ref.URL}
	dataA := tenantData{mark: "secreta", ts: ts, value: 1000, scale: 10}
	dataB := tenantData{mark: "secretb", ts: ts, value: 2, scale: 1}
	writeAll(t, alice, dataA)
	writeAll(t, bob, dataB)
	refData := dataB
	refData.noSpoof = true
	writeAll(t, refB, refData)

	t.Run("refusals", func(t *testing.T) {
		q := url.Values{"query": {"tq_metric"}}
		for _, tc := range []struct {
			name string
			c    tenantClient
			want int
			says string
		}{
			{"no header", tenantClient{url: app.URL, user: "alice", pass: "alice-pw"}, 401, "X-Scope-OrgID header is required"},
			{"no credentials", tenantClient{url: app.URL, tenant: "A"}, 401, "authentication required"},
			{"wrong password", tenantClient{url: app.URL, tenant: "A", user: "alice", pass: "x"}, 401, "not accepted"},
			{"bad tenant", tenantClient{url: app.URL, tenant: "A|B", user: "alice", pass: "alice-pw"}, 400, "not allowed"},
			{"other tenant", tenantClient{url: app.URL, tenant: "B", user: "alice", pass: "alice-pw"}, 403, `may not read tenant \"B\"`},
		} {
			code, b := tc.c.get(t, "/api/v1/query", q)
			if code != tc.want || !strings.Contains(string(b), tc.says) {
				t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, b, tc.want, tc.says)
			}
		}
		// Writing needs the grant too.
		code, _, b := tenantClient{url: app.URL, tenant: "B", user: "alice", pass: "alice-pw"}.do(t, http.MethodPost, "/api/v1/write", nil, "application/x-protobuf", rw1Body(t, dataA), rw1Header)
		if code != http.StatusForbidden || !strings.Contains(string(b), `may not write tenant \"B\"`) {
			t.Errorf("alice writing B: %d %s", code, b)
		}
		for _, p := range []string{"/api/v1/status/tsdb", "/api/v1/status/tsdb/blocks"} {
			if code, b := bob.get(t, p, nil); code != http.StatusForbidden {
				t.Errorf("%s: %d %s, want 403", p, code, b)
			}
		}
		if code, _, b := bob.do(t, http.MethodPost, "/api/v1/admin/tsdb/snapshot", nil, "", nil, nil); code != http.StatusForbidden {
			t.Errorf("snapshot: %d %s, want 403", code, b)
		}
		// Probes need no tenant.
		if code, _ := (tenantClient{url: app.URL}).get(t, "/-/ready", nil); code != http.StatusOK {
			t.Errorf("/-/ready without tenant: %d", code)
		}
	})

	start, end := unix(now.Add(-time.Hour)), unix(now)
	window := url.Values{"start": {start}, "end": {end}}
	with := func(kv ...string) url.Values {
		v := url.Values{"start": {start}, "end": {end}}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	t.Run("read paths", func(t *testing.T) {
		paths := []struct {
			name, path string
			params     url.Values
			// want is what A's own answer must hold (proof the path serves
			// data); B's must not hold "secreta".
			want string
			// same: B's answer is byte for byte the reference server's.
			same bool
		}{
			{"query", "/api/v1/query", url.Values{"query": {`{__name__=~".+"}`}, "time": {unix(now)}}, "secreta_rw1_total", true},
			{"query_range", "/api/v1/query_range", with("query", `{__name__=~".+"}`, "step", "60"), "secreta_rw2", true},
			{"series", "/api/v1/series", with("match[]", `{__name__=~".+"}`), "secreta-spoof", true},
			{"series by tenant label", "/api/v1/series", with("match[]", `{__name__=~".+",tenant_id=~".*"}`), "secreta-job", true},
			{"labels", "/api/v1/labels", window, "job", true},
			{"label values", "/api/v1/label/job/values", window, "secreta-job", true},
			{"metric names", "/api/v1/label/__name__/values", window, "secreta_otlp_gauge", true},
			{"metadata", "/api/v1/metadata", nil, "secreta help", true},
			{"exemplars", "/api/v1/query_exemplars", with("query", `{__name__=~".+"}`), "secreta-trace", true},
			{"records", "/api/v1/requests", window, "secreta-model", true},
			{"records by tenant label", "/api/v1/requests", with("match[]", `{tenant_id=~".*"}`), "secreta-model", true},
			{"evidence", "/api/v1/evidence", window, "secreta-node", true},
			// A's records are 10 times B's: the mean of the slower half of
			// 1…20 s is 15.5 s (B's: 1.55 s).
			{"tail function over records", "/api/v1/query", url.Values{"query": {`tail_mean(0.5, requests{model_name=~".+"}[1h])`}, "time": {unix(now)}}, `"15.5"`, true},
			{"breakdown", "/api/v1/attribution/breakdown", with("selector", `{model_name=~".+"}`), `"target_seconds":20,`, true},
			{"report", "/api/v1/attribution/report", with("selector", `{model_name=~".+"}`), "secreta-node", false},
			{"rules", "/api/v1/rules", nil, "", true},
			{"alerts", "/api/v1/alerts", nil, "", true},
		}
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				ab := alice.mustGet(t, p.path, p.params)
				if !strings.Contains(string(ab), p.want) {
					t.Errorf("A's own answer lacks %q: %s", p.want, ab)
				}
				bb := bob.mustGet(t, p.path, p.params)
				if strings.Contains(string(bb), "secreta") {
					t.Errorf("B sees A's data: %s", bb)
				}
				if strings.Contains(string(bb), `"tenant_id"`) || strings.Contains(string(ab), `"tenant_id"`) {
					t.Errorf("the tenant label shows:\nA: %s\nB: %s", ab, bb)
				}
				if rb := refB.mustGet(t, p.path, p.params); p.same && string(rb) != string(bb) {
					t.Errorf("B's answer differs from the reference's (only B's data, no tenancy):\nB:   %s\nref: %s", bb, rb)
				}
			})
		}
		// The tenant label has no values, and B's records are B's 20.
		if b := bob.mustGet(t, "/api/v1/label/tenant_id/values", window); !strings.Contains(string(b), `"data":[]`) {
			t.Errorf("tenant_id values: %s", b)
		}
		var recs []map[string]any
		decodeDataTB(t, bob.mustGet(t, "/api/v1/requests", window), &recs)
		if len(recs) != 20 {
			t.Errorf("B has %d records, want its 20", len(recs))
		}
		decodeDataTB(t, alice.mustGet(t, "/api/v1/requests", window), &recs)
		if len(recs) != 20 {
			t.Errorf("A has %d records, want its 20 (the 10 sent with tenant_id=\"B\" included)", len(recs))
		}
		// Remote read.
		ra, rb := remoteReadNames(t, alice, now.Add(-time.Hour), now), remoteReadNames(t, bob, now.Add(-time.Hour), now)
		if !strings.Contains(strings.Join(ra, ";"), "secreta") || strings.Contains(strings.Join(rb, ";"), "secreta") || len(rb) == 0 {
			t.Errorf("remote read: A %v, B %v", ra, rb)
		}
		if rr := remoteReadNames(t, refB, now.Add(-time.Hour), now); !slices.Equal(rb, rr) {
			t.Errorf("B's remote read %v, want what the reference serves: %v", rb, rr)
		}
		// The records shard (distributed tails) counts B's records only.
		shard := `{"query":"q","selector":"{model_name=~\".+\"}","Mint":0,"Maxt":` + strconv.FormatInt(now.UnixMilli(), 10) + `,"summary":true}`
		code, _, b := bob.do(t, http.MethodPost, "/api/v1/records/shard", nil, "application/json", []byte(shard), nil)
		var sd struct {
			N int `json:"n"`
		}
		if code != http.StatusOK {
			t.Fatalf("shard: %d %s", code, b)
		}
		decodeDataTB(t, b, &sd)
		if sd.N != 20 {
			t.Errorf("shard as B counts %d records, want 20: %s", sd.N, b)
		}
		// Root cause and causal effects evaluate over the confined view:
		// whatever they answer, nothing of A is in it.
		for _, p := range []struct {
			path   string
			params url.Values
		}{
			{"/api/v1/attribution/rootcause", with("target", `sum({__name__=~".+"})`, "step", "60")},
			{"/api/v1/attribution/causal", with("outcome", `sum(tq_metric)`, "treatment", `sum({__name__=~"secret.+"})`, "step", "60")},
		} {
			if _, b := bob.get(t, p.path, p.params); strings.Contains(string(b), "secreta") {
				t.Errorf("%s as B: %s", p.path, b)
			}
		}
	})

	t.Run("promql injection", func(t *testing.T) {
		for _, q := range []string{
			`{__name__=~".+"} or on() vector(1)`,
			`{__name__=~".+"}`,
			`tq_metric`,
			`tq_metric{tenant_id="A"}`,
			`tq_metric{tenant_id="B"}`,
			`tq_metric{tenant_id=~".*"}`,
			`tq_metric{tenant_id=~"A|B"}`,
			`tq_metric{tenant_id!="B"}`,
			`tq_metric{tenant_id!~"B"}`,
			`{__name__=~"tq_.*", tenant_id=""}`,
			`tq_spoof`,
			`label_replace(tq_metric, "tenant_id", "A", "", "")`,
			`label_replace({__name__=~".+"}, "job", "$1", "tenant_id", "(.*)")`,
			`sum by (tenant_id) ({__name__=~".+"})`,
			`count({__name__=~".+"})`,
			`max_over_time(tq_metric[10m:1m])`,
			`max_over_time({__name__=~".+",tenant_id=~".+"}[10m:1m])`,
			`absent(tq_metric{job=~"secreta.+"})`,
			`absent_over_time({tenant_id="A"}[1h])`,
			`tq_metric * on(job) group_left tq_metric`,
			`topk(100, {__name__=~".+"})`,
			`count by (__name__) ({__name__=~".+"})`,
			`tail_mean(0.5, requests{model_name=~".+"}[1h])`,
			`tail_mean(0.5, requests{tenant_id="A"}[1h])`,
			`quantile_ci(0.5, 0.9, requests{tenant_id=~".*"}[1h])`,
		} {
			t.Run(q, func(t *testing.T) {
				p := url.Values{"query": {q}, "time": {unix(now)}}
				code, bb := bob.get(t, "/api/v1/query", p)
				// A's tq_metric values are 1000 and 1001 (sums with B's in
				// the 1000s); sample values are JSON strings, so the quotes
				// tell them from the millisecond times an info message prints.
				if strings.Contains(string(bb), "secreta") || aValue.Match(bb) {
					t.Errorf("B sees A's data: %s", bb)
				}
				rcode, rb := refB.get(t, "/api/v1/query", p)
				if code != rcode {
					t.Fatalf("B got %d %s, the reference %d %s", code, bb, rcode, rb)
				}
				if code != http.StatusOK {
					// The same error, from the same data (label_replace
					// onto an existing label set).
					if string(bb) != string(rb) {
						t.Errorf("B got %s, the reference %s", bb, rb)
					}
					return
				}
				got, want := metricSets(t, bb), metricSets(t, rb)
				if !slices.Equal(got, want) || len(want) == 0 && q == `{__name__=~".+"} or on() vector(1)` {
					t.Errorf("B got\n  %v\nthe reference (only B's data, no tenancy)\n  %v", got, want)
				}
			})
		}
		// MetricsQL WITH templates translate to the same confined engine.
		p := url.Values{"query": {`WITH (all = {__name__=~".+"}) all or on() vector(1)`}, "time": {unix(now)}, "dialect": {"metricsql"}}
		bb := bob.mustGet(t, "/api/v1/query", p)
		if got, want := metricSets(t, bb), metricSets(t, refB.mustGet(t, "/api/v1/query", p)); !slices.Equal(got, want) || strings.Contains(string(bb), "secreta") {
			t.Errorf("MetricsQL WITH as B: %v, reference %v", got, want)
		}
	})

	t.Run("limits", func(t *testing.T) {
		check429 := func(t *testing.T, what string, code int, hdr http.Header, b []byte, limit string) {
			t.Helper()
			ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
			named := strings.Contains(string(b), `tenant "A"`) || strings.Contains(string(b), `tenant \"A\"`)
			if code != http.StatusTooManyRequests || ra < 1 || !strings.Contains(string(b), limit) || !named {
				t.Errorf("%s as A: %d Retry-After=%q %s, want 429 with Retry-After naming %s", what, code, hdr.Get("Retry-After"), b, limit)
			}
		}
		rw := func(c tenantClient, body []byte) (int, http.Header, []byte) {
			return c.do(t, http.MethodPost, "/api/v1/write", nil, "application/x-protobuf", body, rw1Header)
		}
		// Samples/s: one write of more than a second's worth.
		body := manySeries(t, "lim_samples", 1, limitSamples+50, now.Add(-20*time.Second))
		code, hdr, b := rw(alice, body)
		check429(t, "samples", code, hdr, b, "samples_per_second=200")
		if code, _, b := rw(bob, body); code != http.StatusNoContent {
			t.Errorf("samples as B: %d %s", code, b)
		}
		// Active series: more new series than the limit leaves.
		body = manySeries(t, "lim_series", limitSeries, 1, now.Add(-20*time.Second))
		code, hdr, b = rw(alice, body)
		check429(t, "series", code, hdr, b, "max_active_series=40")
		if code, _, b := rw(bob, body); code != http.StatusNoContent {
			t.Errorf("series as B: %d %s", code, b)
		}
		// Nothing of the refused writes is stored.
		if b := alice.mustGet(t, "/api/v1/series", with("match[]", `{__name__=~"lim_.+"}`)); !strings.Contains(string(b), `"data":[]`) {
			t.Errorf("refused writes stored: %s", b)
		}
		// Records/s: two pushes back to back, the second over the rate.
		ok := 0
		for i := range 3 {
			code, hdr, b := alice.do(t, http.MethodPost, "/api/v1/requests", nil, "application/x-ndjson", recordsBody(dataA, 100+20*i, 20, false), nil)
			if code == http.StatusOK {
				ok++
				continue
			}
			check429(t, "records", code, hdr, b, "records_per_second=30")
			break
		}
		if ok == 3 {
			t.Errorf("three pushes of 20 records at once all accepted at 30/s")
		}
		for i := range 3 {
			if code, _, b := bob.do(t, http.MethodPost, "/api/v1/requests", nil, "application/x-ndjson", recordsBody(dataB, 100+20*i, 20, false), nil); code != http.StatusOK {
				t.Errorf("records as B: %d %s", code, b)
			}
		}
		// Concurrent queries: a series request whose body has not arrived
		// holds A's only slot. The holder is started before any probe is
		// sent, and started again should a probe have taken the slot first.
		hold := func() (*io.PipeWriter, chan int) {
			pr, pw := io.Pipe()
			req, _ := http.NewRequest(http.MethodPost, app.URL+"/api/v1/series", pr)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Scope-OrgID", "A")
			req.SetBasicAuth("alice", "alice-pw")
			held := make(chan int, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					held <- 0
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				held <- resp.StatusCode
			}()
			return pw, held
		}
		refused := false
		var pw *io.PipeWriter
		var held chan int
		for attempt := 0; attempt < 5 && !refused; attempt++ {
			pw, held = hold()
			time.Sleep(200 * time.Millisecond)
			code, hdr, b := alice.do(t, http.MethodGet, "/api/v1/query", url.Values{"query": {"1"}}, "", nil, nil)
			if code == http.StatusTooManyRequests {
				check429(t, "second query", code, hdr, b, "max_concurrent_queries=1")
				refused = true
				break
			}
			_ = pw.Close()
			<-held
		}
		if !refused {
			t.Fatalf("A's second concurrent query was never refused")
		}
		if code, b := bob.get(t, "/api/v1/query", url.Values{"query": {"1"}}); code != http.StatusOK {
			t.Errorf("B's query while A's slot is held: %d %s", code, b)
		}
		_, _ = fmt.Fprint(pw, "match[]=tq_metric")
		_ = pw.Close()
		if code := <-held; code != http.StatusOK {
			t.Errorf("the held query answered %d", code)
		}
		if code, b := alice.get(t, "/api/v1/query", url.Values{"query": {"1"}}); code != http.StatusOK {
			t.Errorf("A's query after the slot came back: %d %s", code, b)
		}
	})

	t.Run("delete", func(t *testing.T) {
		count := func(c tenantClient) string {
			return strings.Join(metricSets(t, c.mustGet(t, "/api/v1/query", url.Values{"query": {`count({__name__=~".+"})`}, "time": {unix(now)}})), ";")
		}
		before := count(alice)
		code, _, b := bob.do(t, http.MethodPost, "/api/v1/admin/tsdb/delete_series", with("match[]", `{__name__=~".+"}`), "", nil, nil)
		if code != http.StatusNoContent {
			t.Fatalf("delete as B: %d %s", code, b)
		}
		code, _, b = bob.do(t, http.MethodPost, "/api/v1/admin/tsdb/delete_series", with("match[]", `{tenant_id="A"}`, "match[]", `{job="secreta-job"}`), "", nil, nil)
		if code != http.StatusNoContent {
			t.Fatalf("delete of A's by B: %d %s", code, b)
		}
		if after := count(alice); after != before || before == "" {
			t.Errorf("A's series count %q after B's deletes, was %q", after, before)
		}
		if b := bob.mustGet(t, "/api/v1/query", url.Values{"query": {`tq_metric`}, "time": {unix(now)}}); !strings.Contains(string(b), `"result":[]`) {
			t.Errorf("B's own series survived its delete: %s", b)
		}
	})

	t.Run("import", func(t *testing.T) {
		dir := t.TempDir()
		file, pw := dir+"/a.ndjson", dir+"/pw"
		line := fmt.Sprintf(`{"request_id":"secreta-imported","labels":{"model_name":"secreta-imported-model"},"arrival":%.3f,"finished":%.3f}`+"\n",
			float64(ts.UnixMilli())/1000, float64(ts.UnixMilli())/1000+0.5)
		if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pw, []byte("alice-pw\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(Binary(t), "import", "--server", app.URL, "--tenant", "A",
			"--basic-auth.username", "alice", "--basic-auth.password-file", pw, "--progress", "never", file).CombinedOutput()
		if err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		if b := alice.mustGet(t, "/api/v1/requests", with("match[]", `{model_name="secreta-imported-model"}`)); !strings.Contains(string(b), "secreta-imported") {
			t.Errorf("A does not see its import: %s", b)
		}
		if b := bob.mustGet(t, "/api/v1/requests", window); strings.Contains(string(b), "secreta") {
			t.Errorf("B sees A's import: %s", b)
		}
	})
}
