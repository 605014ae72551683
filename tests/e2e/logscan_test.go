package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// minSecretLen is the shortest value the scanner looks for: a shorter one
// could match by chance. At least 8: needles are indexed by their first 8
// bytes.
const minSecretLen = 8

// logHit is one place where a log holds a secret value. It names the value
// by its label, never by the value.
type logHit struct {
	file  string
	line  int
	label string
	form  string
}

func (h logHit) String() string {
	return fmt.Sprintf("%s:%d: %s (%s)", h.file, h.line, h.label, h.form)
}

// needle is one spelling of a secret value that a log could hold.
type needle struct {
	label, form string
	text        []byte
}

// needleIndex finds many needles in one pass: every needle is at least
// minSecretLen bytes long, so it is looked up by its first 8 bytes.
type needleIndex struct {
	needles  []needle
	byPrefix map[uint64][]int
	values   int // values indexed
	short    int // values skipped as shorter than minSecretLen
}

// newNeedleIndex indexes every spelling of every value at least
// minSecretLen bytes long.
func newNeedleIndex(secrets []secretValue) *needleIndex {
	x := &needleIndex{byPrefix: map[uint64][]int{}}
	for _, s := range secrets {
		if len(s.value) < minSecretLen {
			x.short++
			continue
		}
		x.values++
		for _, f := range spellings(s.value) {
			text := []byte(f.text)
			x.byPrefix[prefixKey(text)] = append(x.byPrefix[prefixKey(text)], len(x.needles))
			x.needles = append(x.needles, needle{label: s.label, form: f.name, text: text})
		}
	}
	return x
}

// prefixKey is the index key of the text at the start of b, which holds at
// least minSecretLen bytes.
func prefixKey(b []byte) uint64 {
	return binary.LittleEndian.Uint64(b)
}

// spelling is a value as a log line would spell it.
type spelling struct{ name, text string }

// spellings returns the distinct ways a log can spell value: as is;
// base64 (a Secret's data in the JSON bodies client-go logs from -v=8);
// JSON-escaped and Go-quoted (a JSON document, or a klog string value), and
// both at once (a JSON body quoted as a klog value); and as a klog
// multi-line value, whose lines after the first are indented by a tab.
func spellings(value string) []spelling {
	escaped := jsonEscape(value)
	all := []spelling{
		{"as is", value},
		{"base64", base64.StdEncoding.EncodeToString([]byte(value))},
		{"JSON-escaped", escaped},
		{"Go-quoted", goQuote(value)},
		{"JSON-escaped, then Go-quoted", goQuote(escaped)},
	}
	if strings.Contains(value, "\n") {
		all = append(all, spelling{"klog multi-line", strings.ReplaceAll(strings.TrimSuffix(value, "\n"), "\n", "\n\t")})
	}
	var out []spelling
	index := map[string]int{}
	for _, s := range all {
		if i, ok := index[s.text]; ok {
			if s.text != value {
				out[i].name += " or " + s.name
			}
			continue
		}
		index[s.text] = len(out)
		out = append(out, s)
	}
	return out
}

// jsonEscape is value inside a JSON string, without the quotes.
func jsonEscape(value string) string {
	b, _ := json.Marshal(value) // a string always marshals
	return string(b[1 : len(b)-1])
}

// goQuote is value inside a Go-quoted string (klog's quoting of a value),
// without the quotes.
func goQuote(value string) string {
	q := strconv.Quote(value)
	return q[1 : len(q)-1]
}

// find calls found with the offset and the needle of every match in data.
func (x *needleIndex) find(data []byte, found func(offset int, n needle)) {
	for i := 0; i+minSecretLen <= len(data); i++ {
		for _, j := range x.byPrefix[prefixKey(data[i:])] {
			if bytes.HasPrefix(data[i:], x.needles[j].text) {
				found(i, x.needles[j])
			}
		}
	}
}

// scanLog reads the log at path and returns where it holds a needle, at
// most one hit per line and spelling, with file as the hits' file name, and
// how many bytes it read. Binary bodies that client-go logs as hex dumps
// are decoded and scanned too.
func scanLog(path, file string, x *needleIndex) ([]logHit, int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	return scanText(data, file, x), len(data), nil
}

func scanText(data []byte, file string, x *needleIndex) []logHit {
	type key struct {
		line        int
		label, form string
	}
	seen := map[key]bool{}
	var hits []logHit
	add := func(line int, n needle, form string) {
		k := key{line, n.label, form}
		if !seen[k] {
			seen[k] = true
			hits = append(hits, logHit{file: file, line: line, label: n.label, form: form})
		}
	}
	lines := lineCounter{data: data, line: 1}
	x.find(data, func(offset int, n needle) { add(lines.at(offset), n, n.form) })
	for _, d := range hexDumps(data) {
		x.find(d.data, func(_ int, n needle) { add(d.line, n, n.form+" in a hex dump") })
	}
	return hits
}

// lineCounter turns ascending offsets into line numbers.
type lineCounter struct {
	data         []byte
	offset, line int
}

func (c *lineCounter) at(offset int) int {
	c.line += bytes.Count(c.data[c.offset:offset], []byte("\n"))
	c.offset = offset
	return c.line
}

// hexDump is the bytes of one hex.Dump found in a log and the line it
// starts on.
type hexDump struct {
	line int
	data []byte
}

// hexDumps decodes the hex.Dump output in a log (klog indents a multi-line
// value with a tab): consecutive lines with consecutive offsets from 0.
func hexDumps(data []byte) []hexDump {
	var dumps []hexDump
	cur, next := -1, 0
	for i, line := 0, 1; i < len(data); line++ {
		end := bytes.IndexByte(data[i:], '\n')
		if end < 0 {
			end = len(data) - i
		}
		offset, b, ok := hexDumpLine(data[i : i+end])
		i += end + 1
		switch {
		case ok && offset == 0:
			dumps = append(dumps, hexDump{line: line, data: b})
			cur, next = len(dumps)-1, len(b)
		case ok && cur >= 0 && offset == next:
			dumps[cur].data = append(dumps[cur].data, b...)
			next += len(b)
		default:
			cur = -1
		}
	}
	return dumps
}

// hexDumpLine parses one line of hex.Dump:
// "00000010  6f 72 6c 64 0a 00 00 00  00 00 00 00 00 00 00 00  |orld............|".
func hexDumpLine(line []byte) (offset int, data []byte, ok bool) {
	line = bytes.TrimLeft(line, "\t")
	if len(line) < 10 || string(line[8:10]) != "  " {
		return 0, nil, false
	}
	off, err := strconv.ParseUint(string(line[:8]), 16, 32)
	bar := bytes.IndexByte(line, '|')
	if err != nil || bar < 10 {
		return 0, nil, false
	}
	fields := bytes.Fields(line[10:bar])
	if len(fields) == 0 || len(fields) > 16 {
		return 0, nil, false
	}
	for _, f := range fields {
		v, err := strconv.ParseUint(string(f), 16, 8)
		if len(f) != 2 || err != nil {
			return 0, nil, false
		}
		data = append(data, byte(v))
	}
	return int(off), data, true
}
