package causal

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestOLSErrors(t *testing.T) {
	y := ser("p99", 1, 3, 2, 5, 4)
	cases := []struct {
		name string
		x    []Series
		y    Series
		want error
		msg  []string
	}{
		{
			"too short",
			[]Series{ser("a", 1, 2, 3, 4, 6), ser("b", 2, 1, 4, 3, 5), ser("c", 0, 1, 0, 1, 1), ser("d", 5, 3, 2, 2, 1)},
			y,
			ErrTooShort,
			[]string{"5 observations for 5 coefficients"},
		},
		{
			"constant regressor",
			[]Series{ser("gpu_clock", 7, 7, 7, 7, 7)},
			y,
			ErrSingular,
			[]string{`"gpu_clock"`},
		},
		{
			"zero regressor",
			[]Series{ser("zeros", 0, 0, 0, 0, 0)},
			y,
			ErrSingular,
			[]string{`"zeros"`},
		},
		{
			"collinear",
			[]Series{ser("a", 1, 2, 3, 4, 5), ser("twice_a", 2, 4, 6, 8, 10)},
			y,
			ErrSingular,
			[]string{`"twice_a"`},
		},
		{
			"nan",
			[]Series{ser("a", 1, 2, math.NaN(), 4, 5)},
			y,
			ErrNaN,
			[]string{`"a"`, "index 2"},
		},
		{
			"nan in y",
			[]Series{ser("a", 1, 2, 3, 4, 5)},
			ser("p99", 1, 2, 3, 4, math.NaN()),
			ErrNaN,
			[]string{`"p99"`, "index 4"},
		},
		{
			"length",
			[]Series{ser("a", 1, 2, 3, 4)},
			y,
			ErrLength,
			[]string{`"p99" has 5 points`, `"a" has 4`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OLS(c.y, c.x, true)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("err %q does not contain %q", err, m)
				}
			}
		})
	}
	fit, err := OLS(y, []Series{ser("a", 1, 2, 3, 4, 6)}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fit.HAC(5, false); !errors.Is(err, ErrArgument) {
		t.Errorf("lag ≥ n: %v", err)
	}
	if _, err := OLS(y, nil, false); !errors.Is(err, ErrArgument) {
		t.Errorf("no regressors: %v", err)
	}
	// A constant outcome is fine (RSS 0) but R² is undefined.
	flat, err := OLS(ser("flat", 2, 2, 2, 2, 2), []Series{ser("a", 1, 2, 3, 4, 6)}, true)
	if err != nil || !math.IsNaN(flat.R2) {
		t.Errorf("constant y: err %v, R2 %g", err, flat.R2)
	}
}
