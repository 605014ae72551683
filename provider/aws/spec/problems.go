package spec

import (
	"errors"
	"fmt"
	"strconv"
)

// maxQuoted is the longest user value quoted whole in an error.
const maxQuoted = 80

// problems collects every validation error of one Parse call.
type problems struct {
	errs []error
}

func (p *problems) addf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// err joins the problems into one error wrapping ErrInvalid, nil when none.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(p.errs...))
}

// quote quotes a user value for an error message, cut short when long.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..." + strconv.Itoa(len(s)) + " bytes"
	}
	return strconv.Quote(s)
}

// objectWhere names objects[i] in errors, with its objectName when known.
func objectWhere(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("objects[%d]", i)
	}
	return fmt.Sprintf("objects[%d] (%s)", i, quote(name))
}
