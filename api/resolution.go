package api

import (
	"net/http"

	"github.com/tailroot/tailroot/internal/httpapi"
	remotequery "github.com/tailroot/tailroot/query/remote"
)

// maxSourceResolution reads Thanos' max_source_resolution query parameter
// (auto, 0s, 5m, 1h, …) into the request's context, where the global
// view's StoreAPI endpoints look it up to read downsampled blocks; absent,
// the server's default (--store.max-source-resolution) holds.
func maxSourceResolution(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query().Get("max_source_resolution")
		if v == "" && r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			v = r.FormValue("max_source_resolution")
		}
		if v != "" {
			d, err := remotequery.ParseMaxSourceResolution(v)
			if err != nil || d < remotequery.AutoResolution {
				httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, "max_source_resolution must be auto or a duration such as 0s, 5m, 1h")
				return
			}
			r = r.WithContext(remotequery.WithMaxSourceResolution(r.Context(), d))
		}
		next.ServeHTTP(w, r)
	})
}
