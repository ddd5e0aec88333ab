package apptest

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/tsdb/records"
	"github.com/tailroot/tailroot/tsdb/records/history"
)

// TestParquetHistoryCrash runs the real server with --records.parquet.dir
// and an export interval longer than the test, so a segment is exported
// only by the pass at start-up. Records sealed before a SIGKILL are
// exported after the restart; a second SIGKILL and restart rewrites
// nothing. Read back from the files alone (through a store that holds
// none of the partitions), every pushed record is there exactly once.
func TestParquetHistoryCrash(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(t.TempDir(), "history")
	app := startTokens(t, dir, "--records.parquet.dir", hist, "--records.parquet.node", "app1", "--records.parquet.export-interval", "1h")

	// 600 requests between 8 h and 7 h ago, then one now: the old
	// partition is due and sealed; nothing is exported yet.
	rng := rand.New(rand.NewPCG(41, 42))
	now := time.Now()
	old := now.Add(-8 * time.Hour).Unix()
	var body strings.Builder
	ids := map[string]bool{}
	for i := range 600 {
		a := float64(old) + rng.Float64()*1800
		e2e := 0.05 + rng.ExpFloat64()
		id := fmt.Sprintf("old-%d", i)
		ids[id] = true
		fmt.Fprintf(&body, `{"request_id":%q,"labels":{"model_name":"m"},"arrival":%.3f,"finished":%.3f,"stages":{"queue":%.6f,"prefill":%.6f}}`+"\n",
			id, a, a+e2e, e2e/4, e2e/3)
	}
	for _, b := range []string{body.String(), fmt.Sprintf(`{"request_id":"now","arrival":%d,"finished":%d}`+"\n", now.Unix()-1, now.Unix())} {
		resp := app.Post(t, "/api/v1/requests", "application/x-ndjson", []byte(b), nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("push: %d", resp.StatusCode)
		}
	}
	if n := countFiles(t, hist, ".parquet"); n != 0 {
		t.Fatalf("%d files exported before any export pass", n)
	}
	app.KillAndRestart(t)
	manifests := waitFiles(t, hist, ".json", 1)
	stamp := modTimes(t, hist)
	app.KillAndRestart(t)
	time.Sleep(500 * time.Millisecond) // the start-up pass finds every manifest
	if got := modTimes(t, hist); fmt.Sprint(got) != fmt.Sprint(stamp) {
		t.Fatalf("restart rewrote history files:\nbefore %v\nafter  %v", stamp, got)
	}
	app.Stop(t)

	o := records.DefaultOptions()
	o.Dir = t.TempDir()
	empty, err := records.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	bkt, err := history.NewDirBucket(hist)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := history.NewReader(bkt, "app1")
	if err != nil {
		t.Fatal(err)
	}
	it := history.NewSource(empty, rd, history.SourceOptions{}).Select(context.Background(), 0, now.UnixMilli()+1)
	defer it.Close()
	seen := map[string]int{}
	for it.Next() {
		seen[it.At().RequestID]++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range ids {
		if seen[id] != 1 {
			t.Fatalf("request %s is %d times in the history", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("history holds %d requests, %d were pushed before the sealed partition", len(seen), len(ids))
	}
	t.Logf("%d manifests, %d Parquet files, %d records, each once", manifests, countFiles(t, hist, ".parquet"), len(seen))
}

func countFiles(t *testing.T, dir, ext string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ext) {
			n++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

func waitFiles(t *testing.T, dir, ext string, atLeast int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n := countFiles(t, dir, ext); n >= atLeast {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s file under %s after 30s", ext, dir)
	return 0
}

func modTimes(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fi.ModTime()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
