package requests

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

//go:embed traces/*.gz
var traceFS embed.FS

// Arrival is one request of an arrival trace.
type Arrival struct {
	// Offset is the arrival time from the start of the trace.
	Offset time.Duration
	// PromptTokens and OutputTokens are the request's token counts.
	PromptTokens, OutputTokens int
	// Blocks are the ids of the prompt's 512-token prefix blocks (Mooncake
	// traces only): two prompts share a prefix as far as their ids agree.
	Blocks []uint32
}

// Traces names the embedded arrival traces (traces/README.md).
var Traces = []string{"azure-code", "azure-conv", "mooncake"}

var traceFiles = map[string]string{
	"azure-code": "traces/azure-llm-2023-code.csv.gz",
	"azure-conv": "traces/azure-llm-2023-conv.csv.gz",
	"mooncake":   "traces/mooncake-conversation.jsonl.gz",
}

// LoadTrace returns an embedded trace, ordered by arrival. The Azure
// traces' first arrival is offset 0.
func LoadTrace(name string) ([]Arrival, error) {
	file, ok := traceFiles[name]
	if !ok {
		return nil, fmt.Errorf("load trace: unknown trace %q (want one of %q)", name, Traces)
	}
	raw, err := traceFS.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("load trace %s: %w", name, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("load trace %s: %w", name, err)
	}
	var out []Arrival
	if name == "mooncake" {
		out, err = parseMooncake(zr)
	} else {
		out, err = parseAzure(zr)
	}
	if err != nil {
		return nil, fmt.Errorf("load trace %s: %w", name, err)
	}
	slices.SortStableFunc(out, func(a, b Arrival) int { return int(a.Offset - b.Offset) })
	return out, nil
}

// azureTimeLayout is the trace's TIMESTAMP column: seven fractional digits,
// no zone (UTC).
const azureTimeLayout = "2006-01-02 15:04:05.0000000"

// parseAzure reads TIMESTAMP,ContextTokens,GeneratedTokens.
func parseAzure(r io.Reader) ([]Arrival, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	header, err := cr.Read()
	if err != nil {
		return nil, err
	}
	if header[0] != "TIMESTAMP" || header[1] != "ContextTokens" || header[2] != "GeneratedTokens" {
		return nil, fmt.Errorf("unexpected header %q", header)
	}
	var (
		out   []Arrival
		first time.Time
	)
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		t, err := time.Parse(azureTimeLayout, rec[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: timestamp %q: %w", line, rec[0], err)
		}
		in, err1 := strconv.Atoi(rec[1])
		outTok, err2 := strconv.Atoi(rec[2])
		if err1 != nil || err2 != nil || in < 0 || outTok < 0 {
			return nil, fmt.Errorf("line %d: token counts %q, %q", line, rec[1], rec[2])
		}
		if first.IsZero() || t.Before(first) {
			if !first.IsZero() {
				// Rebase everything read so far onto the earlier start.
				d := first.Sub(t)
				for i := range out {
					out[i].Offset += d
				}
			}
			first = t
		}
		out = append(out, Arrival{Offset: t.Sub(first), PromptTokens: in, OutputTokens: outTok})
	}
	return out, nil
}

// parseMooncake reads JSONL {timestamp (ms), input_length, output_length,
// hash_ids}.
func parseMooncake(r io.Reader) ([]Arrival, error) {
	var out []Arrival
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v struct {
			Timestamp    int64    `json:"timestamp"`
			InputLength  int      `json:"input_length"`
			OutputLength int      `json:"output_length"`
			HashIDs      []uint32 `json:"hash_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if v.Timestamp < 0 || v.InputLength < 0 || v.OutputLength < 0 {
			return nil, fmt.Errorf("line %d: negative field", line)
		}
		out = append(out, Arrival{
			Offset:       time.Duration(v.Timestamp) * time.Millisecond,
			PromptTokens: v.InputLength, OutputTokens: v.OutputLength, Blocks: v.HashIDs,
		})
	}
	return out, sc.Err()
}
