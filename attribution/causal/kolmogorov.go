package causal

import "math"

// This file evaluates the survival function of the two-sided one-sample
// Kolmogorov–Smirnov statistic D_n, P(D_n ≥ x), the way scipy.stats.kstwo.sf
// does (scipy/stats/_ksstats.py, after Simard & L'Ecuyer, "Computing the
// Two-Sided Kolmogorov-Smirnov Distribution", J. Stat. Softw. 39(11), 2011):
// the same choice of method in each region of (n, x), each method written
// out below. ks_2samp(mode='asymp') evaluates it at n = round(n1·n2/(n1+n2)).
//
// Differences from scipy, all at rounding level: scipy carries the Durbin
// matrix in 80-bit long double where Go has float64 (here both the matrix
// and its running power are rescaled by exact powers of two so nothing
// overflows); the one-sided Smirnov probability is always the exact
// Birnbaum–Tingey sum (scipy approximates it above n = 10⁶); n!/nⁿ comes
// from lgamma rather than a Stirling series.

const (
	twoPow128    = 0x1p128
	twoPowNeg128 = 0x1p-128
)

// ksTwoSidedSF returns P(D_n ≥ x) for the two-sided one-sample KS statistic.
func ksTwoSidedSF(n int, x float64) float64 {
	if n <= 0 || math.IsNaN(x) {
		return math.NaN()
	}
	if x >= 1 {
		return 0
	}
	if x <= 0 {
		return 1
	}
	nf := float64(n)
	t := nf * x
	if t <= 1 { // Ruben–Gambino: P(D_n ≤ x) = n!/nⁿ·(2t−1)ⁿ for 1/2n ≤ x ≤ 1/n
		if t <= 0.5 {
			return 1
		}
		var cdf float64
		if n <= 140 {
			cdf = 1
			for i := 1; i <= n; i++ {
				cdf *= float64(i) / nf * (2*t - 1)
			}
		} else {
			lg, _ := math.Lgamma(nf + 1)
			cdf = math.Exp(lg - nf*math.Log(nf) + nf*math.Log(2*t-1))
		}
		return clip01(1 - cdf)
	}
	if t >= nf-1 { // Ruben–Gambino upper tail
		return clip01(2 * math.Pow(1-x, nf))
	}
	if x >= 0.5 { // D_n⁺ ≥ x and D_n⁻ ≥ x cannot both hold: exactly 2·P(D_n⁺ ≥ x)
		return clip01(2 * smirnovSF(n, x))
	}
	nxx := t * x
	if n <= 140 {
		switch {
		case nxx <= 0.754693:
			return clip01(1 - durbinMTWCDF(n, x))
		case nxx <= 4:
			return clip01(1 - pomeranzCDF(n, x))
		default:
			return clip01(2 * smirnovSF(n, x))
		}
	}
	switch {
	case nxx >= 370:
		return 0
	case nxx >= 2.2:
		return clip01(2 * smirnovSF(n, x))
	case n <= 100000 && nf*math.Pow(x, 1.5) <= 1.4:
		return clip01(1 - durbinMTWCDF(n, x))
	default:
		return clip01(1 - pelzGoodCDF(n, x))
	}
}

func clip01(p float64) float64 { return max(0, min(1, p)) }

// smirnovSF is the one-sided P(D_n⁺ ≥ x) by the exact Birnbaum–Tingey sum
//
//	x · Σ_{j=0}^{⌊n(1−x)⌋} C(n,j) (x + j/n)^{j−1} (1 − x − j/n)^{n−j},
//
// whose terms are all positive, so evaluating each in logarithms loses no
// accuracy to cancellation.
func smirnovSF(n int, x float64) float64 {
	if x <= 0 {
		return 1
	}
	if x >= 1 {
		return 0
	}
	nf := float64(n)
	lgn, _ := math.Lgamma(nf + 1)
	jmax := int(math.Floor(nf * (1 - x)))
	sum := 0.0
	for j := 0; j <= jmax && j <= n; j++ {
		jf := float64(j)
		q := 1 - x - jf/nf
		if q <= 0 {
			if j == n {
				// (1−x−j/n)⁰ = 1
				q = 1
			} else {
				continue
			}
		}
		lgj, _ := math.Lgamma(jf + 1)
		lgnj, _ := math.Lgamma(nf - jf + 1)
		l := lgn - lgj - lgnj + (jf-1)*math.Log(x+jf/nf) + (nf-jf)*math.Log(q)
		sum += math.Exp(l)
	}
	return x * sum
}

