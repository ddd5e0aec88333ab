// Package inflight bounds what concurrent write requests may hold at once:
// how many are decoded at a time, and how many bytes their bodies take,
// compressed and decompressed, counted before the memory is allocated.
//
// In: the requests of the ingest endpoints, through Limiter.Handler. Out:
// the same requests, each with a Lease in its context that the decoders
// grow before they allocate a decompressed body, and a body that grows the
// lease as it is read. Invariants: the bytes of all leases never exceed
// Options.MaxBytes; a lease is released when its request's handler returns;
// a request is refused, never blocked, when memory is short, so two
// requests each holding half the budget cannot wait on each other.
package inflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/alecthomas/units"
)

// Options are the limits. Zero or negative in a field means that limit is
// off.
type Options struct {
	// MaxConcurrent is how many write requests are decoded and appended at
	// once; the rest wait, up to MaxWait, for a slot.
	MaxConcurrent int
	// MaxWait is how long a request waits for a slot before it is refused
	// with 503 and Retry-After. Zero means it does not wait.
	MaxWait time.Duration
	// MaxBytes is the most body bytes, compressed and decoded, that all
	// write requests in flight may hold together.
	MaxBytes int64
}

// DefaultOptions returns the limits of `tailroot serve`.
func DefaultOptions() Options {
	return Options{MaxConcurrent: 20, MaxWait: 5 * time.Second, MaxBytes: 512 << 20}
}

// Error is a refusal by one of the limits; Status is the HTTP status it is
// answered with: 413 when the request alone is over MaxBytes (it can never
// fit), 503 when it would fit once others finish.
type Error struct {
	// Limit names the limit as its serve flag does.
	Limit string
	// Value is the limit's value, as the flag prints it.
	Value string
	// Status is the HTTP status of the refusal.
	Status int
	// Detail says what was refused.
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: over the limit %s=%s", e.Detail, e.Limit, e.Value)
}

// RetryAfter is the Retry-After header value sent with a 503 refusal.
const RetryAfter = "1"

// Limiter holds the budget shared by all write requests.
type Limiter struct {
	opts  Options
	slots chan struct{}

	mu   sync.Mutex
	used int64
}

// New returns a limiter; a nil *Limiter limits nothing.
func New(opts Options) *Limiter {
	l := &Limiter{opts: opts}
	if opts.MaxConcurrent > 0 {
		l.slots = make(chan struct{}, opts.MaxConcurrent)
	}
	return l
}

// InUse returns the bytes leased now, for tests and metrics.
func (l *Limiter) InUse() int64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used
}

// Lease is one request's share of the byte budget. A nil *Lease allows
// everything, so decoders call Grow whether or not a limiter is in front.
type Lease struct {
	l    *Limiter
	mu   sync.Mutex
	held int64
}

// Grow reserves n more bytes; call it before allocating them. It fails
// with an *Error when the budget does not have them.
func (s *Lease) Grow(n int64) error {
	if s == nil || s.l == nil || s.l.opts.MaxBytes <= 0 || n <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.l
	max := l.opts.MaxBytes
	if s.held+n > max {
		return &Error{
			Limit: "ingest.max-inflight-bytes", Value: units.Base2Bytes(max).String(), Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("request needs more than %d bytes of body buffers", s.held+n),
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used+n > max {
		return &Error{
			Limit: "ingest.max-inflight-bytes", Value: units.Base2Bytes(max).String(), Status: http.StatusServiceUnavailable,
			Detail: fmt.Sprintf("write requests in flight hold %d bytes, %d more do not fit", l.used, n),
		}
	}
	l.used += n
	s.held += n
	return nil
}

// release returns everything the lease holds.
func (s *Lease) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.mu.Lock()
	s.l.used -= s.held
	s.l.mu.Unlock()
	s.held = 0
}

type ctxKey struct{}

// FromContext returns the lease of the request, or nil.
func FromContext(ctx context.Context) *Lease {
	s, _ := ctx.Value(ctxKey{}).(*Lease)
	return s
}

// Handler bounds next: it waits for a slot, leases the body's bytes as they
// are read, and releases both when next returns. Refusals are answered
// with the *Error's status (503 with Retry-After) and its text.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.slots != nil {
			if err := l.acquire(r.Context()); err != nil {
				Refuse(w, err)
				return
			}
			defer func() { <-l.slots }()
		}
		lease := &Lease{l: l}
		defer lease.release()
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, lease))
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &leasedBody{ReadCloser: r.Body, lease: lease}
		}
		next.ServeHTTP(w, r)
	})
}

func (l *Limiter) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	refused := &Error{
		Limit: "ingest.max-concurrent", Value: strconv.Itoa(l.opts.MaxConcurrent), Status: http.StatusServiceUnavailable,
		Detail: fmt.Sprintf("write requests in flight waited %s for a slot", l.opts.MaxWait),
	}
	if l.opts.MaxWait <= 0 {
		return refused
	}
	t := time.NewTimer(l.opts.MaxWait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-t.C:
		return refused
	case <-ctx.Done():
		return fmt.Errorf("wait for a write slot: %w", ctx.Err())
	}
}

// Refuse answers a refusal: the *Error's status and text, with Retry-After
// on 503; any other error is a 503 too (the client left while waiting).
func Refuse(w http.ResponseWriter, err error) {
	status := http.StatusServiceUnavailable
	var e *Error
	if errors.As(err, &e) {
		status = e.Status
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", RetryAfter)
	}
	http.Error(w, err.Error(), status)
}

// leasedBody grows the lease by what is read, before the reader's caller
// can keep it: a caller reads into memory it has, and whatever it keeps it
// has to copy or grow into, so counting reads bounds what a request holds
// to about twice its lease.
type leasedBody struct {
	io.ReadCloser
	lease *Lease
}

func (b *leasedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if gerr := b.lease.Grow(int64(n)); gerr != nil {
			return 0, gerr
		}
	}
	return n, err
}

// StatusOf returns the HTTP status for err when it is a refusal by a
// limit, and ok false otherwise.
func StatusOf(err error) (status int, ok bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Status, true
	}
	return 0, false
}

// ReadAll reads r up to limit+1 bytes, growing the lease by each increase
// of its buffer before allocating it, so a gzip or snappy bomb is refused
// before it takes the memory. The caller compares len(out) with limit.
func ReadAll(r io.Reader, lease *Lease, limit int64) ([]byte, error) {
	const first = 64 << 10
	c := int64(first)
	if limit+1 < c {
		c = limit + 1
	}
	if err := lease.Grow(c); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, c)
	for {
		if int64(len(buf)) > limit {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			next := min(2*int64(cap(buf)), limit+1)
			if err := lease.Grow(next - int64(cap(buf))); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), next)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
