package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink is a Markdown link target: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// inlineCode is a one-line code span: no link inside (regular expressions
// in code spans, such as `^[a-z]([-a-z]*)$`, look like links).
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// heading is a Markdown heading line.
var heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestLinksResolve: every relative link of docs/*.md and of the README
// names a file or directory of the repository, and every #anchor a heading
// of its file.
func TestLinksResolve(t *testing.T) {
	for _, f := range append(docFiles(t), "../README.md", "../SECURITY.md") {
		text := readDoc(t, f)
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s, which does not exist", f, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchors(readDoc(t, path))[anchor] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", f, target, path, anchor)
			}
		}
	}
}
