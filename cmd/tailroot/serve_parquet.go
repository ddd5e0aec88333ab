package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
	"github.com/tailroot/tailroot/tsdb/records/history"
)

// parquetConfig holds the --records.parquet.* flags: where sealed record
// segments are also written as Parquet (docs/format/records-parquet.md),
// and from where record queries past local retention are answered.
type parquetConfig struct {
	dir      string
	s3       history.S3Options
	node     string
	interval time.Duration

	exp    atomic.Pointer[history.Exporter] // read by the retention hold
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (p *parquetConfig) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&p.dir, "records.parquet.dir", "", "directory that sealed request-record segments are also written to as Parquet (date=/hour= partitions); record queries past --records.retention are answered from it. Empty, with no --records.parquet.s3.endpoint, disables it")
	fs.StringVar(&p.s3.Endpoint, "records.parquet.s3.endpoint", "", "host[:port] of an S3-compatible service for the Parquet history instead of a directory; credentials come from the environment (AWS_ACCESS_KEY_ID, …)")
	fs.StringVar(&p.s3.Bucket, "records.parquet.s3.bucket", "", "bucket of the Parquet history")
	fs.StringVar(&p.s3.Prefix, "records.parquet.s3.prefix", "", "key prefix of the Parquet history in the bucket")
	fs.StringVar(&p.s3.Region, "records.parquet.s3.region", "", "bucket region; empty lets the client discover it")
	fs.BoolVar(&p.s3.Insecure, "records.parquet.s3.insecure", false, "talk plain HTTP to the S3 endpoint")
	fs.BoolVar(&p.s3.PathStyle, "records.parquet.s3.path-style", false, "path-style bucket addressing (MinIO, Ceph)")
	fs.StringVar(&p.node, "records.parquet.node", "", "name of this server in the history's keys, [A-Za-z0-9._]; empty means the host name. Servers sharing a bucket need distinct names")
	fs.DurationVar(&p.interval, "records.parquet.export-interval", 30*time.Second, "how often newly sealed segments are exported")
}

func (p *parquetConfig) enabled() bool { return p.dir != "" || p.s3.Endpoint != "" }

// holdRetention makes the record store keep partitions until they are
// exported; call it before the store opens. Until the exporter has run
// once every segment is held, so a restart never drops an unexported one.
func (p *parquetConfig) holdRetention(o *records.Options) {
	if !p.enabled() {
		return
	}
	o.RetentionHold = func(ref records.SegmentRef) bool {
		exp := p.exp.Load()
		return exp == nil || exp.Held(ref)
	}
}

// start validates the flags, starts the exporter over store and returns
// the record source for queries: store itself when history is off, or a
// history.Source answering windows past retention from the Parquet files.
// stop ends the exporter.
func (p *parquetConfig) start(store *records.Store, retention time.Duration, reg prometheus.Registerer, logger *slog.Logger) (tailfn.ColumnSource, error) {
	if !p.enabled() {
		return store, nil
	}
	bkt, err := p.bucket()
	if err != nil {
		return nil, err
	}
	if p.node == "" {
		p.node = defaultNode()
	}
	exp, err := history.NewExporter(store, bkt, history.ExportOptions{Node: p.node, Interval: p.interval, Logger: logger, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("--records.parquet: %w", err)
	}
	rd, err := history.NewReader(bkt, p.node)
	if err != nil {
		return nil, fmt.Errorf("--records.parquet: %w", err)
	}
	p.exp.Store(exp)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		exp.Run(ctx)
	}()
	logger.Info("request records are exported as Parquet", "bucket", bkt.String(), "node", p.node)
	return history.NewSource(store, rd, history.SourceOptions{Retention: retention}), nil
}

func (p *parquetConfig) bucket() (history.Bucket, error) {
	switch {
	case p.dir != "" && p.s3.Endpoint != "":
		return nil, errors.New("--records.parquet.dir and --records.parquet.s3.endpoint are exclusive; set one")
	case p.dir != "":
		return history.NewDirBucket(p.dir)
	case p.s3.Bucket == "":
		return nil, errors.New("--records.parquet.s3.endpoint needs --records.parquet.s3.bucket")
	default:
		return history.NewS3Bucket(p.s3)
	}
}

// stop ends the exporter; segments it did not finish are exported after
// the next start.
func (p *parquetConfig) stop() {
	if p.cancel != nil {
		p.cancel()
		p.wg.Wait()
	}
}

// defaultNode is the host name with characters outside [A-Za-z0-9._]
// replaced by '_'.
func defaultNode() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "tailroot"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' {
			return r
		}
		return '_'
	}, h)
}
