package convert

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// corpusDir holds the corpus: one manifest set per case, written afresh
// from the fields ESO's and KES's documentation describe, each with its
// golden output (<case>.golden, --partial where there are issues) and its
// issues (<case>.issues).
var corpusDir = filepath.Join("testdata", "corpus")

// corpusOptions is a case's first line when the case needs options:
// "# convert: --role-arn ARN --service-account NAME --pod-identity".
func corpusOptions(t *testing.T, src []byte) Options {
	t.Helper()
	var o Options
	line, _, _ := strings.Cut(string(src), "\n")
	rest, ok := strings.CutPrefix(line, "# convert:")
	if !ok {
		return o
	}
	args := strings.Fields(rest)
	for i := 0; i < len(args); i++ {
		next := func() string {
			if i+1 >= len(args) {
				t.Fatalf("option %s: no value", args[i])
			}
			i++
			return args[i]
		}
		switch args[i] {
		case "--role-arn":
			o.RoleARN = next()
		case "--service-account":
			o.ServiceAccount = next()
		case "--cluster-namespace":
			o.ClusterNamespace = next()
		case "--pod-identity":
			o.PodIdentity = true
		default:
			t.Fatalf("option %q unknown", args[i])
		}
	}
	return o
}

// corpusCases are the corpus's cases: every <case>.yaml but the
// end-to-end data files <case>.e2e.yaml.
func corpusCases() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	return slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, e2eSuffix) }), err
}

// e2eSuffix ends the end-to-end data file of a case
// (corpus_e2e_integration_test.go).
const e2eSuffix = ".e2e.yaml"

// corpusMinimum is the number of cases the corpus must hold at least.
const corpusMinimum = 40

// TestCorpus converts every case of testdata/corpus/, compares the output
// and the issues with the case's goldens, checks the output decodes
// strictly, and logs a coverage report: the cases converted whole and
// those with refusals, and every field path of the inputs with the number
// of cases converting it and refusing it.
func TestCorpus(t *testing.T) {
	files, err := corpusCases()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < corpusMinimum {
		t.Fatalf("%d cases in %s, want at least %d", len(files), corpusDir, corpusMinimum)
	}
	cov := newCoverage()
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert([]Input{{Name: name + ".yaml", R: bytes.NewReader(src)}}, corpusOptions(t, src))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := res.Write(&out); err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, is := range res.Issues {
				lines = append(lines, is.String())
			}
			text := strings.Join(lines, "\n")
			if text != "" {
				text += "\n"
			}
			golden(t, filepath.Join("corpus", name+".golden"), out.String())
			golden(t, filepath.Join("corpus", name+".issues"), text)
			checkOutput(t, out.Bytes())
			// A refusal names its path (only a whole object may go
			// without one) and a reason.
			for _, is := range res.Issues {
				if is.Note {
					continue
				}
				if is.Object == "" || !strings.Contains(is.Message, ": ") {
					t.Errorf("issue without object or reason: %q", is.String())
				}
			}
			// A case named refused-* holds a refusal; any other converts
			// whole.
			if got, want := refusals(res) > 0, strings.HasPrefix(name, "refused-"); got != want {
				t.Errorf("refusals: %v, want %v (the case's name starts with refused- exactly when it holds one)", got, want)
			}
			cov.add(t, name, src, res)
		})
	}
	report := cov.report()
	if t.Failed() {
		t.Error(report)
	} else {
		t.Log(report)
	}
}

func refusals(res *Result) int {
	n := 0
	for _, is := range res.Issues {
		if !is.Note {
			n++
		}
	}
	return n
}

// coverage counts, for every field path of the inputs ("ExternalSecret
// spec.dataFrom[].find.name.regexp"), the cases converting it and those
// refusing it (an issue names it or a field above it).
type coverage struct {
	cases, whole, refused int
	converted, refusedIn  map[string]int
}

func newCoverage() *coverage {
	return &coverage{converted: map[string]int{}, refusedIn: map[string]int{}}
}

// freeForm are the maps whose keys are the user's (labels, tags, template
// keys): their keys show as *.
var freeForm = map[string]bool{
	"labels": true, "annotations": true, "tags": true, "matchLabels": true,
	"stringData": true, "template.data": true, "sessionTags": true, "headers": true,
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

func (c *coverage) add(t *testing.T, name string, src []byte, res *Result) {
	t.Helper()
	c.cases++
	if refusals(res) == 0 {
		c.whole++
	} else {
		c.refused++
	}
	// The refused paths by object kind.
	refused := map[string][]string{}
	for _, is := range res.Issues {
		if is.Note || is.Path == "" || strings.HasSuffix(is.Message, "(above)") {
			continue
		}
		kind, _, _ := strings.Cut(is.Object, " ")
		if strings.Contains(is.Object, "("+kesVersion+")") {
			kind = "KES " + kind
		}
		refused[kind] = append(refused[kind], indexRE.ReplaceAllString(is.Path, "[]"))
	}
	seen := map[string]bool{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(src)))
	for {
		data, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatal(err)
		}
		kind, _ := obj["kind"].(string)
		api, _ := obj["apiVersion"].(string)
		switch {
		case api == kesVersion:
			kind = "KES " + kind
		case isESO(api):
		default:
			continue
		}
		var paths []string
		walkPaths("spec", obj["spec"], &paths)
		for _, p := range paths {
			key := kind + " " + p
			if seen[key] {
				continue
			}
			seen[key] = true
			if slices.ContainsFunc(refused[kind], func(r string) bool {
				return p == r || strings.HasPrefix(p, r+".") || strings.HasPrefix(p, r+"[")
			}) {
				c.refusedIn[key]++
			} else {
				c.converted[key]++
			}
		}
	}
}

// walkPaths appends the path of every leaf under v: maps by key (the
// user's keys as *), lists as [].
func walkPaths(path string, v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			*out = append(*out, path)
			return
		}
		last := path[strings.LastIndex(path, ".")+1:]
		for k, e := range v {
			if freeForm[last] || strings.HasSuffix(path, "template.data") {
				k = "*"
			}
			walkPaths(path+"."+k, e, out)
		}
	case []any:
		if len(v) == 0 {
			*out = append(*out, path+"[]")
		}
		for _, e := range v {
			walkPaths(path+"[]", e, out)
		}
	default:
		*out = append(*out, path)
	}
}

func (c *coverage) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "corpus: %d cases, %d converted whole, %d with refusals\n", c.cases, c.whole, c.refused)
	keys := map[string]bool{}
	for k := range c.converted {
		keys[k] = true
	}
	for k := range c.refusedIn {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	never := 0
	fmt.Fprintf(&b, "%d field paths seen (cases converting / refusing):\n", len(sorted))
	for _, k := range sorted {
		mark := ""
		if c.converted[k] == 0 {
			mark = "  (never converted)"
			never++
		}
		fmt.Fprintf(&b, "  %-80s %3d / %d%s\n", k, c.converted[k], c.refusedIn[k], mark)
	}
	fmt.Fprintf(&b, "%d field paths refused wherever seen\n", never)
	return b.String()
}
