package ingest

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/tsdb"
)

// storeStatus is the HTTP status of a write that failed in a store: 503
// with Retry-After when the store refuses writes until its log is safe
// again (tsdb.ErrUnavailable, ErrRecordsFailed), which clears by itself;
// 429 with Retry-After when a per-tenant limit refused the write
// (tenant.LimitError); 500 otherwise. Either way nothing of the request
// was stored.
func storeStatus(w http.ResponseWriter, err error) int {
	if le, ok := errors.AsType[*tenant.LimitError](err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(le.RetryAfterSeconds()))
		return http.StatusTooManyRequests
	}
	if errors.Is(err, tsdb.ErrUnavailable) || errors.Is(err, ErrRecordsFailed) || errors.Is(err, ErrRecordsClosed) {
		w.Header().Set("Retry-After", strconv.Itoa(int(tsdb.RetryAfter.Seconds())))
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
