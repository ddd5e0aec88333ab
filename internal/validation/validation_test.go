package validation

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

func TestRules(t *testing.T) {
	r := DefaultRules()
	for _, tc := range []struct {
		name, lname, value, want string
	}{
		{"ok", "job", "api", ""},
		{"empty name", "", "x", "empty label name"},
		{"long name", strings.Repeat("n", 1025), "x", "ingest.max-label-name-length=1024"},
		{"200 KB value", "a", strings.Repeat("v", 200<<10), "ingest.max-label-value-length=4096"},
		{"invalid UTF-8 value", "a", "\xff\xfe", "not valid UTF-8"},
		{"invalid UTF-8 name", "a\xff", "x", "not valid UTF-8"},
		{"value at the limit", "a", strings.Repeat("v", 4096), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Label(tc.lname, tc.value)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("error quotes the whole input: %d bytes", len(err.Error()))
			}
		})
	}
	b := labels.NewScratchBuilder(0)
	for i := range 100001 {
		b.Add("l"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+itoa(i), "v")
	}
	b.Sort()
	if err := r.Labels(b.Labels()); err == nil || !strings.Contains(err.Error(), "100001 labels, over the limit ingest.max-labels-per-series=64") {
		t.Fatalf("100001 labels: %v", err)
	}
	if err := r.Labels(labels.FromStrings("__name__", "m", "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := (Rules{}).Labels(b.Labels()); err != nil {
		t.Fatalf("zero rules refused: %v", err)
	}
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}

func TestUnixNano(t *testing.T) {
	if v, err := UnixNano(1_700_000_000_000_000_000); err != nil || v != 1_700_000_000_000_000_000 {
		t.Fatalf("%d %v", v, err)
	}
	if v, err := UnixNano(math.MaxInt64); err != nil || v != math.MaxInt64 {
		t.Fatalf("%d %v", v, err)
	}
	// The case: beyond int64 today wraps to 1915 in milliseconds.
	if _, err := UnixNano(math.MaxInt64 + 1); !errors.Is(err, ErrTimestampRange) || !strings.Contains(err.Error(), "2262") {
		t.Fatalf("beyond int64: %v", err)
	}
	if _, err := UnixNano(math.MaxUint64); !errors.Is(err, ErrTimestampRange) {
		t.Fatalf("max uint64: %v", err)
	}
}
