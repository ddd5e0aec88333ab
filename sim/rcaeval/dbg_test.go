package rcaeval

import (
	"fmt"
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/sim"
)

func TestDbg(t *testing.T) {
	inc, _ := sim.Scenario{Fault: sim.FaultGPUThrottle, Instance: 1, Seed: 21}.Generate()
	tg := inc.ModelMean("vllm:time_to_first_token_seconds")
	actual := int(inc.Truth.Start.Sub(inc.Truth.WindowStart)/inc.Truth.Step) - 1
	ts := causal.Series{Name: "t", Values: tg.Values}
	for _, m := range rca.ChangeMethods() {
		c, err := rca.Onset(ts, m, 0)
		t.Log(m, c.At, c.Low, c.High, c.Z, err, "actual", actual, len(tg.Values))
	}
	s := ""
	for i := 0; i < len(tg.Values); i += 8 {
		s += fmt.Sprintf("%.3f ", tg.Values[i])
	}
	t.Log(s)
}
