package secretsync

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/synchash"
)

// dataFrom is spec(typ, pairs...) with the keymount.io/data-from
// annotation dirs.
func dataFrom(dirs string, pairs ...string) *ss1.SecretSync {
	ss := spec("Opaque", pairs...)
	ss.Annotations = map[string]string{AnnotationDataFrom: dirs}
	return ss
}

// valuesOf is data as strings.
func valuesOf(data map[string][]byte) map[string]string {
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = string(v)
	}
	return out
}

// TestDataFromExpands: every file directly under a listed directory is a
// key named by its file name, beside the spec's explicit keys; the marker
// entry writes no key; a directory without files gives no keys; templates
// read the directories' files by their paths.
func TestDataFromExpands(t *testing.T) {
	for name, tc := range map[string]struct {
		ss    *ss1.SecretSync
		files []string
		want  map[string]string
	}{
		"one directory and an explicit key": {
			ss:    dataFrom("app", "app", "app", "db", "user"),
			files: []string{"app/username", "u1", "app/password", "p1", "db", "admin", "other", "x"},
			want:  map[string]string{"username": "u1", "password": "p1", "user": "admin"},
		},
		"two directories, spaces and a repeat in the list": {
			ss:    dataFrom(" app, found ,app,", "app", "app", "found", "found"),
			files: []string{"app/a", "1", "found/prod.db", "2", "found/b", "3"},
			want:  map[string]string{"a": "1", "prod.db": "2", "b": "3"},
		},
		"a file named as its directory": {
			ss:    dataFrom("app", "app", "app"),
			files: []string{"app/app", "1"},
			want:  map[string]string{"app": "1"},
		},
		"an empty directory": {
			ss:    dataFrom("app", "app", "app", "db", "user"),
			files: []string{"db", "admin"},
			want:  map[string]string{"user": "admin"},
		},
		"nothing at all": {
			ss:   dataFrom("app", "app", "app"),
			want: map[string]string{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := desiredContent(tc.ss, files(tc.files...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, valuesOf(c.data)); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("templates read the files by path", func(t *testing.T) {
		ss := dataFrom("app", "app", "app")
		ss.Annotations["keymount.io/template.dsn"] = `{{ index . "app/username" }}:{{ index . "app/password" }}`
		c, err := desiredContent(ss, files("app/username", "u1", "app/password", "p1"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"username": "u1", "password": "p1", "dsn": "u1:p1"}
		if diff := cmp.Diff(want, valuesOf(c.data)); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
	})
}

// TestDataFromRefuses: a deeper path and a file
// name that is no Secret key fail the sync naming the files and keys,
// never a value.
func TestDataFromRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		ss    *ss1.SecretSync
		files []string
		want  []string
	}{
		"a deeper path": {
			ss:    dataFrom("app", "app", "app"),
			files: []string{"app/a", "value-one", "app/sub/b", "value-two"},
			want:  []string{`"app/sub/b"`, "more than one level", AnnotationDataFrom},
		},
		"an invalid key": {
			ss:    dataFrom("app", "app", "app"),
			files: []string{"app/a b", "value-one"},
			want:  []string{`"a b"`, "not a valid Secret key"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := desiredContent(tc.ss, files(tc.files...))
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, errDataFrom) {
				t.Errorf("%v: a content error marked as an invalid SecretSync", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %s", err, w)
				}
			}
			if strings.Contains(err.Error(), "value-") {
				t.Errorf("error %q holds a value", err)
			}
		})
	}
}

// TestDataFromInvalid: a directory without its marker entry, a marker whose
// targetKey is not the directory, an empty list and a name that is no key
// are an invalid SecretSync, found before the provider's answer matters;
// the message names the field and the fix.
func TestDataFromInvalid(t *testing.T) {
	for name, tc := range map[string]struct {
		ss   *ss1.SecretSync
		want []string
	}{
		"no marker": {
			ss:   dataFrom("app", "db", "user"),
			want: []string{AnnotationDataFrom, `lists "app"`, "spec.secretObject.data", "{sourcePath: app, targetKey: app}"},
		},
		"the marker of one directory of two": {
			ss:   dataFrom("app,found", "app", "app"),
			want: []string{`lists "found"`, "{sourcePath: found, targetKey: found}"},
		},
		"a marker with another targetKey": {
			ss:   dataFrom("app", "db", "user", "app", "creds"),
			want: []string{"spec.secretObject.data[1]", `targetKey "creds"`, `set its targetKey to "app"`},
		},
		"an empty list": {
			ss:   dataFrom(" , "),
			want: []string{AnnotationDataFrom, "lists no directory"},
		},
		"a name that is no key": {
			ss:   dataFrom("a/b", "a/b", "a/b"),
			want: []string{`"a/b"`, "not a usable directory name"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := dataFromDirs(tc.ss); !errors.Is(err, errDataFrom) {
				t.Errorf("dataFromDirs: %v, want errDataFrom", err)
			}
			_, err := desiredContent(tc.ss, files("app/a", "value-one", "db", "value-two"))
			if !errors.Is(err, errDataFrom) {
				t.Fatalf("desiredContent: %v, want errDataFrom", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %s", err, w)
				}
			}
		})
	}
	if dirs, err := dataFromDirs(spec("Opaque", "app", "app")); dirs != nil || err != nil {
		t.Errorf("without the annotation: %v, %v; want nothing", dirs, err)
	}
}

// managed is a managedFields entry of manager owning the data keys.
func managed(manager string, keys ...string) metav1.ManagedFieldsEntry {
	raw := `{"f:data":{".":{}`
	for _, k := range keys {
		raw += `,"f:` + k + `":{}`
	}
	raw += `},"f:metadata":{"f:labels":{"f:x":{}}}}`
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(raw)}
}

// cachedSecret is the cache's form of a Secret holding data, whose data
// keys are owned as managedFields say.
func cachedSecret(t *testing.T, data map[string]string, managedFields ...metav1.ManagedFieldsEntry) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", Labels: map[string]string{ss1.LabelSecretSync: ""}, ManagedFields: managedFields},
		Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	if _, err := trimSecret(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDataFromHash: the syncHash covers the expanded keys; a cached Secret
// holding what was written hashes as the content it was written from,
// another writer's keys left out; a key gone from the answer changes the
// hash, and the Secret as it is then differs from the content wanted.
func TestDataFromHash(t *testing.T) {
	h, err := synchash.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	ss := dataFrom("app", "app", "app", "db", "user")
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{UID: "c1", Generation: 1}}
	first, err := desiredContent(ss, files("app/a", "1", "app/b", "2", "db", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	written := h.Sum(hashContent(ss, class, first.digested()))

	s := cachedSecret(t, map[string]string{"a": "1", "b": "2", "user": "admin", "other": "theirs"},
		managed(FieldManager, "a", "b", "user"), managed("someone-else", "other"))
	if got := s.Annotations[foreignKeysMark]; got != "other" {
		t.Errorf("foreign keys %q, want other", got)
	}
	now := currentContent(ss, s)
	if got := slices.Sorted(maps.Keys(now.data)); !slices.Equal(got, []string{"a", "b", "user"}) {
		t.Errorf("current keys %v, want a, b, user (not the other writer's)", got)
	}
	if h.Sum(hashContent(ss, class, now)) != written {
		t.Errorf("the Secret as written hashes differently from its content")
	}

	next, err := desiredContent(ss, files("app/b", "2", "app/c", "3", "db", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Sum(hashContent(ss, class, next.digested())) == written {
		t.Errorf("a key gone and one added left the hash unchanged")
	}
	if now.equal(next.digested()) {
		t.Errorf("the Secret with a and b equals the content wanted with b and c")
	}
	added, _, removed := next.digested().changedKeys(now)
	if !slices.Equal(added, []string{"c"}) || !slices.Equal(removed, []string{"a"}) {
		t.Errorf("added %v removed %v, want c and a", added, removed)
	}
}

// TestForeignKeysMark: only data keys no managedFields entry of
// FieldManager holds are marked; trimming again keeps the mark; a Secret
// without managedFields (or unreadable ones) marks nothing; a SecretSync
// without keymount.io/data-from still reads only its spec's keys.
func TestForeignKeysMark(t *testing.T) {
	s := cachedSecret(t, map[string]string{"a": "1", "shared": "2", "x": "3", "y": "4"},
		managed(FieldManager, "a", "shared"), managed("other", "shared", "x"), managed("kubectl", "y"))
	if got := s.Annotations[foreignKeysMark]; got != "x,y" {
		t.Errorf("mark %q, want x,y", got)
	}
	if _, err := trimSecret(s); err != nil {
		t.Fatal(err)
	}
	if got := s.Annotations[foreignKeysMark]; got != "x,y" {
		t.Errorf("mark %q after trimming twice, want x,y", got)
	}
	if got := slices.Sorted(maps.Keys(ownedData(s))); !slices.Equal(got, []string{"a", "shared"}) {
		t.Errorf("owned keys %v, want a and shared", got)
	}

	plain := cachedSecret(t, map[string]string{"a": "1"})
	if _, ok := plain.Annotations[foreignKeysMark]; ok {
		t.Errorf("a Secret without managedFields is marked: %v", plain.Annotations)
	}
	broken := managed(FieldManager)
	broken.FieldsV1 = metav1.NewFieldsV1("not json")
	if s := cachedSecret(t, map[string]string{"a": "1"}, broken); s.Annotations[foreignKeysMark] != "" {
		t.Errorf("unreadable managedFields marked %q", s.Annotations[foreignKeysMark])
	}

	c := currentContent(spec("Opaque", "a", "a"), s)
	if got := slices.Sorted(maps.Keys(c.data)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("without %s the current keys are %v, want the spec's a", AnnotationDataFrom, got)
	}
}

// TestDataFromPrecedence: a key from two sources takes External Secrets'
// precedence: dataFrom entries (the annotation's directories) in order,
// each overriding those before, then spec.data overriding them all.
func TestDataFromPrecedence(t *testing.T) {
	ss := dataFrom("found,app", "app", "app", "found", "found", "db", "password")
	c, err := desiredContent(ss, files("db", "explicit", "app/password", "from-app", "app/x", "app-x", "found/x", "found-x", "found/y", "found-y"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"password": "explicit", "x": "app-x", "y": "found-y"}
	if d := cmp.Diff(want, valuesOf(c.data)); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
}
