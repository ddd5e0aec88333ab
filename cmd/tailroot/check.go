package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/builtin"
)

// checkCommand runs `tailroot check rules FILE...`: promtool's check, with
// tailroot's parser, so rule files that use tailroot functions (tail_mean,
// granger, …) are checked too.
func checkCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tailroot check rules FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 2 || fs.Arg(0) != "rules" {
		fs.Usage()
		return errors.New("usage: check rules FILE [FILE ...]")
	}
	reg, err := builtin.Registry(nil)
	if err != nil {
		return err
	}
	engine, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		return err
	}
	defer engine.Close()
	failed := 0
	for _, f := range fs.Args()[1:] {
		groups, errs := rulefmt.ParseFile(f, false, model.UTF8Validation, engine.Parser(), slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			failed++
			fmt.Fprintf(stdout, "Checking %s\n  FAILED:\n", f)
			for _, e := range errs {
				fmt.Fprintf(stdout, "%v\n", e)
			}
			continue
		}
		n := 0
		for _, g := range groups.Groups {
			n += len(g.Rules)
		}
		fmt.Fprintf(stdout, "Checking %s\n  SUCCESS: %d rules found\n", f, n)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d rule files failed", failed, fs.NArg()-1)
	}
	return nil
}
