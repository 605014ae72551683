package vaultmsg

import (
	"regexp"
	"strings"
)

// folded is the head of a message in go-multierror's list format.
var folded = regexp.MustCompile(`^\d+ errors? occurred:\n`)

// Join is Vault's messages (vaultapi.ResponseError.Errors) on one line,
// separated by "; ", each folded list unfolded into its items.
func Join(messages []string) string {
	var out []string
	for _, m := range messages {
		out = append(out, unfold(m)...)
	}
	return strings.Join(out, "; ")
}

// unfold is the items of a folded message, or the message itself.
func unfold(m string) []string {
	head := folded.FindStringIndex(m)
	if head == nil {
		return nonEmpty([]string{strings.TrimSpace(m)})
	}
	body := strings.TrimPrefix(m[head[1]:], "\t* ")
	items := strings.Split(body, "\n\t* ")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return nonEmpty(items)
}

func nonEmpty(items []string) []string {
	out := items[:0]
	for _, it := range items {
		if it != "" {
			out = append(out, it)
		}
	}
	return out
}
