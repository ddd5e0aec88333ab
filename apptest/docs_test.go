package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// The examples in README.md and docs/*.md run as written, by the
// convention README.md's Development section states:
//
//   - every fenced block has a language; ```promql blocks hold PromQL
//     examples, each starting at a line that is not indented (indented
//     lines and unbalanced brackets continue it), and a line starting with
//     "→" after a query shows its result, so the query must return a
//     non-empty one;
//   - ```sh blocks that call curl are run by bash against the server
//     (127.0.0.1:9490 and localhost:9490 become its address), and every
//     curl must answer 2xx;
//   - a comment line `<!-- docs-test: skip REASON -->` just before a block
//     leaves it out, with the reason; `<!-- docs-test: history=D -->` says
//     the block needs D (up to 2h) of history, more than make run's hour,
//     and it runs on a server holding a 2-hour simulated scenario.

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file    string
	line    int // of the opening fence
	lang    string
	body    string
	skip    string        // reason, when marked not runnable
	history time.Duration // history the block needs, when marked
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// docBlocks returns the fenced blocks of a Markdown text, or an error for
// a block without a language or an unclosed one.
func docBlocks(file, text string) ([]docBlock, error) {
	lines := strings.Split(text, "\n")
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		fence, ok := strings.CutPrefix(strings.TrimLeft(lines[i], " "), "```")
		if !ok {
			continue
		}
		b := docBlock{file: file, line: i + 1, lang: strings.TrimSpace(fence)}
		if b.lang == "" {
			return nil, fmt.Errorf("%s: a fenced block without a language: mark it promql, sh, text, yaml, json, …", b)
		}
		if j := prevNonEmpty(lines, i); j >= 0 {
			if d, ok := docDirective(lines[j]); ok {
				switch {
				case strings.HasPrefix(d, "skip "):
					b.skip = strings.TrimSpace(strings.TrimPrefix(d, "skip "))
				case strings.HasPrefix(d, "history="):
					h, err := model.ParseDuration(strings.TrimPrefix(d, "history="))
					if err != nil {
						return nil, fmt.Errorf("%s: %q: %w", b, d, err)
					}
					b.history = time.Duration(h)
				default:
					return nil, fmt.Errorf("%s: unknown docs-test directive %q: want skip REASON or history=D", b, d)
				}
			}
		}
		j := i + 1
		for ; j < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[j], " "), "```"); j++ {
		}
		if j == len(lines) {
			return nil, fmt.Errorf("%s: fenced block not closed", b)
		}
		b.body = strings.Join(lines[i+1:j], "\n")
		out = append(out, b)
		i = j
	}
	return out, nil
}

func prevNonEmpty(lines []string, i int) int {
	for j := i - 1; j >= 0; j-- {
		if strings.TrimSpace(lines[j]) != "" {
			return j
		}
	}
	return -1
}

func docDirective(line string) (string, bool) {
	s, ok := strings.CutPrefix(strings.TrimSpace(line), "<!-- docs-test:")
	if !ok {
		return "", false
	}
	return strings.TrimSpace(strings.TrimSuffix(s, "-->")), true
}

// docQuery is one PromQL example of a ```promql block.
type docQuery struct {
	expr       string
	wantResult bool // the doc shows a result ("→ …")
}

// promqlQueries splits a ```promql block into its queries. A query starts
// at a line that is not indented, once the brackets of the one before
// balance (outside strings and comments); indented lines continue it. Lines
// of only a comment between queries are left out, and a "→" line marks
// the query before it as showing a result.
func promqlQueries(body string) []docQuery {
	var out []docQuery
	var cur []string
	depth := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, docQuery{expr: strings.Join(cur, "\n")})
		}
		cur, depth = nil, 0
	}
	for _, line := range strings.Split(body, "\n") {
		trim := strings.TrimSpace(line)
		indented := trim != "" && trim != line && strings.TrimLeft(line, " \t") != line
		if depth <= 0 && !indented {
			flush()
			switch {
			case strings.HasPrefix(trim, "→"):
				if len(out) > 0 {
					out[len(out)-1].wantResult = true
				}
				continue
			case trim == "" || strings.HasPrefix(trim, "#"):
				continue
			}
		}
		cur = append(cur, line)
		depth += nesting(line)
	}
	flush()
	return out
}

// nesting is the change of bracket depth over one line of PromQL, strings
// and comments skipped.
func nesting(line string) int {
	d := 0
	var quote rune
	esc := false
	for _, r := range line {
		switch {
		case quote != 0:
			if esc {
				esc = false
			} else if r == '\\' {
				esc = true
			} else if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '#':
			return d
		case r == '(' || r == '[' || r == '{':
			d++
		case r == ')' || r == ']' || r == '}':
			d--
		}
	}
	return d
}

