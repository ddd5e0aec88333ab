package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
)

// The errorType values of the Prometheus API envelope; clients (Grafana,
// promtool) switch on them.
const (
	ErrBadData     = "bad_data"
	ErrExecution   = "execution"
	ErrInternal    = "internal"
	ErrTimeout     = "timeout"
	ErrCanceled    = "canceled"
	ErrUnavailable = "unavailable"
	ErrNotFound    = "not_found"
)

// Response is the Prometheus API envelope.
type Response struct {
	Status    string   `json:"status"`
	Data      any      `json:"data,omitempty"`
	ErrorType string   `json:"errorType,omitempty"`
	Error     string   `json:"error,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// Write writes resp with status code. A response that cannot be encoded
// (a value JSON has no form for) is answered 500 instead, so the client
// never reads half an object.
func Write(w http.ResponseWriter, code int, resp Response) {
	b, err := json.Marshal(resp)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(Response{Status: "error", ErrorType: ErrInternal, Error: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// WriteData answers 200 with data and the warnings (none when empty).
func WriteData(w http.ResponseWriter, data any, warnings ...string) {
	Write(w, http.StatusOK, Response{Status: "success", Data: data, Warnings: warnings})
}

// WriteError answers code with the error envelope.
func WriteError(w http.ResponseWriter, code int, typ, msg string) {
	Write(w, code, Response{Status: "error", ErrorType: typ, Error: msg})
}

// WriteErr answers err: an *Error (anywhere in its chain) with its status
// and type, anything else as 500 "internal".
func WriteErr(w http.ResponseWriter, err error) {
	var e *Error
	if errors.As(err, &e) {
		WriteError(w, e.Code, e.Type, err.Error())
		return
	}
	WriteError(w, http.StatusInternalServerError, ErrInternal, err.Error())
}

// Error is an error with the HTTP status and errorType it is answered
// with. Handlers return it from their parsing and evaluation steps and
// write it once, with WriteErr.
type Error struct {
	Code int
	Type string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// BadData is a 400 "bad_data" error: the request was malformed.
func BadData(format string, args ...any) *Error {
	return &Error{Code: http.StatusBadRequest, Type: ErrBadData, Err: fmt.Errorf(format, args...)}
}

// Unprocessable is a 422 "execution" error: the request was well formed
// but the data cannot answer it (no requests in the window). Not a 404,
// which Grafana reads as "not implemented".
func Unprocessable(err error) *Error {
	return &Error{Code: http.StatusUnprocessableEntity, Type: ErrExecution, Err: err}
}

// Number is a float64 that encodes NaN and ±Inf as null: JSON has no such
// numbers, and Grafana shows null as an empty cell.
type Number float64

// MarshalJSON encodes n in the shortest form that reads back exactly.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}
