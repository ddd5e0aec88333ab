// Command tailroot is the tailroot server and its command-line tools.
//
//	tailroot serve [flags]     run the server
//	tailroot version           print the version
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// Set at link time by the Makefile (-ldflags -X).
var (
	version   = "0.1.0-dev"
	revision  = "unknown"
	branch    = "unknown"
	buildUser = "unknown"
	buildDate = "unknown"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: tailroot <command> [flags]

commands:
  serve      run the server (Prometheus-compatible API, remote write ingest)
  attribute  print the P99 stage breakdown of a window from a running server
  simulate   generate an incident scenario, push or write it, print its ground truth
  check      check rule files (tailroot check rules FILE...), tailroot functions included
  import     load request records (NDJSON, CSV, vLLM benchmark JSON) and OpenMetrics series into a running server
  eval-rca   score root-cause ranking (AC@1, AC@3, Avg@5) against plain BARO on simulated incidents
  version    print the version

Run 'tailroot <command> -h' for the flags of a command.
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "attribute":
		err = attribute(os.Args[2:])
	case "simulate":
		err = simulateCommand(os.Args[2:])
	case "import":
		err = importCommand(os.Args[2:])
	case "eval-rca":
		err = evalRCACommand(os.Args[2:])
	case "check":
		err = checkCommand(os.Args[2:], os.Stdout)
	case "version", "--version", "-version":
		fmt.Printf("tailroot, version %s (revision: %s, branch: %s)\n  build user: %s\n  build date: %s\n", version, revision, branch, buildUser, buildDate)
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "tailroot: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	// -h and --help print the command's flags (the flag package already did)
	// and succeed, as every Prometheus tool does.
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tailroot %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
