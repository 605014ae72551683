package store

import (
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/keymount/keymount/provider/aws/spec"
)

// Batch sizes the APIs accept.
const (
	secretsPerBatch    = 20
	parametersPerBatch = 10
)

// item is one distinct value to fetch: an object name with its selector, in
// one region.
type item struct {
	typ     spec.ObjectType
	region  string
	name    string
	version string // Secrets Manager version id or SSM version number
	label   string // staging label or SSM label
}

// pinned reports whether the item's value can never change.
func (it item) pinned() bool { return it.version != "" }

// latest reports whether the item follows the current value.
func (it item) latest() bool { return it.version == "" && it.label == "" }

// ssmName is the GetParameters name with its selector.
func (it item) ssmName() string {
	switch {
	case it.version != "":
		return it.name + ":" + it.version
	case it.label != "":
		return it.name + ":" + it.label
	default:
		return it.name
	}
}

func (it item) String() string {
	return string(it.typ) + "|" + it.region + "|" + it.name + "|v=" + it.version + "|l=" + it.label
}

func primaryItem(o *spec.Object, region string) item {
	return item{typ: o.Type, region: region, name: o.Name, version: o.Version, label: o.VersionLabel}
}

// failoverItem is the object as the failover region knows it: its
// failoverObject when set, the same name and version otherwise.
func failoverItem(o *spec.Object, region string) item {
	it := primaryItem(o, region)
	if f := o.Failover; f != nil {
		if f.Name != "" {
			it.name = f.Name
		}
		it.version, it.label = f.Version, f.VersionLabel
	}
	return it
}

func dedupe(items []item) []item {
	seen := make(map[item]bool, len(items))
	out := make([]item, 0, len(items))
	for _, it := range items {
		if !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	return out
}

// op is the store call a batch makes.
type op int

const (
	opSecretsBatch op = iota // BatchGetSecretValue
	opSecret                 // GetSecretValue
	opParameters             // GetParameters
)

// batch is the items of one store call, all in one region.
type batch struct {
	op     op
	region string
	items  []item
}

// flightKey identifies identical batches of one identity.
func (b batch) flightKey(identity string) string {
	keys := make([]string, len(b.items))
	for i, it := range b.items {
		keys[i] = it.String()
	}
	slices.Sort(keys)
	return identity + "\x00" + strings.Join(keys, "\x00")
}

// plan groups items into store calls. Items are sorted first so that pods
// asking for the same objects in any order make identical batches (which then
// collapse into one flight). A parameters batch holds at most one selector of
// a name, so that answers map back to requests by name alone.
func (s *Store) plan(identity string, items []item) []batch {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.String(), b.String()) })
	var (
		out     []batch
		latest  []item
		params  [][]item
		batched = !s.batchDenied(identity, regionOf(items))
	)
	for _, it := range items {
		switch {
		case it.typ == spec.SSMParameter:
			params = addParameter(params, it)
		case it.latest() && batched:
			latest = append(latest, it)
		default:
			out = append(out, batch{op: opSecret, region: it.region, items: []item{it}})
		}
	}
	for chunk := range slices.Chunk(latest, secretsPerBatch) {
		out = append(out, batch{op: opSecretsBatch, region: chunk[0].region, items: chunk})
	}
	for _, p := range params {
		out = append(out, batch{op: opParameters, region: p[0].region, items: p})
	}
	return out
}

// addParameter puts it into the first batch with room and no other selector
// of the same name.
func addParameter(batches [][]item, it item) [][]item {
	for i, b := range batches {
		if len(b) < parametersPerBatch && !slices.ContainsFunc(b, func(o item) bool { return o.name == it.name }) {
			batches[i] = append(b, it)
			return batches
		}
	}
	return append(batches, []item{it})
}

func regionOf(items []item) string {
	if len(items) == 0 {
		return ""
	}
	return items[0].region
}

// byNameOrARN indexes the entries of a batch's answer by name and by ARN:
// a batch names each object by either.
func byNameOrARN[E any](entries []E, id func(E) (name, arn *string)) map[string]E {
	m := make(map[string]E, 2*len(entries))
	for _, e := range entries {
		name, arn := id(e)
		m[aws.ToString(name)] = e
		m[aws.ToString(arn)] = e
	}
	return m
}
