package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/util/logging"

	"github.com/tailroot/tailroot/query"
)

// applyStartupConfig takes the parts of --config.file that configure
// storage and ingest when the server starts (storage.tsdb, storage.exemplars,
// otlp, runtime.gogc), as Prometheus takes them. A flag given on the
// command line wins over the file; a later reload does not change them.
func applyStartupConfig(c *serveConfig, fs *flag.FlagSet, cfg *config.Config) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if t := cfg.StorageConfig.TSDBConfig; t != nil {
		if t.OutOfOrderTimeWindow > 0 && !set["storage.tsdb.out-of-order-time-window"] {
			c.db.OutOfOrderWindow = time.Duration(t.OutOfOrderTimeWindow) * time.Millisecond
		}
		if r := t.Retention; r != nil {
			if r.Time > 0 && !set["storage.tsdb.retention.time"] {
				c.db.Retention = time.Duration(r.Time)
			}
			if r.Size > 0 && !set["storage.tsdb.retention.size"] {
				c.db.RetentionSize = int64(r.Size)
			}
		}
	}
	if e := cfg.StorageConfig.ExemplarsConfig; e != nil && !set["storage.exemplars.max"] {
		c.db.MaxExemplars = e.MaxExemplars
	}
	o := cfg.OTLPConfig
	if len(o.PromoteResourceAttributes) > 0 && !set["otlp.promote-resource-attributes"] {
		c.otlp.PromoteResourceAttributes = o.PromoteResourceAttributes
	}
	c.otlp.PromoteAllResourceAttributes = c.otlp.PromoteAllResourceAttributes || o.PromoteAllResourceAttributes
	c.otlp.KeepIdentifyingResourceAttributes = c.otlp.KeepIdentifyingResourceAttributes || o.KeepIdentifyingResourceAttributes
	c.otlp.ConvertHistogramsToNHCB = c.otlp.ConvertHistogramsToNHCB || o.ConvertHistogramsToNHCB
	if o.TranslationStrategy != "" {
		c.otlp.TranslationStrategy = o.TranslationStrategy
	}
	// Prometheus runs with GOGC=75 unless told otherwise; the environment
	// variable wins, as there.
	if os.Getenv("GOGC") == "" && cfg.Runtime.GoGC > 0 {
		debug.SetGCPercent(cfg.Runtime.GoGC)
	}
}

// unsupportedConfig names the keys of cfg that tailroot cannot honour, so
// that a Prometheus configuration never starts with a setting silently
// ignored.
func unsupportedConfig(cfg *config.Config) error {
	var keys []string
	if cfg.TracingConfig.Endpoint != "" {
		keys = append(keys, "tracing")
	}
	if t := cfg.StorageConfig.TSDBConfig; t != nil {
		if t.StaleSeriesCompactionThreshold != 0 {
			keys = append(keys, "storage.tsdb.stale_series_compaction_threshold")
		}
		if t.ChunkEncoding != (config.ChunkEncodingConfig{}) {
			keys = append(keys, "storage.tsdb.chunk_encoding")
		}
		if t.Retention != nil && t.Retention.Percentage != 0 {
			keys = append(keys, "storage.tsdb.retention.percentage")
		}
	}
	if len(cfg.OTLPConfig.IgnoreResourceAttributes) > 0 {
		keys = append(keys, "otlp.ignore_resource_attributes")
	}
	if cfg.OTLPConfig.PromoteScopeMetadata {
		keys = append(keys, "otlp.promote_scope_metadata")
	}
	if len(keys) > 0 {
		return fmt.Errorf("tailroot cannot honour these configuration keys: %s", strings.Join(keys, ", "))
	}
	return nil
}

// queryLog applies global.query_log_file, as Prometheus does on every
// (re)load.
func queryLog(engine *query.Engine) func(*config.Config) error {
	return func(cfg *config.Config) error {
		if cfg.GlobalConfig.QueryLogFile == "" {
			engine.Upstream().SetQueryLogger(nil)
			return nil
		}
		l, err := logging.NewJSONFileLogger(cfg.GlobalConfig.QueryLogFile)
		if err != nil {
			return fmt.Errorf("query_log_file: %w", err)
		}
		engine.Upstream().SetQueryLogger(l)
		return nil
	}
}
