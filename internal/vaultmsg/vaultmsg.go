package vaultmsg

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
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

// Refusal is err with a Vault error answer (*vaultapi.ResponseError) in its
// chain said as "Vault answered <status>: <Vault's messages>", without the
// request's URL; the ResponseError stays in the chain. Other errors are
// returned as they are.
func Refusal(err error) error {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		return refusal{re}
	}
	return err
}

type refusal struct{ re *vaultapi.ResponseError }

func (r refusal) Error() string {
	return fmt.Sprintf("Vault answered %d: %s", r.re.StatusCode, Join(r.re.Errors))
}

func (r refusal) Unwrap() error { return r.re }
