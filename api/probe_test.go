package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	var state error
	h := probe("Ready", func() error { return state })
	for _, tc := range []struct {
		name     string
		err      error
		code     int
		contains string
	}{
		{"ok", nil, http.StatusOK, "tailroot is Ready."},
		{"refusing", errors.New("writes are refused since 10:00"), http.StatusServiceUnavailable, "tailroot is not Ready: writes are refused since 10:00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state = tc.err
			w := httptest.NewRecorder()
			h(w, httptest.NewRequest(http.MethodGet, "/-/ready", nil))
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.contains) {
				t.Fatalf("got %d %q, want %d containing %q", w.Code, w.Body.String(), tc.code, tc.contains)
			}
			if tc.err != nil && w.Header().Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		})
	}
	w := httptest.NewRecorder()
	probe("Healthy", nil)(w, httptest.NewRequest(http.MethodGet, "/-/healthy", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("nil check: %d", w.Code)
	}
}
