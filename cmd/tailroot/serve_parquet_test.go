package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/tailroot/tailroot/tsdb/records"
	"github.com/tailroot/tailroot/tsdb/records/history"
)

func TestParquetFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" means it starts
		enabled bool
	}{
		{"off by default", nil, "", false},
		{"directory", []string{"--records.parquet.dir", dir, "--records.parquet.node", "n1"}, "", true},
		{"both", []string{"--records.parquet.dir", dir, "--records.parquet.s3.endpoint", "localhost:9000", "--records.parquet.s3.bucket", "b"}, "exclusive", true},
		{"s3 without bucket", []string{"--records.parquet.s3.endpoint", "localhost:9000"}, "needs --records.parquet.s3.bucket", true},
		{"bad node", []string{"--records.parquet.dir", dir, "--records.parquet.node", "a-b"}, "history node", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parseServeFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if c.parquet.enabled() != tc.enabled {
				t.Fatalf("enabled %v, want %v", c.parquet.enabled(), tc.enabled)
			}
			o := records.DefaultOptions()
			o.Dir = t.TempDir()
			c.parquet.holdRetention(&o)
			if (o.RetentionHold != nil) != tc.enabled {
				t.Fatalf("retention hold set: %v, want %v", o.RetentionHold != nil, tc.enabled)
			}
			if o.RetentionHold != nil && !o.RetentionHold(records.SegmentRef{Name: "0-000001.seg"}) {
				t.Fatal("a segment is not held before the exporter ran")
			}
			store, err := records.Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			src, err := c.parquet.start(store, c.records.Store.Retention, nil, slog.New(slog.DiscardHandler))
			defer c.parquet.stop()
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.enabled:
				if _, ok := src.(*history.Source); !ok {
					t.Fatalf("source %T, want *history.Source", src)
				}
			default:
				if src != store {
					t.Fatalf("source %T, want the store", src)
				}
			}
		})
	}
	if n := defaultNode(); history.ValidNode(n) != nil {
		t.Fatalf("default node %q is not valid", n)
	}
}
