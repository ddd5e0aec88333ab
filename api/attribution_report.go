package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
)

// ReportSchemaVersion is the schema_version of reports this server writes
// (docs/attribution-report.schema.json).
const ReportSchemaVersion = 1

// Report is an attribution report: the tail breakdown of one window with
// what is needed to reproduce and audit it. docs/attribution-report.schema.json
// is its JSON Schema.
type Report struct {
	SchemaVersion int    `json:"schema_version"`
	GeneratedAt   string `json:"generated_at"`
	Selector      string `json:"selector"`
	Window        struct {
		Start   string  `json:"start"`
		End     string  `json:"end"`
		Seconds float64 `json:"seconds"`
	} `json:"window"`
	Metric   string  `json:"metric"`
	Quantile float64 `json:"quantile"`
	Method   string  `json:"method"`
	Kind     string  `json:"kind"`
	// Target names what p99_breakdown_ms adds up to (with residual_ms).
	Target     string  `json:"target"`
	PromptHash *string `json:"prompt_hash"`
	Requests   struct {
		Total   int     `json:"total"`
		Tail    float64 `json:"tail"`
		Clamped int     `json:"clamped"`
	} `json:"requests"`
	QuantileMs httpapi.Number `json:"quantile_ms"`
	TargetMs   httpapi.Number `json:"target_ms"`
	ResidualMs httpapi.Number `json:"residual_ms"`
	// Stages lists the stages of p99_breakdown_ms in canonical order.
	Stages         []string                     `json:"stages"`
	P99BreakdownMs map[string]httpapi.Number    `json:"p99_breakdown_ms"`
	BoundsMs       map[string][2]httpapi.Number `json:"bounds_ms,omitempty"`
	HeatTable      []ReportHeatRow              `json:"heat_table"`
	KernelFactors  struct {
		EBPFStackTrace     []json.RawMessage `json:"ebpf_stack_trace"`
		CUDAKernelTimeline []json.RawMessage `json:"cuda_kernel_timeline"`
	} `json:"kernel_factors"`
	Reproducibility struct {
		TailrootVersion  string           `json:"tailroot_version"`
		TailrootCommit   string           `json:"tailroot_commit"`
		GoVersion        string           `json:"go_version"`
		KernelVersion    string           `json:"kernel_version"`
		InferenceRuntime []RuntimeVersion `json:"inference_runtime"`
	} `json:"reproducibility"`
	Warnings []string    `json:"warnings"`
	Upload   *UploadInfo `json:"upload,omitempty"`
	// Nodes says which nodes the request counts, breakdown and heat
	// table cover; the label summaries (prompt_hash, inference_runtime)
	// read this server's records only.
	Nodes nodesData `json:"nodes"`
}

// ReportEvidenceLimit is the most stacks, and the most CUDA timelines, a
// report lists in kernel_factors: the slowest of its window.
const ReportEvidenceLimit = 20

// EvidenceSource supplies a report's kernel_factors: evidence items
// (agent/EVIDENCE.md) whose time spans overlap [start, end], slowest first,
// at most limit stacks and limit CUDA timelines. The evidence covers every
// node; the report's selector, which matches request labels, does not
// filter it.
type EvidenceSource interface {
	WindowEvidence(ctx context.Context, start, end time.Time, limit int) (stacks, timelines []json.RawMessage, err error)
}

// RecordsWithEvidence returns src, a non-nil record source, carrying ev:
// NewAttribution given it fills the kernel_factors of reports from ev.
func RecordsWithEvidence(src tailfn.RecordSource, ev EvidenceSource) tailfn.RecordSource {
	return evidenceRecords{src, ev}
}

type evidenceRecords struct {
	tailfn.RecordSource
	ev EvidenceSource
}

