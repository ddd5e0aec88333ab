package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tailroot/tailroot/ingest"
)

// importCommand implements `tailroot import`: request records from files
// into a running server through POST /api/v1/requests.
//
// Reruns add nothing: every record has an identity (request_id, else
// trace_id; files without ids get deterministic ones, see
// import_formats.go), the records the server already holds in the files'
// time range are listed first (GET /api/v1/requests) and those ids are
// skipped, as are repeats within the files. An interrupted import resumes
// by running it again.
func importCommand(args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:9490", "URL of the tailroot server")
	format := fs.String("format", "auto", "ndjson, csv, vllm-bench (benchmark_serving.py --save-result JSON), openmetrics (series) or auto (by extension: .ndjson/.jsonl, .csv, .json, .om/.prom)")
	batch := fs.Int("batch", 5000, "records per push")
	chunk := fs.Int("chunk", defaultImportChunk, "records read, deduplicated, sorted by end time and pushed together; memory is bounded by one chunk")
	progress := fs.String("progress", "auto", "progress bar: auto (when stderr is a terminal), always or never")
	dedup := fs.Bool("dedup", true, "skip records whose id the server already holds")
	timeout := fs.Duration("timeout", 2*time.Minute, "HTTP timeout per request")
	auth := addImportAuthFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tailroot import [flags] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("no files given")
	}
	if *batch < 1 {
		return fmt.Errorf("--batch %d: want ≥ 1", *batch)
	}
	if *chunk < 1 {
		return fmt.Errorf("--chunk %d: want ≥ 1", *chunk)
	}
	show, err := showProgress(*progress)
	if err != nil {
		return err
	}
	im := &importer{
		server: strings.TrimRight(*server, "/"), batch: *batch, chunk: *chunk, dedup: *dedup,
		client: &http.Client{Timeout: *timeout}, out: os.Stdout, bar: newProgressBar(os.Stderr, show),
	}
	if err := auth.apply(im.client); err != nil {
		return err
	}
	var total int64
	for _, path := range fs.Args() {
		if fi, err := os.Stat(path); err == nil {
			total += fi.Size()
		}
	}
	im.bar.start(total, &im.read)
	for _, path := range fs.Args() {
		f := *format
		if f == "auto" {
			if f, err = formatOf(path); err != nil {
				return err
			}
		}
		if err := im.load(path, f); err != nil {
			return err
		}
	}
	sum, err := im.run(context.Background())
	sum.print(im.out)
	return err
}

func showProgress(mode string) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		st, err := os.Stderr.Stat()
		return err == nil && st.Mode()&os.ModeCharDevice != 0, nil
	}
	return false, fmt.Errorf("--progress %q: want auto, always or never", mode)
}

func formatOf(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(strings.TrimSuffix(path, ".gz"))) {
	case ".ndjson", ".jsonl":
		return "ndjson", nil
	case ".csv":
		return "csv", nil
	case ".json":
		return "vllm-bench", nil
	case ".om", ".prom":
		return "openmetrics", nil
	}
	return "", fmt.Errorf("%s: cannot tell the format from the extension; pass --format", path)
}

// line is one record as an NDJSON line with where it came from.
type line struct {
	src  string // file:line
	json []byte
	id   string
	time int64 // arrival, Unix ms
	end  int64 // arrival + end-to-end, Unix ms
}

// defaultImportChunk is --chunk's default: 100,000 records, about 25 MB
// of NDJSON held at once.
const defaultImportChunk = 100000

// maxReasons is how many rejections an import keeps with their reasons;
// the rest are counted.
const maxReasons = 1000

// importer streams its input: records are read, validated and queued
// until a chunk is full, and each chunk is deduplicated (against the
// server and within itself), sorted by end time and pushed before the next
// is read, so memory holds one chunk whatever the input's size.
type importer struct {
	server string
	batch  int
	// chunk is the records per chunk; zero or negative means
	// defaultImportChunk.
	chunk  int
	dedup  bool
	client *http.Client
	out    io.Writer
	bar    *progressBar

	lines     []line
	samples   []omSample
	rejected  []rejection // the first maxReasons
	nRejected int
	sum       importSummary // of the chunks pushed so far
	sent      int
	started   time.Time
	read      atomic.Int64 // input bytes read, for the progress bar
	flushErr  error
}

// reject records a rejected input record.
func (im *importer) reject(src, reason string) {
	im.nRejected++
	if len(im.rejected) < maxReasons {
		im.rejected = append(im.rejected, rejection{src, reason})
	}
}

type rejection struct{ src, reason string }

