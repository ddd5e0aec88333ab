package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Time // zero: an error
	}{
		{"0", time.Unix(0, 0)},
		{"1700000000", time.Unix(1700000000, 0)},
		{"1700000000.123", time.Unix(1700000000, 123e6)},
		{"1700000000.1234", time.Unix(1700000000, 123e6)}, // milliseconds, as Prometheus
		{"-1.5", time.Unix(-1, -500e6)},
		{"2023-11-14T22:13:20Z", time.Unix(1700000000, 0)},
		{"2023-11-14T23:13:20.5+01:00", time.Unix(1700000000, 500e6)},
		{MinTime.Format(time.RFC3339Nano), MinTime},
		{MaxTime.Format(time.RFC3339Nano), MaxTime},
		{"1e300", time.Time{}},
		{"-1e300", time.Time{}},
		{"NaN", time.Time{}},
		{"Inf", time.Time{}},
		{"9.3e15", time.Time{}}, // past MaxTime (about 9.2e15 s)
		{"yesterday", time.Time{}},
		{"", time.Time{}},
	} {
		got, err := ParseTime(c.in)
		if c.want.IsZero() {
			if err == nil {
				t.Errorf("ParseTime(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"15", 15 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"5m", 5 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"-3", -3 * time.Second, true},
		{"1e300", 0, false},
		{"9223372036.854775807", 0, false}, // 2^63 ns does not fit
		{"NaN", 0, false},
		{"5 minutes", 0, false},
	} {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParams(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/?"+url.Values{"t": {"1e300"}, "d": {"-5m"}, "ok": {"60"}}.Encode(), nil)
	def := time.Unix(7, 0)
	if got, err := TimeParam(r, "absent", def, false); err != nil || !got.Equal(def) {
		t.Errorf("absent optional time = %v, %v", got, err)
	}
	for name, err := range map[string]error{
		"absent required": second(TimeParam(r, "absent", def, true)),
		"out of range":    second(TimeParam(r, "t", def, false)),
		"negative":        second(PositiveDurationParam(r, "d", time.Minute)),
	} {
		var e *Error
		if !errors.As(err, &e) || e.Code != http.StatusBadRequest || e.Type != ErrBadData {
			t.Errorf("%s: %v, want a 400 bad_data", name, err)
		}
	}
	if d, err := PositiveDurationParam(r, "ok", time.Minute); err != nil || d != time.Minute {
		t.Errorf("ok = %v, %v", d, err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestWrite(t *testing.T) {
	for _, c := range []struct {
		name     string
		write    func(http.ResponseWriter)
		code     int
		body     string
		wantType string
	}{
		{"data", func(w http.ResponseWriter) { WriteData(w, []int{1}) }, 200, `{"status":"success","data":[1]}`, ""},
		{"warnings", func(w http.ResponseWriter) { WriteData(w, 2, "w1") }, 200, `{"status":"success","data":2,"warnings":["w1"]}`, ""},
		{"error", func(w http.ResponseWriter) { WriteError(w, 400, ErrBadData, "x") }, 400, `{"status":"error","errorType":"bad_data","error":"x"}`, ""},
		{"typed", func(w http.ResponseWriter) {
			WriteErr(w, fmt.Errorf("ctx: %w", Unprocessable(errors.New("no requests"))))
		}, 422, `{"status":"error","errorType":"execution","error":"ctx: no requests"}`, ""},
		{"plain", func(w http.ResponseWriter) { WriteErr(w, errors.New("disk")) }, 500, `{"status":"error","errorType":"internal","error":"disk"}`, ""},
		{"unencodable", func(w http.ResponseWriter) { WriteData(w, math.NaN()) }, 500, "", ErrInternal},
		{"number", func(w http.ResponseWriter) {
			WriteData(w, []Number{1.5, Number(math.NaN()), Number(math.Inf(-1)), 1e-300})
		}, 200, `{"status":"success","data":[1.5,null,null,1e-300]}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c.write(rec)
			if rec.Code != c.code || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("code %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			if c.body != "" && rec.Body.String() != c.body {
				t.Fatalf("body %s, want %s", rec.Body, c.body)
			}
			var resp Response
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			if c.wantType != "" && (resp.Status != "error" || resp.ErrorType != c.wantType || !strings.Contains(resp.Error, "encode")) {
				t.Fatalf("got %+v", resp)
			}
		})
	}
}

// FuzzParseTime: any input is either refused or read as a time within the
// bounds; seconds read back to the millisecond they name.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"0", "1.5", "1e300", "NaN", "-9.2e15", "2023-11-14T22:13:20Z", "0x1p40", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s)
		if err != nil {
			return
		}
		if tm.Before(MinTime) || tm.After(MaxTime) {
			t.Fatalf("ParseTime(%q) = %v, outside the bounds", s, tm)
		}
		if _, err := ParseDuration(s); err != nil && !strings.ContainsAny(s, "TZ:-") {
			// A number that is a valid time is a valid duration too
			// unless it overflows nanoseconds.
			if f, perr := strconv.ParseFloat(s, 64); perr == nil && math.Abs(f) < 9e9 {
				t.Fatalf("ParseDuration(%q): %v", s, err)
			}
		}
	})
}
