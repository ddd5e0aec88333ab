//go:build cgo

package history

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tailroot/tailroot/query/tailfn"
)

// TestDuckDBReadsHistory exports a store and lets DuckDB, an independent
// Parquet reader and SQL engine, compute the tail mean with its own
// quantile_cont (type 7, as tailroot) over read_parquet(…,
// hive_partitioning = true), filtering on the date and hour partition
// columns and on the labels map. Its answer must equal tailroot's
// tail_mean over the same window.
func TestDuckDBReadsHistory(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 14))
	s := openStore(t, t.TempDir(), 0, nil)
	recs := fillStore(t, s, rng, 20000, 30*time.Hour)
	dir := t.TempDir()
	bkt, _ := NewDirBucket(dir)
	exp, _ := NewExporter(s, bkt, ExportOptions{Node: "n1"})
	if _, err := exp.ExportPending(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Records of 2026-11-28 10:00–15:59 UTC of one model; tailroot's
	// window (end − 6h, end] with end = 15:59:59.999.
	mint, maxt := t0+10*hour, t0+16*hour-1
	const model = "qwen2-72b"
	want := filter(recs, mint, maxt, model)
	glob := filepath.Join(dir, "**", "*.parquet")
	stages := make([]string, len(tailfn.StageNames))
	for i, st := range tailfn.StageNames {
		stages[i] = st + "_seconds"
	}
	stages[len(stages)-1] = "greatest(other_seconds, 0)" // tailroot clamps an overlapping residual
	q := fmt.Sprintf(`
WITH t AS (
  SELECT *, %[1]s AS total
  FROM read_parquet('%[2]s', hive_partitioning = true)
  WHERE "date" = DATE '2026-11-28' AND hour BETWEEN 10 AND 15 AND labels['model_name'] = '%[3]s'
), q AS (SELECT quantile_cont(total, 0.99) AS p99, count(*) AS n, min(epoch_ms(time)) AS lo, max(epoch_ms(time)) AS hi FROM t)
SELECT q.p99, q.n, q.lo, q.hi, count(*), %[4]s
FROM t, q WHERE t.total >= q.p99 GROUP BY q.p99, q.n, q.lo, q.hi`,
		strings.Join(stages, " + "), glob, model, "avg("+strings.Join(stages, "), avg(")+")")
	var p99 float64
	var n, lo, hi, tailN int64
	means := make([]float64, len(stages))
	dst := []any{&p99, &n, &lo, &hi, &tailN}
	for i := range means {
		dst = append(dst, &means[i])
	}
	if err := db.QueryRowContext(ctx, q).Scan(dst...); err != nil {
		t.Fatalf("duckdb: %v\n%s", err, q)
	}
	if n != int64(len(want)) || lo < mint || hi > maxt {
		t.Fatalf("duckdb sees %d records in [%d, %d], want %d in [%d, %d]", n, lo, hi, len(want), mint, maxt)
	}
	ng := newEngine(t, s)
	rows := evalRows(t, ng, fmt.Sprintf(`tail_mean(0.99, requests{model_name=%q}[6h], "all")`, model), maxt)
	if got := rows["e2e/quantile"]; math.Abs(got-p99) > 1e-12*p99 {
		t.Errorf("P99: tailroot %v, duckdb quantile_cont %v", got, p99)
	}
	if got := rows["e2e/count"]; got != float64(tailN) {
		t.Errorf("tail size: tailroot %v, duckdb %d", got, tailN)
	}
	for i, st := range tailfn.StageNames {
		if got := rows[st+"/contribution"]; math.Abs(got-means[i]) > 1e-9 {
			t.Errorf("%s: tailroot %v, duckdb %v", st, got, means[i])
		}
	}
	t.Logf("duckdb over %d exported files: %d records, P99 %.6f s, %d in the tail, decode mean %.6f s",
		countFiles(t, bkt), n, p99, tailN, means[3])
}

func countFiles(t *testing.T, b Bucket) int {
	keys, err := b.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if strings.HasSuffix(k, ".parquet") {
			n++
		}
	}
	return n
}
