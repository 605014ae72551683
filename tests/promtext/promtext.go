// Package promtext reads metrics as tests compare them: a Prometheus text
// exposition (a /metrics page) as every series it prints (name{labels}) and
// its value, and a registry's metric summed over the series of some labels.
package promtext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Series returns each series of body and its value. Comments and blank
// lines are skipped; a line that is not "series value" is an error naming it.
func Series(body string) (map[string]float64, error) {
	out := map[string]float64{}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("/metrics line %q: not a series and a value", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, nil
}

// Sum gathers g and sums the series of the metric name whose labels include
// labels (every one, with that value): a counter's or gauge's values, a
// histogram's counts.
func Sum(g prometheus.Gatherer, name string, labels map[string]string) (float64, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, nil
}
