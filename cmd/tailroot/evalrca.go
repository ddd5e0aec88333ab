package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tailroot/tailroot/sim"
	"github.com/tailroot/tailroot/sim/rcaeval"
)

// evalRCACommand runs `tailroot eval-rca`: it generates incidents with known
// root causes in process, ranks each with tailroot's ranking and with plain
// BARO on the same change point, and prints AC@1, AC@3 and Avg@5 per fault
// and overall (RCAEval's definitions).
func evalRCACommand(args []string) error {
	fs := flag.NewFlagSet("eval-rca", flag.ContinueOnError)
	cases := fs.Int("cases", 20, "incidents per fault type")
	seed := fs.Uint64("seed", 1, "selects the incidents; the same seed gives the same table")
	faults := fs.String("faults", "", "comma-separated fault types (default: all; see tailroot simulate --list)")
	parallel := fs.Int("parallel", 0, "incidents generated and ranked at once (0: one per CPU)")
	misses := fs.Bool("misses", false, "also list the cases where tailroot's first candidate is not the root cause")
	asJSON := fs.Bool("json", false, "print every case as JSON instead of the table")
	suite := fs.String("suite", rcaeval.SuiteServing, "incident suite: serving (the simulator's serving graph) or fleet (sim/fleet: exporters' own names, decoys, mild faults, fault-free windows; --cases seeds per class from --seed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if *cases < 1 {
		return fmt.Errorf("--cases %d: want at least 1", *cases)
	}
	switch *suite {
	case rcaeval.SuiteServing:
	case rcaeval.SuiteFleet:
		return evalFleet(*cases, *seed, *misses, *asJSON)
	default:
		return fmt.Errorf("--suite %q: want %s or %s", *suite, rcaeval.SuiteServing, rcaeval.SuiteFleet)
	}
	o := rcaeval.Options{Cases: *cases, Seed: *seed, Parallel: *parallel}
	if *faults != "" {
		for _, f := range strings.Split(*faults, ",") {
			k := sim.FaultKind(strings.TrimSpace(f))
			if _, ok := sim.Info(k); !ok {
				return fmt.Errorf("--faults: unknown fault %q (see tailroot simulate --list)", f)
			}
			o.Faults = append(o.Faults, k)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := rcaeval.Run(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, c := range rep.Cases {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Printf("%d incidents per fault, seed %d: two-hour windows at 15 s, 52 candidate series each\n\n", *cases, *seed)
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	if *misses {
		fmt.Println()
		for _, c := range rep.Cases {
			if c.TailrootRank != 1 {
				fmt.Printf("%s seed %d: root cause %s at rank %d (BARO %d); first: %s; change point %d, fault at %d\n",
					c.Fault, c.Seed, c.Truth.RootCause.Signal, c.TailrootRank, c.BARORank, c.TailrootTop, c.Detected, c.Actual)
			}
		}
	}
	return nil
}

// evalFleet runs the fleet suite with seeds first..first+seeds−1 per class.
func evalFleet(seeds int, first uint64, misses, asJSON bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := rcaeval.RunFleet(ctx, rcaeval.FleetOptions{Seeds: seeds, FirstSeed: first})
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, c := range rep.Cases {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Printf("fleet suite, seeds %d..%d per class: two hosts, vLLM + dcgm-exporter + node-exporter, two hours at 15 s\n\n", first, first+uint64(seeds)-1)
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	if misses {
		fmt.Println()
		for _, c := range rep.Cases {
			if c.Truth.Fault && c.TailrootRank != 1 {
				fmt.Printf("%s seed %d: verdict %q, cause at rank %d (BARO %d); first: %s\n  why: %s\n", c.Class, c.Seed, c.Verdict, c.TailrootRank, c.BARORank, c.TailrootTop, c.VerdictReason)
			} else if !c.Truth.Fault && c.Verdict != "no incident" {
				fmt.Printf("%s seed %d: verdict %q; first: %s\n  why: %s\n", c.Class, c.Seed, c.Verdict, c.TailrootTop, c.VerdictReason)
			}
		}
	}
	return nil
}
