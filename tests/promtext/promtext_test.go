package promtext

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

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

func TestSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c"}, []string{"a", "b"})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h"}, []string{"a"})
	reg.MustRegister(c, h)
	c.WithLabelValues("x", "1").Add(2)
	c.WithLabelValues("x", "2").Add(3)
	c.WithLabelValues("y", "1").Add(5)
	h.WithLabelValues("x").Observe(1)
	h.WithLabelValues("x").Observe(2)
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"c", nil, 10},
		{"c", map[string]string{"a": "x"}, 5},
		{"c", map[string]string{"a": "x", "b": "2"}, 3},
		{"c", map[string]string{"missing": "v"}, 0},
		{"h", map[string]string{"a": "x"}, 2},
		{"nope", nil, 0},
	} {
		got, err := Sum(reg, tt.name, tt.labels)
		if err != nil || got != tt.want {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v", tt.name, tt.labels, got, err, tt.want)
		}
	}
}
