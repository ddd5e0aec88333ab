package nativehist

import (
	"math"
	"testing"
)

// Bucket i of schema 3 holds (2^((i−1)/8), 2^(i/8)]: worked by hand, 1 is
// the upper bound of bucket 0, 2 of bucket 8, and values just above a bound
// move to the next bucket.
func TestIndexByHand(t *testing.T) {
	sc := MustSchema(3)
	for _, c := range []struct {
		v    float64
		want int32
	}{
		{1, 0},
		{math.Nextafter(1, 2), 1},
		{2, 8},
		{math.Nextafter(2, 3), 9},
		{0.5, -8},
		{math.Exp2(3.0 / 8), 3},
		{math.Nextafter(math.Exp2(3.0/8), 2), 4},
		{1e-3, -79},
	} {
		if got := sc.Index(c.v); got != c.want {
			t.Errorf("Index(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	// Schema 0: powers of two.
	if got := MustSchema(0).Index(4); got != 2 {
		t.Errorf("schema 0 Index(4) = %d, want 2", got)
	}
	// Every value lies in (Upper(i-1), Upper(i)].
	for _, v := range []float64{1e-9, 0.003, 0.7, 1, 1.5, 17, 3e4} {
		i := sc.Index(v)
		if !(v > sc.Upper(i-1)*(1+1e-15) || v > sc.Upper(i-1)) || v > sc.Upper(i)*(1+1e-15) {
			t.Errorf("%v not in bucket %d (%v, %v]", v, i, sc.Upper(i-1), sc.Upper(i))
		}
	}
	if _, err := NewSchema(9); err == nil {
		t.Error("schema 9 accepted")
	}
}
