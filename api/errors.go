package api

import "errors"

// errNoScrape is returned for scrape-pool questions: tailroot receives
// pushes and has no scrape pools.
var errNoScrape = errors.New("tailroot has no scrape pools: it receives remote write and OTLP pushes")
