package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The readers turn each input record into one NDJSON line of
// POST /api/v1/requests (docs/requests.schema.json) and hand it to emit
// with its 1-based position in the file, or the reason it cannot be one.

// readNDJSON passes lines through; blank lines are skipped.
func readNDJSON(r io.Reader, emit func(int, []byte, error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		emit(n, bytes.Clone(b), nil)
	}
	return sc.Err()
}

// CSV columns, by header name: request_id and trace_id; the lifecycle
// timestamps (Unix seconds, kept digit for digit, or RFC 3339);
// prompt_tokens, output_tokens, prompt_entropy; itl and token_times as
// numbers separated by spaces or semicolons; stages.<stage>; labels.<name>;
// any other column is a label. An empty cell is left out.
var (
	csvTimes   = map[string]bool{"arrival": true, "queued": true, "scheduled": true, "first_token": true, "last_token": true, "finished": true}
	csvNumbers = map[string]bool{"prompt_tokens": true, "output_tokens": true, "prompt_entropy": true}
	csvLists   = map[string]bool{"itl": true, "token_times": true}
)

func readCSV(r io.Reader, emit func(int, []byte, error)) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("read CSV header: %w", err)
	}
	header = append([]string(nil), header...)
	for i := range header {
		header[i] = strings.TrimSpace(header[i])
	}
	n := 1
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		n++
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && pe.Err == csv.ErrFieldCount {
				emit(n, nil, err)
				continue
			}
			return fmt.Errorf("read CSV: %w", err)
		}
		if len(row) != len(header) {
			emit(n, nil, fmt.Errorf("%d fields, header has %d", len(row), len(header)))
			continue
		}
		js, err := csvRow(header, row)
		emit(n, js, err)
	}
}

func csvRow(header, row []string) ([]byte, error) {
	obj := map[string]any{}
	labels := map[string]string{}
	stages := map[string]json.Number{}
	for i, name := range header {
		v := strings.TrimSpace(row[i])
		if v == "" {
			continue
		}
		switch {
		case name == "request_id" || name == "trace_id":
			obj[name] = v
		case csvTimes[name]:
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				obj[name] = json.Number(v)
			} else {
				obj[name] = v
			}
		case csvNumbers[name]:
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return nil, fmt.Errorf("column %s: %q is not a number", name, v)
			}
			obj[name] = json.Number(v)
		case csvLists[name]:
			var list []json.Number
			for f := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ' ' || r == ';' }) {
				if _, err := strconv.ParseFloat(f, 64); err != nil {
					return nil, fmt.Errorf("column %s: %q is not a number", name, f)
				}
				list = append(list, json.Number(f))
			}
			obj[name] = list
		case strings.HasPrefix(name, "stages."):
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return nil, fmt.Errorf("column %s: %q is not a number", name, v)
			}
			stages[strings.TrimPrefix(name, "stages.")] = json.Number(v)
		default:
			labels[strings.TrimPrefix(name, "labels.")] = v
		}
	}
	if len(labels) > 0 {
		obj["labels"] = labels
	}
	if len(stages) > 0 {
		obj["stages"] = stages
	}
	return json.Marshal(obj)
}

// vllmBench is the part of vLLM's benchmarks/benchmark_serving.py
// --save-result JSON that describes requests (lists indexed by request).
type vllmBench struct {
	Date       string      `json:"date"` // "20240523-102315", written when the run ended
	Backend    string      `json:"backend"`
	ModelID    string      `json:"model_id"`
	Duration   float64     `json:"duration"` // seconds the run took
	InputLens  []int       `json:"input_lens"`
	OutputLens []int       `json:"output_lens"`
	TTFTs      []float64   `json:"ttfts"`
	ITLs       [][]float64 `json:"itls"`
	Errors     []string    `json:"errors"`
}

// readVLLMBench turns a benchmark result into records. The file keeps no
// per-request times, so request i of n is placed at
// date − duration + i·duration/n (date read as UTC): arrivals spread evenly
// over the run, which keeps their order but not their exact times. Its
// first token is TTFT later, then one token per ITL; request ids are
// "vllm-bench:<date>:<i>", so a rerun finds them. A request the benchmark
// recorded as failed (an error, or no output) is rejected.
func readVLLMBench(r io.Reader, name string, emit func(int, []byte, error)) error {
	var b vllmBench
	if err := json.NewDecoder(r).Decode(&b); err != nil {
		return fmt.Errorf("decode vLLM benchmark JSON: %w", err)
	}
	end, err := time.ParseInLocation("20060102-150405", b.Date, time.UTC)
	if err != nil {
		return fmt.Errorf("date %q: want YYYYMMDD-HHMMSS as benchmark_serving.py writes it", b.Date)
	}
	n := len(b.TTFTs)
	if n == 0 {
		return errors.New("no ttfts: save the result with per-request details (--save-result)")
	}
	if !(b.Duration >= 0) {
		return fmt.Errorf("duration %v: want ≥ 0", b.Duration)
	}
	model := b.ModelID
	if model == "" {
		model = name
	}
	start := float64(end.UnixNano())/1e9 - b.Duration
	for i, ttft := range b.TTFTs {
		if i < len(b.Errors) && b.Errors[i] != "" {
			emit(i+1, nil, fmt.Errorf("request %d: the benchmark recorded an error: %s", i, b.Errors[i]))
			continue
		}
		out := at(b.OutputLens, i)
		if ttft <= 0 && out == 0 {
			emit(i+1, nil, fmt.Errorf("request %d: no output (ttft 0, output_len 0)", i))
			continue
		}
		arrival := start + float64(i)*b.Duration/float64(n)
		var itl []float64
		if i < len(b.ITLs) {
			itl = b.ITLs[i]
		}
		last := arrival + ttft
		for _, g := range itl {
			last += g
		}
		ls := map[string]string{"model_name": model, "source": "vllm-bench"}
		if b.Backend != "" {
			ls["backend"] = b.Backend
		}
		obj := map[string]any{
			"request_id":  fmt.Sprintf("vllm-bench:%s:%d", b.Date, i),
			"labels":      ls,
			"arrival":     json.Number(strconv.FormatFloat(arrival, 'f', 6, 64)),
			"first_token": json.Number(strconv.FormatFloat(arrival+ttft, 'f', 6, 64)),
			"last_token":  json.Number(strconv.FormatFloat(last, 'f', 6, 64)),
		}
		if len(itl) > 0 {
			obj["itl"] = itl
		}
		if in := at(b.InputLens, i); in > 0 {
			obj["prompt_tokens"] = in
		}
		if out > 0 {
			obj["output_tokens"] = out
		}
		js, err := json.Marshal(obj)
		emit(i+1, js, err)
	}
	return nil
}

func at(v []int, i int) int {
	if i < len(v) {
		return v[i]
	}
	return 0
}
