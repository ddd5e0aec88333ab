package thanos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bucket is a Thanos FILESYSTEM object store in a directory: no server, and
// the blocks can be inspected on disk.
type Bucket struct {
	Dir string
	// Config is the path of the objstore configuration file.
	Config string
}

// NewBucket creates an empty filesystem bucket under t.TempDir().
func NewBucket(t testing.TB) *Bucket {
	t.Helper()
	base := t.TempDir()
	b := &Bucket{Dir: filepath.Join(base, "bucket"), Config: filepath.Join(base, "bucket.yml")}
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("type: FILESYSTEM\nconfig:\n  directory: %q\n", b.Dir)
	if err := os.WriteFile(b.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// Meta is the part of a block's meta.json the tests look at.
type Meta struct {
	ULID       string `json:"ulid"`
	MinTime    int64  `json:"minTime"`
	MaxTime    int64  `json:"maxTime"`
	Compaction struct {
		Level int `json:"level"`
	} `json:"compaction"`
	Stats struct {
		NumSamples uint64 `json:"numSamples"`
		NumSeries  uint64 `json:"numSeries"`
	} `json:"stats"`
	Thanos struct {
		Labels     map[string]string `json:"labels"`
		Downsample struct {
			Resolution int64 `json:"resolution"`
		} `json:"downsample"`
		Source string `json:"source"`
	} `json:"thanos"`
}

// Span is the block's time range.
func (m Meta) Span() time.Duration { return time.Duration(m.MaxTime-m.MinTime) * time.Millisecond }

// Blocks reads the meta.json of every block in a directory laid out as a
// TSDB data dir or a bucket is (one ULID-named folder per block), skipping
// blocks marked for deletion.
func Blocks(t testing.TB, dir string) []Meta {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read blocks of %s: %v", dir, err)
	}
	var out []Meta
	for _, e := range entries {
		if !isULID(e.Name()) || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "deletion-mark.json")); err == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			// A block still being uploaded has no meta.json yet: Thanos
			// writes it last.
			continue
		}
		var m Meta
		if err := json.Unmarshal(b, &m); err != nil {
			// The filesystem bucket writes files in place: a meta.json
			// being written reads truncated. The block is not there yet.
			continue
		}
		out = append(out, m)
	}
	return out
}

// Blocks lists the bucket's blocks.
func (b *Bucket) Blocks(t testing.TB) []Meta { t.Helper(); return Blocks(t, b.Dir) }

