package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestServeDurationFlagsPrometheusSyntax(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		want  time.Duration
		shown string
	}{
		{"days", "30d", 30 * 24 * time.Hour, "30d"},
		{"weeks", "1w", 7 * 24 * time.Hour, "1w"},
		{"hours and minutes", "1h30m", 90 * time.Minute, "1h30m"},
		{"milliseconds", "500ms", 500 * time.Millisecond, "500ms"},
		{"go syntax still accepted", "1.5h", 90 * time.Minute, "1h30m"},
		{"zero", "0", 0, "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fs, err := parseServeFlags([]string{"--storage.tsdb.retention.time", tc.value, "--query.timeout", tc.value})
			if err != nil {
				t.Fatal(err)
			}
			if c.db.Retention != tc.want || c.query.Timeout != tc.want {
				t.Fatalf("retention %v, query timeout %v; want %v", c.db.Retention, c.query.Timeout, tc.want)
			}
			for _, name := range []string{"storage.tsdb.retention.time", "query.timeout"} {
				if got := fs.Lookup(name).Value.String(); got != tc.shown {
					t.Errorf("%s shown as %q, want %q", name, got, tc.shown)
				}
			}
		})
	}
}

func TestServeDurationFlagsRejectBadValues(t *testing.T) {
	for _, v := range []string{"abc", "-1h", "3x", "1d2", "1us", "1.0000001s"} {
		if _, _, err := parseServeFlags([]string{"--records.retention", v}); err == nil {
			t.Errorf("--records.retention %q accepted", v)
		}
	}
}

// TestServeFlagsAsPrometheusReportsThem checks the values a Thanos sidecar
// reads from /api/v1/status/flags: Prometheus' names, its duration syntax,
// and min == max block duration when both are given.
func TestServeFlagsAsPrometheusReportsThem(t *testing.T) {
	_, fs, err := parseServeFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{
		"storage.tsdb.retention.time":           "15d",
		"storage.tsdb.min-block-duration":       "2h",
		"storage.tsdb.max-block-duration":       "0s",
		"storage.tsdb.out-of-order-time-window": "30m",
		"query.lookback-delta":                  "5m",
	}
	for name, want := range defaults {
		f := fs.Lookup(name)
		if f == nil {
			t.Fatalf("no flag %s", name)
		}
		if f.Value.String() != want || f.DefValue != want {
			t.Errorf("%s: value %q, default %q; want %q", name, f.Value.String(), f.DefValue, want)
		}
	}

	c, fs, err := parseServeFlags([]string{"--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h"})
	if err != nil {
		t.Fatal(err)
	}
	if c.db.MinBlockDuration != 2*time.Hour || c.db.MaxBlockDuration != 2*time.Hour {
		t.Fatalf("block durations %v/%v, want 2h/2h", c.db.MinBlockDuration, c.db.MaxBlockDuration)
	}
	shown := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { shown[f.Name] = f.Value.String() })
	if shown["storage.tsdb.min-block-duration"] != shown["storage.tsdb.max-block-duration"] {
		t.Fatalf("min %q != max %q", shown["storage.tsdb.min-block-duration"], shown["storage.tsdb.max-block-duration"])
	}
}

// TestServeHelpShowsPrometheusDefaults prints the usage text as -h does:
// every default in Prometheus' syntax, and no flag value that cannot print
// its zero value.
func TestServeHelpShowsPrometheusDefaults(t *testing.T) {
	_, fs, err := parseServeFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	out := b.String()
	if strings.Contains(out, "panic") {
		t.Fatalf("usage text has a panic:\n%s", out)
	}
	for _, want := range []string{"(default 15d)", "(default 2h)", "(default 1w)", "(default 30s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage text lacks %q", want)
		}
	}
}

// FuzzPromDuration: whatever a duration flag accepts is reported (String)
// in a form that parses back to the same value, so /api/v1/status/flags
// never shows a value other than the one in force.
func FuzzPromDuration(f *testing.F) {
	for _, s := range []string{"30d", "1w", "1h30m", "500ms", "1.5h", "0", "90m0s", "2h", "1y2w3d4h5m6s7ms", "-1h", "1us"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parsePromDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("%q parsed to negative %v", s, d)
		}
		var v time.Duration
		shown := promDuration{&d}.String()
		if err := (promDuration{&v}).Set(shown); err != nil || v != d {
			t.Fatalf("%q → %v → %q → %v (%v)", s, d, shown, v, err)
		}
	})
}
