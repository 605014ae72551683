package synchash

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func hasher(t testing.TB, b byte) *Hasher {
	t.Helper()
	h, err := New(testKey(b))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func baseContent() *Content {
	return &Content{
		Type:                 "Opaque",
		Data:                 map[string][]byte{"username": []byte("admin"), "password": []byte("hunter2")},
		Labels:               map[string]string{"app": "web", "secrets-store.sync.x-k8s.io": ""},
		Annotations:          map[string]string{"team": "a"},
		ClassUID:             "class-uid",
		ClassGeneration:      3,
		SyncUID:              "sync-uid",
		SyncGeneration:       7,
		ForceSynchronization: "",
	}
}

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestSameInputSameHash(t *testing.T) {
	h := hasher(t, 1)
	a := h.Sum(baseContent())
	if !hexHash.MatchString(a) {
		t.Fatalf("hash %q is not 64 lowercase hex digits", a)
	}
	// The same content built in another order, and by another Hasher with
	// the same key.
	c := &Content{Type: "Opaque", ClassUID: "class-uid", ClassGeneration: 3, SyncUID: "sync-uid", SyncGeneration: 7,
		Data: map[string][]byte{}, Labels: map[string]string{}, Annotations: map[string]string{"team": "a"}}
	c.Data["password"] = []byte("hunter2")
	c.Data["username"] = []byte("admin")
	c.Labels["secrets-store.sync.x-k8s.io"] = ""
	c.Labels["app"] = "web"
	for range 20 { // map iteration order varies between runs
		if b := hasher(t, 1).Sum(c); b != a {
			t.Fatalf("same content, different hash: %s, %s", a, b)
		}
	}
	// nil and empty maps are the same Secret.
	if h.Sum(&Content{Data: nil}) != h.Sum(&Content{Data: map[string][]byte{}, Labels: map[string]string{}}) {
		t.Error("nil and empty maps hash differently")
	}
}

// TestAnyChangeChangesHash: every field, and every way of moving bytes
// between keys and values, changes the hash.
func TestAnyChangeChangesHash(t *testing.T) {
	h := hasher(t, 1)
	changes := map[string]func(c *Content){
		"value":                 func(c *Content) { c.Data["password"] = []byte("hunter3") },
		"value empty":           func(c *Content) { c.Data["password"] = nil },
		"key renamed":           func(c *Content) { c.Data["pass"] = c.Data["password"]; delete(c.Data, "password") },
		"key added":             func(c *Content) { c.Data["extra"] = nil },
		"key removed":           func(c *Content) { delete(c.Data, "username") },
		"values swapped":        func(c *Content) { c.Data["username"], c.Data["password"] = c.Data["password"], c.Data["username"] },
		"byte key to value":     func(c *Content) { delete(c.Data, "username"); c.Data["usernam"] = []byte("eadmin") },
		"type":                  func(c *Content) { c.Type = "kubernetes.io/tls" },
		"label value":           func(c *Content) { c.Labels["app"] = "api" },
		"label added":           func(c *Content) { c.Labels["tier"] = "" },
		"label to annotation":   func(c *Content) { delete(c.Labels, "app"); c.Annotations["app"] = "web" },
		"annotation value":      func(c *Content) { c.Annotations["team"] = "b" },
		"annotation removed":    func(c *Content) { delete(c.Annotations, "team") },
		"data key to label":     func(c *Content) { delete(c.Data, "username"); c.Labels["username"] = "admin" },
		"class uid":             func(c *Content) { c.ClassUID = "other" },
		"class generation":      func(c *Content) { c.ClassGeneration++ },
		"sync uid":              func(c *Content) { c.SyncUID = "other" },
		"sync generation":       func(c *Content) { c.SyncGeneration++ },
		"force synchronization": func(c *Content) { c.ForceSynchronization = "2026-11-26" },
		"uid to generation":     func(c *Content) { c.SyncUID, c.ClassUID = c.ClassUID, c.SyncUID },
		"template added":        func(c *Content) { c.Templates = map[string]string{"keymount.io/template.k": "{{ .a }}"} },
		"annotation to template": func(c *Content) {
			delete(c.Annotations, "team")
			c.Templates = map[string]string{"team": "a"}
		},
	}
	base := h.Sum(baseContent())
	seen := map[string]string{base: "base"}
	for name, change := range changes {
		c := baseContent()
		change(c)
		got := h.Sum(c)
		if other, dup := seen[got]; dup {
			t.Errorf("%s: same hash as %s", name, other)
		}
		seen[got] = name
	}
}

func TestDifferentKeyDifferentHash(t *testing.T) {
	c := baseContent()
	if hasher(t, 1).Sum(c) == hasher(t, 2).Sum(c) {
		t.Error("two keys give the same hash")
	}
	k := testKey(1)
	h := hasher(t, 1)
	k[0] = 9 // New copied the key
	if h.Sum(c) != hasher(t, 1).Sum(c) {
		t.Error("changing the caller's key slice changed the Hasher")
	}
}

// TestHashIsKeyed: the hash is HMAC-SHA256 under the key, not any unkeyed
// SHA-256 someone holding the status could recompute from guessed values.
func TestHashIsKeyed(t *testing.T) {
	c := baseContent()
	got := hasher(t, 1).Sum(c)

	mac := hmac.New(sha256.New, testKey(1))
	encode(mac, c)
	if want := hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("Sum = %s, want HMAC-SHA256 of the encoding %s", got, want)
	}

	var enc bytes.Buffer
	encode(&sha256Recorder{&enc}, c)
	dataJSON, err := json.Marshal(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	unkeyed := map[string][]byte{
		"encoding":            enc.Bytes(),
		"values concatenated": []byte("adminhunter2"),
		"values, sorted keys": []byte("hunter2admin"),
		"data as JSON":        dataJSON,
		"password alone":      []byte("hunter2"),
		"key and value pairs": []byte("password=hunter2\nusername=admin\n"),
	}
	for name, b := range unkeyed {
		sum := sha256.Sum256(b)
		if got == hex.EncodeToString(sum[:]) {
			t.Errorf("the hash is the unkeyed SHA-256 of the %s", name)
		}
	}
	for _, v := range c.Data {
		if strings.Contains(got, hex.EncodeToString(v)) {
			t.Errorf("the hash holds a value in hex")
		}
	}
}

// sha256Recorder is a hash.Hash that only records what is written, to read
// the encoding.
type sha256Recorder struct{ b *bytes.Buffer }

func (r *sha256Recorder) Write(p []byte) (int, error) { return r.b.Write(p) }
func (r *sha256Recorder) Sum(b []byte) []byte         { return b }
func (r *sha256Recorder) Reset()                      { r.b.Reset() }
func (r *sha256Recorder) Size() int                   { return sha256.Size }
func (r *sha256Recorder) BlockSize() int              { return sha256.BlockSize }

func TestEncodingStartsWithVersion(t *testing.T) {
	var enc bytes.Buffer
	encode(&sha256Recorder{&enc}, &Content{})
	if !bytes.Contains(enc.Bytes(), []byte(version)) {
		t.Errorf("the encoding lacks its version tag %q", version)
	}
}

func TestNewRejectsShortKey(t *testing.T) {
	if _, err := New(make([]byte, KeySize-1)); err == nil {
		t.Error("New with a 31-byte key: no error")
	}
}

func TestRedaction(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	h, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	c := baseContent()
	for _, s := range []string{fmt.Sprint(h), fmt.Sprintf("%v %+v %#v %s", h, h, h, h), c.String(), fmt.Sprint(c)} {
		if strings.Contains(s, string(key)) || strings.Contains(s, "hunter2") || strings.Contains(s, "0123456789") {
			t.Errorf("%q shows the key or a value", s)
		}
	}
}

// TestNoTemplatesHashAsBefore: an empty Templates is left out of the
// encoding, so a SecretSync without templates keeps the syncHash it had
// before templates existed (no rewrite on upgrade).
func TestNoTemplatesHashAsBefore(t *testing.T) {
	h := hasher(t, 1)
	c := baseContent()
	before := h.Sum(c)
	c.Templates = map[string]string{}
	if got := h.Sum(c); got != before {
		t.Errorf("an empty Templates changes the hash")
	}
	c.Templates = map[string]string{"keymount.io/template.k": "x"}
	withOne := h.Sum(c)
	c.Templates["keymount.io/template.k"] = "y"
	if h.Sum(c) == withOne || withOne == before {
		t.Errorf("the template text does not change the hash")
	}
}