// durbinMTWCDF is P(D_n ≤ d) by Durbin's matrix formula as evaluated by
// Marsaglia, Tsang & Wang, "Evaluating Kolmogorov's Distribution", J. Stat.
// Softw. 8(18), 2003: with d = (k − h)/n, k a positive integer, 0 ≤ h < 1,
// the answer is n!/nⁿ · (Hⁿ)_{k,k} for an m×m matrix H, m = 2k − 1.
func durbinMTWCDF(n int, d float64) float64 {
	if d >= 1 {
		return 1
	}
	nd := float64(n) * d
	if nd <= 0.5 {
		return 0
	}
	k := int(math.Ceil(nd))
	h := float64(k) - nd
	m := 2*k - 1
	v := make([]float64, m)
	w := make([]float64, m)
	fac := 1.0
	for j := 1; j <= m; j++ {
		w[j-1] = fac
		fac /= float64(j)
		v[j-1] = (1 - math.Pow(h, float64(j))) * fac
	}
	tt := math.Pow(max(2*h-1, 0), float64(m)) - 2*math.Pow(h, float64(m))
	v[m-1] = (1 + tt) * fac
	hm := make([]float64, m*m) // row-major
	for i := 1; i < m; i++ {
		for r := i - 1; r < m; r++ {
			hm[r*m+i] = w[r-i+1]
		}
	}
	for r := range m {
		hm[r*m] = v[r]
	}
	for c := range m {
		hm[(m-1)*m+c] = v[m-1-c]
	}
	pw := make([]float64, m*m)
	for i := range m {
		pw[i*m+i] = 1
	}
	tmp := make([]float64, m*m)
	kk := (k-1)*m + k - 1
	expnt, hexpnt := 0, 0
	for nn := n; nn > 0; nn /= 2 {
		if nn%2 == 1 {
			matMul(tmp, pw, hm, m)
			pw, tmp = tmp, pw
			expnt += hexpnt
			for math.Abs(pw[kk]) > twoPow128 {
				scaleAll(pw, twoPowNeg128)
				expnt += 128
			}
		}
		matMul(tmp, hm, hm, m)
		hm, tmp = tmp, hm
		hexpnt *= 2
		for math.Abs(hm[kk]) > twoPow128 {
			scaleAll(hm, twoPowNeg128)
			hexpnt += 128
		}
	}
	p := pw[kk]
	for i := 1; i <= n; i++ {
		p = float64(i) * p / float64(n)
		if math.Abs(p) < twoPowNeg128 {
			p *= twoPow128
			expnt -= 128
		}
	}
	return math.Ldexp(p, expnt)
}

func matMul(dst, a, b []float64, m int) {
	clear(dst)
	for i := range m {
		for l := range m {
			ail := a[i*m+l]
			if ail == 0 {
				continue
			}
			row, brow := dst[i*m:(i+1)*m], b[l*m:(l+1)*m]
			for j := range m {
				row[j] += ail * brow[j]
			}
		}
	}
}

func scaleAll(v []float64, f float64) {
	for i := range v {
		v[i] *= f
	}
}

// pomeranzCDF is P(D_n ≤ x) by Pomeranz's recursion (Pomeranz, "Exact
// Cumulative Distribution of the Kolmogorov-Smirnov Statistic for Small
// Samples", CACM 17(12), 1974): 2n+1 convolutions of a short row with
// truncated Poisson weights; the answer is n!·V[2n+1][n].
func pomeranzCDF(n int, x float64) float64 {
	nf := float64(n)
	t := nf * x
	ll := int(math.Floor(t))
	f := t - float64(ll)
	g := min(f, 1-f)
	ceilf, roundf := 0, 0
	if f > 0 {
		ceilf = 1
	}
	if f > 0.5 {
		roundf = 1
	}
	np := 2 * (ll + 1)
	gp, twogp, onem2gp := make([]float64, np), make([]float64, np), make([]float64, np)
	gp[0], twogp[0], onem2gp[0] = 1, 1, 1
	for m := 1; m < np; m++ {
		gp[m] = gp[m-1] * (g / nf) / float64(m)
		twogp[m] = twogp[m-1] * (2 * g / nf) / float64(m)
		onem2gp[m] = onem2gp[m-1] * ((1 - 2*g) / nf) / float64(m)
	}
	v0, v1 := make([]float64, np), make([]float64, np)
	v1[0] = 1
	v0s, v1s := 0, 0
	expnt := 0
	j1, _ := pomeranzJ(0, n, ll, ceilf, roundf)
	for i := 1; i < 2*n+2; i++ {
		k1 := j1
		v0, v1 = v1, v0
		v0s, v1s = v1s, v0s
		clear(v1)
		var j2 int
		j1, j2 = pomeranzJ(i, n, ll, ceilf, roundf)
		pw := onem2gp
		switch {
		case i == 1 || i == 2*n+1:
			pw = gp
		case i%2 == 1:
			pw = twogp
		}
		ln2 := j2 - k1 + 1
		if ln2 <= 0 {
			continue
		}
		lo := k1 - v0s
		a := v0[lo:min(lo+ln2, np)]
		b := pw[:min(ln2, np)]
		// Entries start..start+length−1 of the full convolution a∗b are
		// the ones kept; compute only those.
		start, length := j1-k1, j2-j1+1
		for o := range min(length, len(a)+len(b)-1-start) {
			idx := start + o
			acc := 0.0
			for ia := max(0, idx-len(b)+1); ia <= min(idx, len(a)-1); ia++ {
				acc += a[ia] * b[idx-ia]
			}
			v1[o] = acc
		}
		mx := 0.0
		for _, u := range v1 {
			mx = max(mx, u)
		}
		if mx > 0 && mx < twoPowNeg128 {
			scaleAll(v1, twoPow128)
			expnt -= 128
		}
		v1s = v0s + j1 - k1
	}
	ans := v1[n-v1s]
	for m := 1; m <= n; m++ {
		if math.Abs(ans) > twoPow128 {
			ans *= twoPowNeg128
			expnt += 128
		}
		ans *= float64(m)
	}
	return math.Ldexp(ans, expnt)
}

