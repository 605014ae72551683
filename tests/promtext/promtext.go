// Package promtext reads a Prometheus text exposition (a /metrics page) as
// tests compare it: every series as the page prints it (name{labels}) and
// its value.
package promtext

import (
	"fmt"
	"strconv"
	"strings"
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