// kernelFactors reads the window's evidence when the record source carries
// an EvidenceSource. A failure is a warning: the breakdown stands without
// it.
func (a *Attribution) kernelFactors(ctx context.Context, rep *Report, start, end time.Time) {
	rep.KernelFactors.EBPFStackTrace = []json.RawMessage{}
	rep.KernelFactors.CUDAKernelTimeline = []json.RawMessage{}
	er, ok := a.src.(evidenceRecords)
	if !ok || er.ev == nil {
		return
	}
	stacks, timelines, err := er.ev.WindowEvidence(ctx, start, end, ReportEvidenceLimit)
	if err != nil {
		rep.Warnings = append(rep.Warnings, "kernel_factors: evidence unavailable: "+err.Error())
		return
	}
	if stacks != nil {
		rep.KernelFactors.EBPFStackTrace = stacks
	}
	if timelines != nil {
		rep.KernelFactors.CUDAKernelTimeline = timelines
	}
}

// ReportHeatRow is one latency band of a report's heat table.
type ReportHeatRow struct {
	Band        string                    `json:"band"`
	FromMs      httpapi.Number            `json:"from_ms"`
	ToMs        httpapi.Number            `json:"to_ms"`
	Requests    int                       `json:"requests"`
	MeanMs      httpapi.Number            `json:"mean_ms"`
	StageMeanMs map[string]httpapi.Number `json:"stage_mean_ms"`
	TopStage    string                    `json:"top_stage"`
	TopShare    httpapi.Number            `json:"top_share"`
}

// RuntimeVersion is an inference runtime version seen on the window's
// requests or series.
type RuntimeVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Label is the label the version was read from; Source "records" or
	// "series".
	Label  string `json:"label"`
	Source string `json:"source"`
	// Requests carrying this version (0 when read from series).
	Requests int `json:"requests"`
}

// runtimeLabels map version labels to runtime names; "" takes the name
// from a runtime or engine label.
var runtimeLabels = []struct{ label, name string }{
	{"vllm_version", "vllm"},
	{"sglang_version", "sglang"},
	{"tgi_version", "tgi"},
	{"trtllm_version", "tensorrt_llm"},
	{"triton_version", "triton"},
	{"runtime_version", ""},
	{"version", ""},
}

// promptLabels carry a prompt template identity; prompt_hash is taken as
// is, the others are hashed.
var promptLabels = []string{"prompt_hash", "prompt_template", "prompt_template_id", "prompt_id"}

var targetNames = map[attribution.Method]string{
	attribution.MethodTailMeanRecords:      "tail_mean",
	attribution.MethodTailMeanAccumulators: "tail_mean",
	attribution.MethodComonotonicBound:     "tail_mean",
	attribution.MethodEuler:                "quantile",
	attribution.MethodExcess:               "tail_mean_minus_mean",
	attribution.MethodShapley:              "quantile_change",
}

// labelSeen counts the values of interesting labels over the records.
type labelSeen struct {
	runtime map[[3]string]int // label, name, version
	prompt  map[[2]string]int // label, value
}

func (s *labelSeen) visit(r *records.Record) {
	for _, rl := range runtimeLabels {
		v := r.Labels.Get(rl.label)
		if v == "" {
			continue
		}
		s.runtime[[3]string{rl.label, runtimeName(rl.name, r.Labels), v}]++
		break
	}
	for _, pl := range promptLabels {
		if v := r.Labels.Get(pl); v != "" {
			s.prompt[[2]string{pl, v}]++
			break
		}
	}
}

func runtimeName(name string, ls labels.Labels) string {
	if name != "" {
		return name
	}
	for _, l := range []string{"runtime", "engine", "server"} {
		if v := ls.Get(l); v != "" {
			return v
		}
	}
	return "unknown"
}