// runPromQL evaluates q now on the server at base and returns an error
// unless it succeeds (with a non-empty result when the doc shows one).
func runPromQL(ctx context.Context, base string, q docQuery) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/query", strings.NewReader(url.Values{"query": {q.expr}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("status %d, not the API envelope: %.300s", resp.StatusCode, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("status %d: %s", resp.StatusCode, env.Error)
	}
	if q.wantResult {
		var list []json.RawMessage
		empty := env.Data.ResultType != "scalar" && env.Data.ResultType != "string" &&
			(json.Unmarshal(env.Data.Result, &list) != nil || len(list) == 0)
		if empty {
			return fmt.Errorf("the doc shows a result, the query returned none (%s)", env.Data.ResultType)
		}
	}
	return nil
}

// docShellPrelude makes every curl of a block fail on an HTTP error and
// the block fail on any failing command, with what was sent shown.
const docShellPrelude = `set -eo pipefail
curl() { command curl --silent --show-error --fail-with-body --max-time 120 "$@"; }
`

// runShell runs a ```sh block with bash, the documented address replaced
// by base's, and returns an error with its output unless it exits 0.
func runShell(ctx context.Context, base, body string) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	script := body
	for _, a := range []string{"127.0.0.1:9490", "localhost:9490"} {
		script = strings.ReplaceAll(script, a, u.Host)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", docShellPrelude+script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w:\n%s", err, tail(string(out), 1500))
	}
	return nil
}

// docFiles are the Markdown files whose examples must run.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, filepath.Join(root, "README.md"))
	out := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, n)
		out[rel] = string(b)
	}
	return out
}

// scenarioHistory is the window `tailroot simulate` pushes into an empty
// server: the most history a docs block may ask for.
const scenarioHistory = 2 * time.Hour

// TestDocsExamples runs every PromQL example and every curl of README.md
// and docs/*.md against `tailroot serve --simulate` as make run starts it
// (an hour of backfill). A block marked as needing more history runs on a
// second server holding the two hours `tailroot simulate --scenario
// cpu_contention` pushes (docs/causal.md's granger example shows its
// answer): --simulate's backfill cannot be longer than about
// an hour, because the records' derived series are written at now and the
// TSDB head then refuses samples older than half a block range.
func TestDocsExamples(t *testing.T) {
	var blocks []docBlock
	needHistory := false
	for name, text := range docFiles(t) {
		bs, err := docBlocks(name, text)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.history > scenarioHistory {
				t.Fatalf("%s asks for %s of history; the most a docs block can have is the %s of a tailroot simulate scenario", b, b.history, scenarioHistory)
			}
			needHistory = needHistory || b.history > time.Hour
		}
		blocks = append(blocks, bs...)
	}
	app := Start(t, t.TempDir(), "--simulate")
	started := time.Now()
	var hist *App
	if needHistory {
		hist = Start(t, t.TempDir())
		pushScenario(t, hist, "cpu_contention")
	}
	waitCaughtUp(t, app, started)
	// The walkthrough's curls ask about the incident that began at minute
	// 40 of the hour (make run's schedule); in its first seconds it has no
	// requests to break down yet.
	if m := time.Now().UTC().Sub(time.Now().UTC().Truncate(time.Hour)); m > 39*time.Minute+30*time.Second && m < 41*time.Minute {
		time.Sleep(41*time.Minute - m)
	}

	var queries, curls, skipped int
	for _, b := range blocks {
		runnable := b.lang == "promql" || (b.lang == "sh" && strings.Contains(b.body, "curl "))
		if !runnable {
			continue
		}
		if b.skip != "" {
			skipped++
			t.Logf("%s: not run: %s", b, b.skip)
			continue
		}
		srv := app
		if b.history > time.Hour {
			srv = hist
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		switch b.lang {
		case "promql":
			for _, q := range promqlQueries(b.body) {
				queries++
				if err := runPromQL(ctx, srv.URL, q); err != nil {
					t.Errorf("%s: %s\n%s", b, err, q.expr)
				}
			}
		case "sh":
			curls++
			if err := runShell(ctx, srv.URL, b.body); err != nil {
				t.Errorf("%s: %s\n%s", b, err, b.body)
			}
		}
		cancel()
	}
	t.Logf("%d PromQL examples and %d curl blocks run, %d blocks marked not runnable", queries, curls, skipped)
	if queries < 20 || curls < 3 {
		t.Errorf("only %d PromQL examples and %d curl blocks found: is the convention still followed?", queries, curls)
	}
}