// WaitBlocks waits until the bucket holds every block of want (by ULID).
func (b *Bucket) WaitBlocks(t testing.TB, want []Meta, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		have := map[string]bool{}
		for _, m := range b.Blocks(t) {
			have[m.ULID] = true
		}
		missing := 0
		for _, m := range want {
			if !have[m.ULID] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket %s: %d of %d blocks not uploaded after %v", b.Dir, missing, len(want), timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Sidecar starts `thanos sidecar` next to a Prometheus-compatible server
// (promURL) whose data directory is tsdbDir, uploading to bucket (nil: no
// uploads). It waits until the sidecar is ready, which it is only once it
// has read the server's flags, version and external labels.
func Sidecar(t testing.TB, promURL, tsdbDir string, bucket *Bucket, extra ...string) *Process {
	t.Helper()
	p := &Process{HTTP: FreeAddr(t), GRPC: FreeAddr(t)}
	args := []string{
		"sidecar",
		"--prometheus.url=" + promURL, "--tsdb.path=" + tsdbDir,
		"--http-address=" + p.HTTP, "--grpc-address=" + p.GRPC,
		"--prometheus.get_config_interval=1s", "--log.level=debug",
	}
	if bucket != nil {
		args = append(args, "--objstore.config-file="+bucket.Config)
	}
	return launch(t, p, "sidecar of "+promURL, append(args, extra...))
}

// Store starts `thanos store` on bucket, syncing its block list every
// second so that freshly uploaded blocks are served at once.
func Store(t testing.TB, bucket *Bucket, extra ...string) *Process {
	t.Helper()
	p := &Process{HTTP: FreeAddr(t), GRPC: FreeAddr(t)}
	args := []string{
		"store",
		"--objstore.config-file=" + bucket.Config, "--data-dir=" + t.TempDir(),
		"--http-address=" + p.HTTP, "--grpc-address=" + p.GRPC,
		"--sync-block-duration=1s", "--consistency-delay=0s", "--ignore-deletion-marks-delay=0s",
	}
	return launch(t, p, "store", append(args, extra...))
}

// Query starts `thanos query` over the StoreAPI endpoints (host:port).
func Query(t testing.TB, endpoints []string, extra ...string) *Process {
	t.Helper()
	p := &Process{HTTP: FreeAddr(t), GRPC: FreeAddr(t)}
	args := []string{
		"query",
		"--http-address=" + p.HTTP, "--grpc-address=" + p.GRPC,
		"--endpoint.info-timeout=2s", "--query.timeout=2m",
	}
	for _, e := range endpoints {
		args = append(args, "--endpoint="+e)
	}
	return launch(t, p, "query", append(args, extra...))
}

// Compact runs `thanos compact` once over bucket (compaction, then both
// downsampling passes) and waits for it to finish. Blocks of any age are
// taken (--consistency-delay=0s): backfilled blocks are new files holding
// old samples.
func Compact(t testing.TB, bucket *Bucket, timeout time.Duration, extra ...string) *Process {
	t.Helper()
	p := &Process{HTTP: FreeAddr(t)}
	args := []string{
		"compact",
		"--objstore.config-file=" + bucket.Config, "--data-dir=" + t.TempDir(),
		"--http-address=" + p.HTTP, "--consistency-delay=0s", "--delete-delay=0s",
	}
	p.Name, p.args = "compact", append(args, extra...)
	start(t, p).Wait(t, timeout)
	return p
}

// launch starts a long-running component and waits until it is ready.
//
// A component that exits before it is ready is started again, twice at
// most, on fresh addresses: the addresses FreeAddr picked were free when
// it looked, but the packages' tests run in parallel and another process
// can take one before the component binds it.
func launch(t testing.TB, p *Process, name string, args []string) *Process {
	t.Helper()
	p.Name, p.args = name, args
	start(t, p)
	for attempt := 1; ; attempt++ {
		err := p.waitReady(90 * time.Second)
		if err == nil {
			return p
		}
		if attempt == 3 || p.cmd != nil {
			t.Fatal(err)
		}
		t.Logf("%v\nstarting it again on fresh addresses (attempt %d of 3)", err, attempt+1)
		p.freshAddrs(t)
		p.run(t, Binary(t))
	}
}

// freshAddrs moves the process to new HTTP and gRPC addresses, in its
// flags too.
func (p *Process) freshAddrs(t testing.TB) {
	t.Helper()
	old := []string{p.HTTP, p.GRPC}
	p.HTTP = FreeAddr(t)
	if p.GRPC != "" {
		p.GRPC = FreeAddr(t)
	}
	repl := []string{p.HTTP, p.GRPC}
	for i, a := range p.args {
		for k, o := range old {
			// Flags of the form --x-address=host:port name them.
			if o != "" && strings.HasSuffix(a, "="+o) {
				a = strings.TrimSuffix(a, o) + repl[k]
			}
		}
		p.args[i] = a
	}
}

// Restart starts a stopped process again with the same flags and waits
// until it is ready.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.Kill()
	p.run(t, Binary(t))
	p.WaitReady(t, 90*time.Second)
}

// WaitStores waits until a Thanos Query lists n healthy StoreAPI endpoints
// at /api/v1/stores.
func (p *Process) WaitStores(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + p.HTTP + "/api/v1/stores")
		if err == nil {
			var r struct {
				Data map[string][]struct {
					Name      string  `json:"name"`
					LastError *string `json:"lastError"`
				} `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&r)
			_ = resp.Body.Close()
			healthy := 0
			for _, group := range r.Data {
				for _, s := range group {
					if s.LastError == nil {
						healthy++
					}
				}
			}
			if err == nil && healthy >= n {
				return
			}
			last = fmt.Sprintf("%d healthy: %+v", healthy, r.Data)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: fewer than %d healthy stores after %v (%s)", p.Name, n, timeout, last)
}

// isULID reports whether name looks like a block directory: 26 characters
// of Crockford base32, as Prometheus and Thanos name blocks.
func isULID(name string) bool {
	if len(name) != 26 {
		return false
	}
	for _, c := range name {
		if !strings.ContainsRune("0123456789ABCDEFGHJKMNPQRSTVWXYZ", c) {
			return false
		}
	}
	return true
}

// CopyBlocks makes a new bucket holding only the blocks of b for which keep
// returns true (copied on disk), so that a Thanos Store on it can serve,
// for example, nothing but 1h-downsampled blocks.
func (b *Bucket) CopyBlocks(t testing.TB, keep func(Meta) bool) *Bucket {
	t.Helper()
	out := NewBucket(t)
	n := 0
	for _, m := range b.Blocks(t) {
		if !keep(m) {
			continue
		}
		if err := os.CopyFS(filepath.Join(out.Dir, m.ULID), os.DirFS(filepath.Join(b.Dir, m.ULID))); err != nil {
			t.Fatalf("copy block %s: %v", m.ULID, err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("bucket %s: no block to copy", b.Dir)
	}
	return out
}
