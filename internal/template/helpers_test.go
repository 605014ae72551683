package template

import "regexp"

func regexpReplace(expr, s, repl string) string {
	return regexp.MustCompile(expr).ReplaceAllString(s, repl)
}
