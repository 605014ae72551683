package promtext

import "testing"

func TestSeries(t *testing.T) {
	got, err := Series("# HELP a x\n# TYPE a counter\na{b=\"c d\"} 2\n\nz 1.5e+00\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[`a{b="c d"}`] != 2 || got["z"] != 1.5 {
		t.Fatalf("Series = %v", got)
	}
	for _, bad := range []string{"novalue\n", "a x\n"} {
		if _, err := Series(bad); err == nil {
			t.Errorf("Series(%q): no error", bad)
		}
	}
}