// load reads path as format and validates every record as the server
// would (ingest.DecodeRequestLine), so bad lines are reported with their
// file and line before anything is sent.
func (im *importer) load(path, format string) error {
	if format == "openmetrics" {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if err := im.loadOpenMetrics(path, data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	in := &countingReader{r: f, n: &im.read}
	emit := func(n int, js []byte, err error) {
		if im.flushErr != nil {
			return
		}
		src := fmt.Sprintf("%s:%d", path, n)
		if err != nil {
			im.reject(src, err.Error())
			return
		}
		im.emitLine(src, js)
		if len(im.lines) >= im.chunkSize() {
			im.flushErr = im.flush(context.Background())
		}
	}
	switch format {
	case "ndjson":
		err = readNDJSON(in, emit)
	case "csv":
		err = readCSV(in, emit)
	case "vllm-bench":
		err = readVLLMBench(in, filepath.Base(path), emit)
	default:
		return fmt.Errorf("--format %q: want ndjson, csv, vllm-bench, openmetrics or auto", format)
	}
	if im.flushErr != nil {
		return im.flushErr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func (im *importer) chunkSize() int {
	if im.chunk > 0 {
		return im.chunk
	}
	return defaultImportChunk
}

// countingReader adds the bytes read to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// emitLine validates one NDJSON record and queues it.
func (im *importer) emitLine(src string, js []byte) {
	it, err := ingest.DecodeRequestLine(js, ingest.RequestLimits{})
	if err != nil {
		im.reject(src, err.Error())
		return
	}
	r := &it.Record
	im.lines = append(im.lines, line{src: src, json: js, id: recordID(r.RequestID, r.TraceID), time: r.Time, end: r.Time + int64(math.Round(r.E2E*1000))})
}

func recordID(requestID string, trace [16]byte) string {
	if requestID != "" {
		return "r:" + requestID
	}
	return "t:" + hex.EncodeToString(trace[:])
}

// importSummary is what an import did.
type importSummary struct {
	Accepted, Skipped, Rejected      int
	SamplesAccepted, SamplesRejected int
	Reasons                          []rejection
	Seconds                          float64
}

func (s importSummary) print(w io.Writer) {
	rate := 0.0
	if s.Seconds > 0 {
		rate = float64(s.Accepted) / s.Seconds
	}
	fmt.Fprintf(w, "accepted %d, skipped %d (already stored), rejected %d; %.1f s, %.0f records/s\n", s.Accepted, s.Skipped, s.Rejected, s.Seconds, rate)
	if s.SamplesAccepted+s.SamplesRejected > 0 {
		fmt.Fprintf(w, "series samples: accepted %d (a sample already stored is accepted and changes nothing), rejected %d\n", s.SamplesAccepted, s.SamplesRejected)
	}
	for i, r := range s.Reasons {
		if i == 20 {
			fmt.Fprintf(w, "  … and %d more rejected\n", s.Rejected+s.SamplesRejected-i)
			break
		}
		fmt.Fprintf(w, "  %s: %s\n", r.src, r.reason)
	}
}

// run pushes what is still queued, then the series samples, and returns
// the summary of the whole import.
func (im *importer) run(ctx context.Context) (importSummary, error) {
	err := im.flush(ctx)
	im.bar.done()
	sum := im.sum
	if err == nil {
		err = im.pushSamples(ctx, &sum)
	}
	sum.Rejected = im.nRejected
	sum.Reasons = append(slices.Clone(im.rejected), sum.Reasons...)
	sort.SliceStable(sum.Reasons, func(a, b int) bool { return sum.Reasons[a].src < sum.Reasons[b].src })
	sum.Seconds = time.Since(im.startTime()).Seconds()
	return sum, err
}

func (im *importer) startTime() time.Time {
	if im.started.IsZero() {
		im.started = time.Now()
	}
	return im.started
}

// flush deduplicates, sorts and pushes the queued chunk, adding to
// im.sum, and empties the queue.
func (im *importer) flush(ctx context.Context) error {
	im.startTime()
	todo, skipped, err := im.fresh(ctx)
	im.sum.Skipped += skipped
	if err != nil {
		return err
	}
	var body bytes.Buffer
	for i := 0; i < len(todo); i += im.batch {
		part := todo[i:min(i+im.batch, len(todo))]
		body.Reset()
		for _, l := range part {
			body.Write(l.json)
			body.WriteByte('\n')
		}
		res, err := im.push(ctx, body.Bytes())
		if err != nil {
			return fmt.Errorf("push records %s…: %w (rerun to resume: stored records are skipped)", part[0].src, err)
		}
		im.sum.Accepted += res.Accepted
		for _, le := range res.Rejected {
			if le.Line >= 1 && le.Line <= len(part) {
				im.reject(part[le.Line-1].src, le.Error)
			}
		}
		im.sent += len(part)
		im.bar.set(im.sent, im.sum.Accepted)
	}
	clear(im.lines)
	im.lines = im.lines[:0]
	return nil
}

// fresh returns the lines to send: without repeats in the files and, with
// dedup, without the ids the server already holds.
func (im *importer) fresh(ctx context.Context) ([]line, int, error) {
	if len(im.lines) == 0 {
		return nil, 0, nil
	}
	have := map[string]struct{}{}
	if im.dedup {
		// List the server's records at the files' arrival times, in
		// windows of at most listWindow of the files' records, so that no
		// listing makes the server load many more than one page.
		const listWindow = 25000
		times := make([]int64, len(im.lines))
		for i, l := range im.lines {
			times[i] = l.time
		}
		slices.Sort(times)
		for i := 0; i < len(times); i += listWindow {
			hi := times[min(i+listWindow, len(times))-1]
			if err := im.storedIDs(ctx, times[i], hi, have); err != nil {
				return nil, 0, fmt.Errorf("list stored records: %w", err)
			}
		}
	}
	out := make([]line, 0, len(im.lines))
	skipped := 0
	for _, l := range im.lines {
		if _, ok := have[l.id]; ok {
			skipped++
			continue
		}
		have[l.id] = struct{}{}
		out = append(out, l)
	}
	// Send in end-time order: the derived series count a request at its
	// end time, and one that ends before a sample already written for its
	// label set is counted later than it happened (docs/stages.md).
	slices.SortStableFunc(out, func(a, b line) int { return cmp.Compare(a.end, b.end) })
	return out, skipped, nil
}

// storedIDs adds the ids of the server's records with arrival in
// [lo, hi] ms. A window the server truncates is halved and listed again.
func (im *importer) storedIDs(ctx context.Context, lo, hi int64, into map[string]struct{}) error {
	const limit = 100000
	q := url.Values{
		"start": {strconv.FormatFloat(float64(lo)/1000, 'f', 3, 64)}, "end": {strconv.FormatFloat(float64(hi)/1000, 'f', 3, 64)},
		"format": {"ndjson"}, "limit": {strconv.Itoa(limit)},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, im.server+"/api/v1/requests?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := im.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET /api/v1/requests: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if resp.Header.Get("X-Tailroot-Truncated") == "true" {
		if hi-lo < 1 {
			return fmt.Errorf("more than %d stored records arrived in one millisecond at %d", limit, lo)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		mid := lo + (hi-lo)/2
		if err := im.storedIDs(ctx, lo, mid, into); err != nil {
			return err
		}
		return im.storedIDs(ctx, mid+1, hi, into)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var r struct {
			RequestID string `json:"request_id"`
			TraceID   string `json:"trace_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("decode stored record: %w", err)
		}
		var tid [16]byte
		if r.RequestID == "" {
			if b, err := hex.DecodeString(r.TraceID); err == nil && len(b) == 16 {
				copy(tid[:], b)
			}
		}
		into[recordID(r.RequestID, tid)] = struct{}{}
	}
	return sc.Err()
}

// push sends one body; a 400 with a push result means some lines were
// stored and the others rejected.
func (im *importer) push(ctx context.Context, body []byte) (ingest.PushResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, im.server+"/api/v1/requests", bytes.NewReader(body))
	if err != nil {
		return ingest.PushResult{}, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := im.client.Do(req)
	if err != nil {
		return ingest.PushResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ingest.PushResult{}, err
	}
	var env struct {
		Status string            `json:"status"`
		Error  string            `json:"error"`
		Data   ingest.PushResult `json:"data"`
	}
	if jerr := json.Unmarshal(b, &env); jerr != nil {
		return ingest.PushResult{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return env.Data, nil
	case resp.StatusCode == http.StatusBadRequest && env.Data.Accepted+env.Data.RejectedCount > 0:
		return env.Data, nil
	}
	return ingest.PushResult{}, fmt.Errorf("%s: %s", resp.Status, env.Error)
}

// progressBar draws "[####----]  45%  450000/1000000  82000 records/s" on
// a terminal, redrawn in place; it draws nothing when off.
type progressBar struct {
	w              io.Writer
	on             bool
	sent, accepted int           // last drawn or skipped
	total          int64         // input bytes
	read           *atomic.Int64 // input bytes read so far
	t0             time.Time
	last           time.Time
}

func newProgressBar(w io.Writer, on bool) *progressBar { return &progressBar{w: w, on: on} }

// start begins a bar over total input bytes, read counting those read.
func (p *progressBar) start(total int64, read *atomic.Int64) {
	p.total, p.read, p.t0 = total, read, time.Now()
	p.draw(0, 0, true)
}

func (p *progressBar) set(sent, accepted int) {
	p.sent, p.accepted = sent, accepted
	p.draw(sent, accepted, false)
}

func (p *progressBar) draw(sent, accepted int, force bool) {
	if !p.on || p.total <= 0 || p.read == nil {
		return
	}
	now := time.Now()
	if !force && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	const width = 30
	done := min(p.read.Load(), p.total)
	fill := int(width * done / p.total)
	rate := 0.0
	if el := now.Sub(p.t0).Seconds(); el > 0 {
		rate = float64(accepted) / el
	}
	fmt.Fprintf(p.w, "\r[%s%s] %3d%%  %d records sent  %.0f records/s", strings.Repeat("#", fill), strings.Repeat("-", width-fill), 100*done/p.total, sent, rate)
}

// done draws the final state and ends the line.
func (p *progressBar) done() {
	if p.on && p.total > 0 && p.read != nil {
		p.draw(p.sent, p.accepted, true)
		fmt.Fprintln(p.w)
	}
}