// report serves /api/v1/attribution/report.
func (a *Attribution) report(w http.ResponseWriter, r *http.Request) {
	rep, err := a.buildReport(r)
	if err != nil {
		httpapi.WriteErr(w, err)
		return
	}
	if ok, _ := strconv.ParseBool(r.FormValue("upload")); ok {
		if a.opts.Uploader == nil {
			httpapi.WriteErr(w, httpapi.BadData("parameter upload: this server has no report bucket configured"))
			return
		}
		body, err := json.Marshal(rep)
		if err != nil {
			httpapi.WriteErr(w, err)
			return
		}
		info, err := a.opts.Uploader.Upload(r.Context(), reportKey(rep), body)
		if err != nil {
			a.opts.Logger.Error("upload attribution report", "err", err)
			httpapi.WriteError(w, http.StatusBadGateway, httpapi.ErrUnavailable, err.Error())
			return
		}
		rep.Upload = &info
	}
	httpapi.WriteData(w, rep, rep.Warnings...)
}

// reportKey names an uploaded report by day, window end and selector:
// reports/2024-01-02/20240102T150405Z-<sha256(selector)[:12]>.json.
func reportKey(rep *Report) string {
	end, _ := time.Parse(time.RFC3339Nano, rep.Window.End)
	h := sha256.Sum256([]byte(rep.Selector + "\x00" + rep.Method + "\x00" + strconv.FormatFloat(rep.Quantile, 'g', -1, 64)))
	return fmt.Sprintf("reports/%s/%s-%s.json", end.UTC().Format("2006-01-02"), end.UTC().Format("20060102T150405Z"), hex.EncodeToString(h[:6]))
}

func (a *Attribution) buildReport(r *http.Request) (*Report, error) {
	ms, sel, err := a.selectorParam(r, "selector", false)
	if err != nil {
		return nil, err
	}
	p, err := levelParam(r, "quantile", attribution.DefaultP)
	if err != nil {
		return nil, err
	}
	dur, err := httpapi.PositiveDurationParam(r, "window", 5*time.Minute)
	if err != nil {
		return nil, err
	}
	end, err := httpapi.TimeParam(r, "end", a.opts.Now().UTC(), false)
	if err != nil {
		return nil, err
	}
	start, err := httpapi.TimeParam(r, "start", end.Add(-dur), false)
	if err != nil {
		return nil, err
	}
	win, err := window(ms, start, end)
	if err != nil {
		return nil, err
	}
	method := or(r.FormValue("method"), "auto")
	if method == "tail-mean" {
		method = "tail_mean"
	}
	seen := &labelSeen{runtime: map[[3]string]int{}, prompt: map[[2]string]int{}}
	req := tailfn.DecomposeRequest{Window: win, Metric: or(r.FormValue("metric"), "e2e"), P: p, Method: method, Heat: true, Visit: seen.visit}
	if method == "shapley" {
		if req.Baseline, err = baselineParam(r, ms, win); err != nil {
			return nil, err
		}
	}
	d, err := a.decompose(r, req)
	if err != nil {
		return nil, err
	}

	rep := &Report{
		SchemaVersion: ReportSchemaVersion, GeneratedAt: a.opts.Now().UTC().Format(time.RFC3339Nano), Selector: sel,
		Metric: req.Metric, Quantile: p, Method: d.Breakdown.Method.String(), Kind: d.Breakdown.Kind.String(), Target: targetNames[d.Breakdown.Method],
	}
	rep.Window.Start, rep.Window.End = start.UTC().Format(time.RFC3339Nano), end.UTC().Format(time.RFC3339Nano)
	rep.Window.Seconds = end.Sub(start).Seconds()
	rep.Requests.Total, rep.Requests.Tail, rep.Requests.Clamped = d.Requests, d.Breakdown.Count, d.Clamped
	rep.QuantileMs, rep.TargetMs, rep.ResidualMs = httpapi.Number(d.Breakdown.Quantile*1e3), httpapi.Number(d.Breakdown.Target*1e3), httpapi.Number(d.Breakdown.Residual*1e3)
	rep.Stages = d.Breakdown.Stages
	rep.P99BreakdownMs = map[string]httpapi.Number{}
	for j, st := range d.Breakdown.Stages {
		rep.P99BreakdownMs[st] = httpapi.Number(d.Breakdown.Contrib[j] * 1e3)
		if d.Breakdown.Lower != nil && !math.IsNaN(d.Breakdown.Lower[j]) {
			if rep.BoundsMs == nil {
				rep.BoundsMs = map[string][2]httpapi.Number{}
			}
			rep.BoundsMs[st] = [2]httpapi.Number{httpapi.Number(d.Breakdown.Lower[j] * 1e3), httpapi.Number(d.Breakdown.Upper[j] * 1e3)}
		}
	}
	rep.HeatTable = []ReportHeatRow{}
	if d.Heat != nil {
		for _, row := range d.Heat.Rows {
			hr := ReportHeatRow{
				Band: row.Band.String(), FromMs: httpapi.Number(row.From * 1e3), ToMs: httpapi.Number(row.To * 1e3), Requests: row.Count,
				MeanMs: httpapi.Number(row.MeanS * 1e3), StageMeanMs: map[string]httpapi.Number{}, TopStage: row.TopStage, TopShare: httpapi.Number(row.TopShare),
			}
			for j, st := range d.Heat.Stages {
				hr.StageMeanMs[st] = httpapi.Number(row.StageMean[j] * 1e3)
			}
			rep.HeatTable = append(rep.HeatTable, hr)
		}
	}
	rep.PromptHash = promptHash(r.FormValue("prompt_template"), seen.prompt)
	rep.Reproducibility.TailrootVersion = a.opts.Build.Version
	rep.Reproducibility.TailrootCommit = a.opts.Build.Revision
	rep.Reproducibility.GoVersion = runtime.Version()
	rep.Reproducibility.KernelVersion = a.opts.KernelVersion()
	rep.Reproducibility.InferenceRuntime = a.runtimes(r.Context(), seen, win)
	rep.Warnings = append([]string{}, d.Warnings...)
	rep.Nodes = nodesJSON(d.Nodes)
	a.kernelFactors(r.Context(), rep, start, end)
	return rep, nil
}

