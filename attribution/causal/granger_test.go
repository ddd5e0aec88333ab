package causal

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// naiveGranger builds the lagged designs row by row (as statsmodels'
// lagmat2ds with trim='both' does) and fits them by the normal equations.
func naiveGranger(t *testing.T, y, x []float64, z [][]float64, p, start int) (rssR, rssU float64, n, ku int) {
	t.Helper()
	rows := len(y) - start
	build := func(withX bool) [][]float64 {
		cols := [][]float64{}
		add := func(s []float64) {
			for j := 1; j <= p; j++ {
				c := make([]float64, rows)
				for r := range rows {
					c[r] = s[start+r-j]
				}
				cols = append(cols, c)
			}
		}
		add(y)
		for _, zz := range z {
			add(zz)
		}
		if withX {
			add(x)
		}
		return append(cols, ones(rows)) // constant last, statsmodels' prepend=False
	}
	yt := y[start:]
	ssr := func(cols [][]float64) float64 {
		_, e, _ := naiveOLS(t, yt, cols)
		s := 0.0
		for _, v := range e {
			s += v * v
		}
		return s
	}
	u := build(true)
	return ssr(build(false)), ssr(u), rows, len(u)
}

func grangerData(n int, seed uint64, lag int, b float64) (y, x []float64) {
	r := rng(seed)
	x = ar1(r, n, 0.5)
	y = make([]float64, n)
	for t := range y {
		y[t] = r.NormFloat64()
		if t > 0 {
			y[t] += 0.3 * y[t-1]
		}
		if t >= lag {
			y[t] += b * x[t-lag]
		}
	}
	return y, x
}

func TestGrangerAgainstNaive(t *testing.T) {
	y, x := grangerData(150, 2, 2, 0.4)
	const maxLag = 4
	res, err := Granger(ser("y", y...), ser("x", x...), nil, maxLag)
	if err != nil {
		t.Fatal(err)
	}
	for p := 1; p <= maxLag; p++ {
		g := res.Tests[p-1]
		rr, ru, n, ku := naiveGranger(t, y, x, nil, p, p)
		if g.Lag != p || g.N != n || g.DF1 != p || g.DF2 != n-2*p-1 || ku != 2*p+1 {
			t.Errorf("lag %d: got lag %d n %d df (%d,%d), want n %d df (%d,%d)", p, g.Lag, g.N, g.DF1, g.DF2, n, p, n-2*p-1)
		}
		checkNear(t, "RSS restricted", g.RSSRestricted, rr, 1e-9)
		checkNear(t, "RSS unrestricted", g.RSSUnrestricted, ru, 1e-9)
		f := (rr - ru) / float64(p) / (ru / float64(n-ku))
		checkNear(t, "F", g.F, f, 1e-9)

		// AIC/BIC on the common sample t = maxLag..n−1, from the naive fit.
		_, ruc, nc, kuc := naiveGranger(t, y, x, nil, p, maxLag)
		llf := -float64(nc) / 2 * (math.Log(2*math.Pi) + math.Log(ruc/float64(nc)) + 1)
		checkNear(t, "AIC", res.AIC[p-1], -2*llf+2*float64(kuc), 1e-9)
		checkNear(t, "BIC", res.BIC[p-1], -2*llf+math.Log(float64(nc))*float64(kuc), 1e-9)
	}
	// For DF1 = 2 the F survival function has a closed form,
	// P(F(2, d) > f) = (1 + 2f/d)^(−d/2), independent of gonum.
	g := res.Tests[1]
	want := math.Pow(1+2*g.F/float64(g.DF2), -float64(g.DF2)/2)
	checkNear(t, "p-value lag 2", g.PValue, want, 1e-10)
	if g.PValue > 1e-6 {
		t.Errorf("x drives y at lag 2 with b = 0.4, but p = %g", g.PValue)
	}
}

func TestGrangerLagSelection(t *testing.T) {
	// y depends on x three steps back only: lags 1 and 2 miss it, lag 3
	// captures it, more lags only add parameters.
	y, x := grangerData(400, 3, 3, 0.8)
	res, err := Granger(ser("y", y...), ser("x", x...), nil, 6)
	if err != nil {
		t.Fatal(err)
	}
	if res.BestBIC != 3 {
		t.Errorf("BestBIC = %d, want 3 (BIC %v)", res.BestBIC, res.BIC)
	}
	if res.BestAIC < 3 {
		t.Errorf("BestAIC = %d, want ≥ 3 (AIC %v)", res.BestAIC, res.AIC)
	}
	// Reversed direction: y does not drive x.
	rev, err := Granger(ser("x", x...), ser("y", y...), nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p := rev.Tests[2].PValue; p < 0.01 {
		t.Errorf("y → x p-value %g, want not significant", p)
	}
}

func TestGrangerConditioning(t *testing.T) {
	// z drives both x (lag 1) and y (lag 2), x has no own effect on y: the
	// unconditional test finds x "causing" y, conditioning on z removes it.
	r := rng(4)
	n := 400
	z := ar1(r, n, 0.3)
	x := make([]float64, n)
	y := make([]float64, n)
	for t := 2; t < n; t++ {
		x[t] = 0.9*z[t-1] + 0.3*r.NormFloat64()
		y[t] = 0.9*z[t-2] + 0.3*r.NormFloat64()
	}
	plain, err := Granger(ser("y", y...), ser("x", x...), nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	cond, err := Granger(ser("y", y...), ser("x", x...), []Series{ser("z", z...)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Tests[1].PValue > 1e-6 {
		t.Errorf("unconditional p = %g, want tiny", plain.Tests[1].PValue)
	}
	if cond.Tests[1].PValue < 0.01 {
		t.Errorf("conditional p = %g, want not significant", cond.Tests[1].PValue)
	}
	rr, ru, nn, ku := naiveGranger(t, y, x, [][]float64{z}, 2, 2)
	g := cond.Tests[1]
	if g.DF2 != nn-ku || ku != 1+2*3 {
		t.Errorf("df2 = %d, want %d", g.DF2, nn-ku)
	}
	checkNear(t, "conditional F", g.F, (rr-ru)/2/(ru/float64(nn-ku)), 1e-9)
}

func TestGrangerErrors(t *testing.T) {
	y, x := grangerData(30, 5, 1, 0.5)
	constant := make([]float64, 30)
	for i := range constant {
		constant[i] = 7
	}
	cases := []struct {
		name   string
		y, x   Series
		maxLag int
		want   error
		msg    string
	}{
		{"too short", ser("y", y[:6]...), ser("x", x[:6]...), 2, ErrTooShort, "usable observations"},
		{"constant x", ser("y", y...), ser("gpu_util", constant...), 2, ErrSingular, `"gpu_util lag 1"`},
		{"constant y", ser("p99", constant...), ser("x", x...), 1, ErrSingular, `"p99 lag 1"`},
		{"length", ser("y", y...), ser("x", x[:29]...), 2, ErrLength, "30 points"},
		{"nan", ser("y", y...), ser("x", append(append([]float64{}, x[:10]...), append([]float64{math.NaN()}, x[11:]...)...)...), 2, ErrNaN, "index 10"},
		{"lag", ser("y", y...), ser("x", x...), 0, ErrArgument, "max lag 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Granger(c.y, c.x, nil, c.maxLag)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err %q does not mention %q", err, c.msg)
			}
		})
	}
}
