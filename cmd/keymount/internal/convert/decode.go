package convert

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// API groups and versions read.
const (
	esoGroup   = "external-secrets.io"
	esoVersion = esoGroup + "/v1"
	// esoV1beta1 is the same schema for every field convert reads: still in
	// most Git repositories, and served by ESO beside v1.
	esoV1beta1 = esoGroup + "/v1beta1"
	kesVersion = "kubernetes-client.io/v1"
)

// isESO reports whether apiVersion is one of ESO's that convert reads.
func isESO(apiVersion string) bool { return apiVersion == esoVersion || apiVersion == esoV1beta1 }

// Input is one stream of YAML documents: a file or stdin.
type Input struct {
	// Name names the stream in messages: a file name, or "stdin".
	Name string
	R    io.Reader
}

// document is one object of the input, with its raw fields.
type document struct {
	where      string // "file.yaml, document 2"
	apiVersion string
	kind       string
	fields     map[string]any // the object, decoded
}

// readDocuments splits every input into its objects: multi-document YAML,
// and the items of a kind: List. Empty documents are skipped.
func readDocuments(inputs []Input) ([]document, error) {
	var docs []document
	for _, in := range inputs {
		r := utilyaml.NewYAMLReader(bufio.NewReader(in.R))
		for n := 1; ; n++ {
			data, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: reading document %d: %w", in.Name, n, err)
			}
			where := fmt.Sprintf("%s, document %d", in.Name, n)
			got, err := decodeDocument(where, data)
			if err != nil {
				return nil, err
			}
			docs = append(docs, got...)
		}
	}
	return docs, nil
}

func decodeDocument(where string, data []byte) ([]document, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %w", where, err)
	}
	if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
		return nil, nil
	}
	var fields map[string]any
	if err := json.Unmarshal(js, &fields); err != nil {
		return nil, fmt.Errorf("%s: not a Kubernetes object (a YAML mapping with apiVersion and kind): %w", where, err)
	}
	d := document{where: where, fields: fields}
	d.apiVersion, _ = fields["apiVersion"].(string)
	d.kind, _ = fields["kind"].(string)
	if d.apiVersion == "v1" && d.kind == "List" {
		return decodeList(where, fields)
	}
	return []document{d}, nil
}

func decodeList(where string, fields map[string]any) ([]document, error) {
	items, _ := fields["items"].([]any)
	var docs []document
	for i, item := range items {
		js, err := json.Marshal(item)
		if err != nil {
			return nil, fmt.Errorf("%s: items[%d]: %w", where, i, err)
		}
		got, err := decodeDocument(fmt.Sprintf("%s, items[%d]", where, i), js)
		if err != nil {
			return nil, err
		}
		docs = append(docs, got...)
	}
	return docs, nil
}

// unknownFields reports every field of m (at path) that is not in known.
func unknownFields(is issues, path string, m map[string]any, known ...string) {
	for _, k := range sortedKeys(m) {
		if !slices.Contains(known, k) {
			is.unsupported(join(path, k), "keymount convert does not know this field; convert the rest and express it by hand, or remove it")
		}
	}
}

// field returns the map at key of m, nil when absent.
func field(m map[string]any, key string) map[string]any {
	sub, _ := m[key].(map[string]any)
	return sub
}

// items returns the list at key of m as maps (nil entries for non-maps).
func items(m map[string]any, key string) []map[string]any {
	list, _ := m[key].([]any)
	out := make([]map[string]any, len(list))
	for i, v := range list {
		out[i], _ = v.(map[string]any)
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
