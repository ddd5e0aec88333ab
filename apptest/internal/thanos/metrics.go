package thanos

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Metric sums the samples of one metric family exposed in text format at
// baseURL/metrics (host:port or a URL); ok is false when the family is
// absent or the endpoint does not answer.
func Metric(baseURL, name string) (v float64, ok bool) {
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	resp, err := http.Get(baseURL + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) {
			continue
		}
		if c := line[len(name)]; c != ' ' && c != '{' {
			continue
		}
		f := strings.Fields(line[strings.LastIndex(line, "}")+1:])
		if strings.HasPrefix(line[len(name):], " ") {
			f = strings.Fields(line[len(name):])
		}
		if len(f) == 0 {
			continue
		}
		x, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		v += x
		ok = true
	}
	return v, ok
}

// WaitMetric polls Metric until cond holds for its value.
func WaitMetric(t testing.TB, baseURL, name string, cond func(float64) bool, timeout time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last float64
	var seen bool
	for time.Now().Before(deadline) {
		if v, ok := Metric(baseURL, name); ok {
			last, seen = v, true
			if cond(v) {
				return v
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s at %s: condition not met after %v (last value %v, present %v)", name, baseURL, timeout, last, seen)
	return 0
}
