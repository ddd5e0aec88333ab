package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// MinTime and MaxTime bound the times the API accepts: the values of
// Prometheus' web/api/v1 (where they are the defaults of optional ranges),
// so an RFC 3339 string of either reads back and a seconds value beyond
// them is refused rather than overflowing int64 milliseconds.
var (
	MinTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	MaxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()

	minTimeFormatted = MinTime.Format(time.RFC3339Nano)
	maxTimeFormatted = MaxTime.Format(time.RFC3339Nano)
)

// The errors of ParseTime and ParseDuration; they do not repeat the value,
// which the caller names with its parameter.
var (
	errTimeSyntax     = errors.New("want Unix seconds or RFC 3339")
	errTimeRange      = fmt.Errorf("out of range: want a time between %s and %s", MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	errDurationSyntax = errors.New("want seconds or a duration such as 5m")
	errDurationRange  = errors.New("out of range: a duration holds at most about 292 years")
)

// ParseTime reads a Prometheus API time: Unix seconds (fractional, rounded
// to the millisecond) or RFC 3339, within [MinTime, MaxTime].
func ParseTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		// NaN fails both comparisons, so it is refused with the rest.
		if !(f >= float64(MinTime.Unix()) && f <= float64(MaxTime.Unix())) {
			return time.Time{}, errTimeRange
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	// time.Parse reads four-digit years only; the bounds have more.
	switch s {
	case minTimeFormatted:
		return MinTime, nil
	case maxTimeFormatted:
		return MaxTime, nil
	}
	return time.Time{}, errTimeSyntax
}

// ParseDuration reads a Prometheus API duration: seconds (fractional) or a
// Prometheus duration such as 5m or 1h30m. Negative values are returned;
// callers that need a positive one say so.
func ParseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		ns := f * float64(time.Second)
		// float64(math.MaxInt64) is 2^63, which int64 cannot hold; NaN
		// fails every comparison.
		if !(ns < float64(math.MaxInt64) && ns >= float64(math.MinInt64)) {
			return 0, errDurationRange
		}
		return time.Duration(ns), nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, errDurationSyntax
	}
	return time.Duration(d), nil
}

// TimeParam reads form value name as a time (see ParseTime): def when it is
// absent, a BadData error naming the parameter when it is malformed or
// absent and required.
func TimeParam(r *http.Request, name string, def time.Time, required bool) (time.Time, error) {
	s := r.FormValue(name)
	if s == "" {
		if required {
			return time.Time{}, BadData("parameter %s: required", name)
		}
		return def, nil
	}
	t, err := ParseTime(s)
	if err != nil {
		return time.Time{}, BadData("parameter %s=%q: %v", name, s, err)
	}
	return t, nil
}

// PositiveDurationParam reads form value name as a duration over zero (see
// ParseDuration): def when it is absent, a BadData error naming the
// parameter otherwise.
func PositiveDurationParam(r *http.Request, name string, def time.Duration) (time.Duration, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return 0, BadData("parameter %s=%q: %v", name, s, err)
	}
	if d <= 0 {
		return 0, BadData("parameter %s=%q: want a positive duration such as 5m", name, s)
	}
	return d, nil
}
