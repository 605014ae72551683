package convert

import (
	"fmt"
	"strings"
)

// Issue is one thing of the input that the output does not express.
type Issue struct {
	// Object names the input object: "ExternalSecret team-a/db",
	// "document 3".
	Object string
	// Path is the field path in that object, e.g. "spec.dataFrom[0].find".
	Path string
	// Message says what is not supported and what to do instead.
	Message string
	// Note is true for what needs no action (an object that is not an
	// ExternalSecret, skipped): it does not fail the conversion.
	Note bool
}

// String formats the issue as the CLI prints it:
// "ExternalSecret team-a/db: spec.dataFrom[0].find: not supported: ...".
func (i Issue) String() string {
	var b strings.Builder
	b.WriteString(i.Object)
	b.WriteString(": ")
	if i.Path != "" {
		b.WriteString(i.Path)
		b.WriteString(": ")
	}
	b.WriteString(i.Message)
	return b.String()
}

// issues collects the issues of one input object.
type issues struct {
	object string
	list   *[]Issue
}

// unsupported records a field the output cannot express.
func (is issues) unsupported(path, format string, args ...any) {
	is.add(path, "not supported: "+fmt.Sprintf(format, args...))
}

// invalid records a field whose value cannot be read.
func (is issues) invalid(path, format string, args ...any) {
	is.add(path, "invalid: "+fmt.Sprintf(format, args...))
}

func (is issues) add(path, msg string) {
	*is.list = append(*is.list, Issue{Object: is.object, Path: path, Message: msg})
}

// note records something skipped that needs no action.
func (is issues) note(path, format string, args ...any) {
	*is.list = append(*is.list, Issue{Object: is.object, Path: path, Message: fmt.Sprintf(format, args...), Note: true})
}

// count is the number of issues recorded so far, for all objects, notes
// aside.
func (is issues) count() int {
	n := 0
	for _, i := range *is.list {
		if !i.Note {
			n++
		}
	}
	return n
}

// objectName is "namespace/name", or "name" without a namespace.
func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
