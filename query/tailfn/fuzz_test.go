package tailfn

import "testing"

// FuzzParseLevels checks that ParseLevels never panics and that every
// accepted input yields consecutive bands in [0, 1] ending at 1.
func FuzzParseLevels(f *testing.F) {
	for _, s := range []string{"0.5,0.9,0.99", "0.9", "0", "0.5,0.5", "1", "-0.1", "NaN", "0.5, x", "", ",", "0.1,0.2,0.3,0.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		bands, err := ParseLevels(s)
		if err != nil {
			return
		}
		if len(bands) == 0 || bands[len(bands)-1].Hi != 1 {
			t.Fatalf("%q: bands %v do not end at 1", s, bands)
		}
		for i, b := range bands {
			if !(b.Lo >= 0 && b.Lo < b.Hi && b.Hi <= 1) || i > 0 && b.Lo != bands[i-1].Hi {
				t.Fatalf("%q: band %d %v", s, i, b)
			}
		}
	})
}

// FuzzRecordLine checks the script record parser: no panics, and every
// accepted line gives records whose stages sum to their end-to-end time.
func FuzzRecordLine(f *testing.F) {
	for _, s := range []string{
		`t=1m {model_name="m"} queue=1 decode=2`,
		`t=0 {a="}"} prefill=2 e2e=1`,
		`t=1s {a="b"} n=3 ttft=0.1`,
		`{a="b"} queue=1`,
		`t=1m {a="b" queue=1`,
		`t=1m {a="b"} bogus=1`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		recs, err := parseRecordLine(s)
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Sum() != r.E2E && !(r.E2E != r.E2E) {
				t.Fatalf("%q: stages sum %v, e2e %v", s, r.Sum(), r.E2E)
			}
		}
	})
}
