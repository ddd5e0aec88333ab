package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// attribute is `tailroot attribute`: fetch an attribution report from a
// running server and print its breakdown as a table (or the report JSON).
func attribute(args []string) error {
	return runAttribute(os.Stdout, args)
}

func runAttribute(out io.Writer, args []string) error {
	fs := flag.NewFlagSet("attribute", flag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:9490", "URL of the tailroot server")
	selector := fs.String("selector", "{}", `label matchers of the requests, e.g. {model_name="llama"}`)
	window := fs.String("window", "5m", "window length ending at --end")
	end := fs.String("end", "", "window end: Unix seconds or RFC 3339 (default now)")
	quantile := fs.Float64("quantile", 0.99, "quantile level p in (0, 1)")
	method := fs.String("method", "auto", "auto (records, else tail accumulators, else stage histograms), tail-mean, euler, excess or shapley (needs --baseline-offset)")
	metric := fs.String("metric", "e2e", "latency to decompose: e2e or ttft")
	baseline := fs.String("baseline-offset", "", "shapley: compare with the same window this long before (e.g. 1d)")
	prompt := fs.String("prompt-template", "", "prompt template text; its sha256 becomes the report's prompt_hash")
	upload := fs.Bool("upload", false, "ask the server to store the report in its bucket")
	local := fs.Bool("local", false, "the server's own records only, not those of its peers (--records.peer)")
	partial := fs.Bool("partial-response", false, "when a peer of the server does not answer, report over the other nodes (with a warning) instead of failing")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	timeout := fs.Duration("timeout", 2*time.Minute, "HTTP timeout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !(*quantile > 0 && *quantile < 1) {
		return fmt.Errorf("--quantile %v: want a number in (0, 1)", *quantile)
	}
	q := url.Values{
		"selector": {*selector}, "window": {*window}, "quantile": {fmt.Sprint(*quantile)},
		"method": {strings.ReplaceAll(*method, "-", "_")}, "metric": {*metric},
	}
	for k, v := range map[string]string{"end": *end, "baseline_offset": *baseline, "prompt_template": *prompt} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *upload {
		q.Set("upload", "true")
	}
	if *local {
		q.Set("local", "true")
	}
	if *partial {
		q.Set("partial_response", "true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	u := strings.TrimRight(*server, "/") + "/api/v1/attribution/report"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(q.Encode()))
	if err != nil {
		return fmt.Errorf("--server %q: %w", *server, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("request report: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read report: %w", err)
	}
	var env struct {
		Status   string          `json:"status"`
		Data     json.RawMessage `json:"data"`
		Error    string          `json:"error"`
		Warnings []string        `json:"warnings"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("report from %s (HTTP %d) is not JSON: %.200q", u, resp.StatusCode, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("server: %s (HTTP %d)", env.Error, resp.StatusCode)
	}
	if *asJSON {
		var pretty any
		if err := json.Unmarshal(env.Data, &pretty); err != nil {
			return err
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(pretty)
	}
	var rep cliReport
	if err := json.Unmarshal(env.Data, &rep); err != nil {
		return fmt.Errorf("decode report: %w", err)
	}
	return printReport(out, &rep)
}

// cliReport is the part of api.Report the table shows.
type cliReport struct {
	Selector string `json:"selector"`
	Window   struct {
		Start, End string
		Seconds    float64
	} `json:"window"`
	Metric     string                 `json:"metric"`
	Quantile   float64                `json:"quantile"`
	Method     string                 `json:"method"`
	Kind       string                 `json:"kind"`
	Target     string                 `json:"target"`
	PromptHash *string                `json:"prompt_hash"`
	Requests   struct{ Total int }    `json:"requests"`
	QuantileMs *float64               `json:"quantile_ms"`
	TargetMs   *float64               `json:"target_ms"`
	ResidualMs *float64               `json:"residual_ms"`
	Stages     []string               `json:"stages"`
	Breakdown  map[string]*float64    `json:"p99_breakdown_ms"`
	BoundsMs   map[string][2]*float64 `json:"bounds_ms"`
	HeatTable  []struct {
		Band     string   `json:"band"`
		Requests int      `json:"requests"`
		MeanMs   *float64 `json:"mean_ms"`
		TopStage string   `json:"top_stage"`
		TopShare *float64 `json:"top_share"`
	} `json:"heat_table"`
	Warnings []string              `json:"warnings"`
	Upload   *struct{ URL string } `json:"upload"`
	Nodes    struct {
		Answered, Of int
		LeftOut      []string `json:"left_out"`
	} `json:"nodes"`
}

var targetText = map[string]string{
	"tail_mean":            "E[S | S ≥ P%s], the mean latency of the tail",
	"quantile":             "P%s itself",
	"tail_mean_minus_mean": "E[S | S ≥ P%s] − E[S], the tail's excess over the mean",
	"quantile_change":      "P%s now − P%s in the baseline",
}

func ms(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}

func printReport(out io.Writer, r *cliReport) error {
	pct := fmt.Sprintf("%g", r.Quantile*100)
	fmt.Fprintf(out, "%s %s, window %s (%gs ending %s), %d requests\n", r.Metric, r.Selector, r.Window.Start, r.Window.Seconds, r.Window.End, r.Requests.Total)
	if r.Nodes.Of > 1 {
		fmt.Fprintf(out, "records of %d of %d tailroot servers", r.Nodes.Answered, r.Nodes.Of)
		if len(r.Nodes.LeftOut) > 0 {
			fmt.Fprintf(out, " (left out: %s)", strings.Join(r.Nodes.LeftOut, "; "))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "method %s (%s); P%s = %s ms\n", r.Method, r.Kind, pct, ms(r.QuantileMs))
	if t, ok := targetText[r.Target]; ok {
		fmt.Fprintf(out, "stages add up to "+strings.ReplaceAll(t, "%s", pct)+" = %s ms\n", ms(r.TargetMs))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	bounds := len(r.BoundsMs) > 0
	if bounds {
		fmt.Fprintln(tw, "stage\tcontribution ms\tshare\tlower ms\tupper ms\t")
	} else {
		fmt.Fprintln(tw, "stage\tcontribution ms\tshare\t")
	}
	for _, st := range r.Stages {
		v := r.Breakdown[st]
		share := "-"
		if v != nil && r.TargetMs != nil && *r.TargetMs != 0 {
			share = fmt.Sprintf("%.1f%%", 100**v / *r.TargetMs)
		}
		if bounds {
			b := r.BoundsMs[st]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", st, ms(v), share, ms(b[0]), ms(b[1]))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", st, ms(v), share)
		}
	}
	fmt.Fprintf(tw, "residual\t%s\t\t\n", ms(r.ResidualMs))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.HeatTable) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "band\trequests\tmean ms\ttop stage\ttop share\t")
		for _, h := range r.HeatTable {
			share := "-"
			if h.TopShare != nil {
				share = fmt.Sprintf("%.1f%%", 100**h.TopShare)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", h.Band, h.Requests, ms(h.MeanMs), h.TopStage, share)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.PromptHash != nil {
		fmt.Fprintf(out, "\nprompt %s\n", *r.PromptHash)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	if r.Upload != nil {
		fmt.Fprintf(out, "uploaded to %s\n", r.Upload.URL)
	}
	return nil
}
