// Package httpapi is the one place tailroot's HTTP endpoints (api/ and
// ingest/) write the Prometheus API envelope, carry an HTTP status with an
// error, parse times and durations and encode numbers JSON cannot hold.
//
// In: an http.ResponseWriter and the data or error to answer with; form
// values for times and durations. Out: the envelope
// {"status":"success","data":…,"warnings":[…]} or
// {"status":"error","errorType":…,"error":…} as Prometheus' web/api/v1
// writes it, with Content-Type application/json.
//
// What holds:
//   - A time is Unix seconds (fractional, millisecond precision) or RFC 3339,
//     as Prometheus reads it, and lies within [MinTime, MaxTime] (the bounds
//     of web/api/v1): 1e300 or NaN is refused with a bad_data error instead
//     of overflowing into some other time.
//   - A duration is seconds or a Prometheus duration (5m, 1h30m), and fits
//     in a time.Duration.
//   - An *Error names the HTTP status and errorType it is answered with;
//     WriteErr answers any other error as 500 "internal".
//   - Number encodes NaN and ±Inf as null, so a JSON answer never fails on
//     them.
package httpapi
