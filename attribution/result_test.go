package attribution

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	seen := map[string]bool{}
	for m := MethodTailMeanRecords; m <= MethodMean; m++ {
		s := m.String()
		if strings.HasPrefix(s, "method(") || seen[s] {
			t.Errorf("method %d named %q", m, s)
		}
		seen[s] = true
	}
	if Method(0).String() != "method(0)" || KindBound.String() != "bound" || Kind(0).String() != "kind(0)" {
		t.Error("zero values must not look valid")
	}
	if b, _ := MethodShapley.MarshalText(); string(b) != "shapley" {
		t.Errorf("marshal %q", b)
	}
}
