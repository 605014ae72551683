package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzConvert feeds arbitrary input to the converter: it never panics, and
// whatever it writes decodes as keymount's objects and parses as the AWS
// provider's parameters.
func FuzzConvert(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Convert([]Input{{Name: "fuzz", R: bytes.NewReader(data)}}, Options{ServiceAccount: "app"})
		if err != nil {
			return
		}
		for _, is := range res.Issues {
			if is.Object == "" || is.Message == "" {
				t.Errorf("an issue must name its object and say what: %q", is)
			}
		}
		var out bytes.Buffer
		if err := res.Write(&out); err != nil {
			t.Fatalf("Write: %v", err)
		}
		checkOutput(t, out.Bytes())
	})
}
