package ingest

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tailroot/tailroot/tsdb"
)

// storeStatus is the HTTP status of a write that failed in a store: 503
// with Retry-After when the store refuses writes until its log is safe
// again (tsdb.ErrUnavailable, ErrRecordsFailed), which clears by itself;
// 500 otherwise. Either way nothing of the request was stored.
func storeStatus(w http.ResponseWriter, err error) int {
	if errors.Is(err, tsdb.ErrUnavailable) || errors.Is(err, ErrRecordsFailed) || errors.Is(err, ErrRecordsClosed) {
		w.Header().Set("Retry-After", strconv.Itoa(int(tsdb.RetryAfter.Seconds())))
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
