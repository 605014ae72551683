package datafrom

import (
	"errors"
	"fmt"
	"regexp"
)

// Conversion strategies of keys (ESO's conversionStrategy).
const (
	// ConvertDefault keeps an extracted key as it is; a found name has
	// every character a Secret key cannot hold replaced by "_".
	ConvertDefault = "Default"
	// ConvertUnicode replaces every character a Secret key cannot hold by
	// _U<four hex digits>_, its code point.
	ConvertUnicode = "Unicode"
)

// Decoding strategies of values (ESO's decodingStrategy).
const (
	DecodeNone      = "None"
	DecodeBase64    = "Base64"
	DecodeBase64URL = "Base64URL"
	// DecodeAuto decodes standard base64, else URL base64, else keeps the
	// value as it is.
	DecodeAuto = "Auto"
)

// Rewrite is one rewrite of keys, as ESO writes it: `regexp: {source,
// target}`. ESO's `transform` (a Go template per key) is refused with a
// pointer to regexp.
type Rewrite struct {
	Regexp    *RegexpRewrite    `json:"regexp,omitempty"`
	Transform *TransformRewrite `json:"transform,omitempty"`
}

// TransformRewrite is ESO's template rewrite, read only to be refused.
type TransformRewrite struct {
	Template string `json:"template"`
}

// RegexpRewrite replaces every match of Source in a key by Target, which may
// name Source's groups ($1, ${name}).
type RegexpRewrite struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// Options are how keys and values are made, as written in a class.
type Options struct {
	ConversionStrategy string    `json:"conversionStrategy,omitempty"`
	DecodingStrategy   string    `json:"decodingStrategy,omitempty"`
	Rewrite            []Rewrite `json:"rewrite,omitempty"`
}

// Compiled are checked Options, ready to use.
type Compiled struct {
	conversion, decoding string
	rewrites             []rewrite
}

type rewrite struct {
	re     *regexp.Regexp
	target string
}

// Compile checks o. Each error names its field under at (the option's path
// in the class) and the fix; all are joined.
func (o Options) Compile(at string) (*Compiled, error) {
	var errs []error
	c := &Compiled{conversion: ConvertDefault, decoding: DecodeNone}
	switch o.ConversionStrategy {
	case "", ConvertDefault:
	case ConvertUnicode:
		c.conversion = ConvertUnicode
	default:
		errs = append(errs, fmt.Errorf("%s.conversionStrategy: %q is not %s or %s", at, o.ConversionStrategy, ConvertDefault, ConvertUnicode))
	}
	switch o.DecodingStrategy {
	case "", DecodeNone:
	case DecodeBase64, DecodeBase64URL, DecodeAuto:
		c.decoding = o.DecodingStrategy
	default:
		errs = append(errs, fmt.Errorf("%s.decodingStrategy: %q is not %s, %s, %s or %s", at, o.DecodingStrategy, DecodeNone, DecodeBase64, DecodeBase64URL, DecodeAuto))
	}
	for i, r := range o.Rewrite {
		where := fmt.Sprintf("%s.rewrite[%d]", at, i)
		switch {
		case r.Transform != nil:
			errs = append(errs, fmt.Errorf("%s.transform: keymount rewrites keys by regular expression only; write the rewrite as regexp: {source, target}", where))
		case r.Regexp == nil:
			errs = append(errs, fmt.Errorf("%s: has no regexp; write regexp: {source, target}", where))
		case r.Regexp.Source == "":
			errs = append(errs, fmt.Errorf("%s.regexp.source: is required; set the regular expression to replace", where))
		default:
			re, err := regexp.Compile(r.Regexp.Source)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.regexp.source: does not compile as a Go regular expression: %w", where, err))
				continue
			}
			c.rewrites = append(c.rewrites, rewrite{re: re, target: r.Regexp.Target})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}