// pomeranzJ returns the range [j1, j2] of row i that can be non-zero.
func pomeranzJ(i, n, ll, ceilf, roundf int) (int, int) {
	var j1, j2 int
	if i == 0 {
		j1, j2 = -ll-ceilf-1, ll+ceilf-1
	} else {
		half, odd := (i+1)/2, (i+1)%2
		if odd == 0 { // i is odd
			if half == n+1 {
				j1, j2 = n-ll-ceilf-1, n+ll+ceilf-1
			} else {
				j1, j2 = half-1-ll-roundf-1, half+ll-1+ceilf-1
			}
		} else {
			j1, j2 = half-1-ll-1, half+ll+roundf-1
		}
	}
	return max(j1+2, 0), min(j2, n)
}

// pelzGoodCDF is the Pelz–Good approximation to P(D_n ≤ x) (Pelz & Good,
// "Approximating the Lower Tail-areas of the Kolmogorov-Smirnov One-sample
// Statistic", JRSS B 38(2), 1976): the Li-Chien/Korolyuk expansion
// K0(z) + K1(z)/√n + K2(z)/n + K3(z)/n^1.5 at z = x√n, each term rewritten
// with Jacobi theta identities to converge for small z.
func pelzGoodCDF(n int, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	const (
		pi2 = math.Pi * math.Pi
		pi4 = pi2 * pi2
		pi6 = pi4 * pi2
	)
	sqrt2pi := math.Sqrt(2 * math.Pi)
	nf := float64(n)
	z := math.Sqrt(nf) * x
	z2, z3, z4, z6 := z*z, z*z*z, z*z*z*z, math.Pow(z, 6)
	qlog := -pi2 / 8 / z2
	if qlog < -708 {
		return 0
	}
	q := math.Exp(qlog)
	k1a, k1b := -z2, pi2/4
	k2a := 6*z6 + 2*z4
	k2b := (2*z4 - 5*z2) * pi2 / 4
	k2c := pi4 * (1 - 2*z2) / 16
	k3d := pi6 * (5 - 30*z2) / 64
	k3c := pi4 * (-60*z2 + 212*z4) / 16
	k3b := pi2 * (135*z4 - 96*z6) / 4
	k3a := -30*z6 - 90*math.Pow(z, 8)
	var kk [4]float64
	maxk := int(math.Ceil(16 * z / math.Pi))
	for k := maxk; k > 0; k-- {
		m := float64(2*k - 1)
		m2, m4, m6 := m*m, m*m*m*m, math.Pow(m, 6)
		qp := math.Pow(q, float64(8*k))
		coeffs := [4]float64{
			1,
			k1a + k1b*m2,
			k2a + k2b*m2 + k2c*m4,
			k3a + k3b*m2 + k3c*m4 + k3d*m6,
		}
		for i := range kk {
			kk[i] = kk[i]*qp + coeffs[i]
		}
	}
	div := [4]float64{z, 6 * z4, 72 * math.Pow(z, 7), 6480 * math.Pow(z, 10)}
	for i := range kk {
		kk[i] *= q * sqrt2pi / div[i]
	}
	q = math.Exp(-pi2 / 2 / z2)
	var k2extra, k3extra float64
	sqrt3z := math.Sqrt(3) * z
	for k := maxk; k > 0; k-- {
		kf := float64(k)
		qk := math.Pow(q, kf*kf)
		k2extra += kf * kf * qk
		kspi := math.Pi * kf
		k3extra += (sqrt3z + kspi) * (sqrt3z - kspi) * kf * kf * qk
	}
	kk[2] += k2extra * pi2 * sqrt2pi / (-36 * z3)
	kk[3] += k3extra * pi2 * sqrt2pi / (216 * z6)
	sum := 0.0
	for i := range kk {
		sum += kk[i] / math.Pow(nf, float64(i)/2)
	}
	return sum
}