// promptHash is sha256 of the given template, else the one prompt identity
// every labelled request shares (a prompt_hash label as is, a template or
// id label hashed), else nil: several prompts, or none known.
func promptHash(template string, seen map[[2]string]int) *string {
	hash := func(s string) *string {
		h := sha256.Sum256([]byte(s))
		out := "sha256:" + hex.EncodeToString(h[:])
		return &out
	}
	if template != "" {
		return hash(template)
	}
	if len(seen) != 1 {
		return nil
	}
	for k := range seen {
		if k[0] == "prompt_hash" {
			v := k[1]
			return &v
		}
		return hash(k[1])
	}
	return nil
}

// runtimes lists the runtime versions on the window's records, or, when
// none carry one, on the series matching the selector in the window.
func (a *Attribution) runtimes(ctx context.Context, seen *labelSeen, win tailfn.Window) []RuntimeVersion {
	out := []RuntimeVersion{}
	for k, n := range seen.runtime {
		out = append(out, RuntimeVersion{Name: k[1], Version: k[2], Label: k[0], Source: "records", Requests: n})
	}
	if len(out) == 0 && a.q != nil {
		ms := win.Matchers
		if q, err := a.q.Querier(win.Mint, win.Maxt); err == nil {
			for _, rl := range runtimeLabels {
				vals, _, err := q.LabelValues(ctx, rl.label, nil, ms...)
				if err != nil {
					continue
				}
				for _, v := range vals {
					name := rl.name
					if name == "" {
						name = "unknown"
					}
					out = append(out, RuntimeVersion{Name: name, Version: v, Label: rl.label, Source: "series"})
				}
				if len(vals) > 0 {
					break
				}
			}
			_ = q.Close()
		}
	}
	slices.SortFunc(out, func(x, y RuntimeVersion) int {
		if x.Requests != y.Requests {
			return y.Requests - x.Requests
		}
		if x.Name != y.Name {
			return cmp.Compare(x.Name, y.Name)
		}
		return cmp.Compare(x.Version, y.Version)
	})
	return out
}
