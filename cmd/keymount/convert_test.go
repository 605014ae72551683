package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const convertTestdata = "internal/convert/testdata/"

// TestConvertCommand runs "keymount convert" as a user does: files, stdin,
// --output, --partial, and the exit codes.
func TestConvertCommand(t *testing.T) {
	golden := func(name string) string {
		data, err := os.ReadFile(convertTestdata + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string // exact, "" for none
		stderr []string
	}{
		{name: "file", args: []string{"convert", "-f", convertTestdata + "eso-template.yaml"},
			stdout: golden("eso-template.golden")},
		{name: "stdin", args: []string{"convert", "-f", "-"}, stdin: golden("eso-secretsmanager.yaml"),
			stdout: golden("eso-secretsmanager.golden")},
		{name: "positional file and --service-account", args: []string{"convert", convertTestdata + "kes-secretsmanager.yaml", "--service-account", "web"},
			stdout: golden("kes-secretsmanager.golden")},
		{name: "unsupported", args: []string{"convert", "-f", convertTestdata + "kes-unsupported.yaml", "--service-account=web"}, code: exitError,
			stderr: []string{
				"keymount: ExternalSecret default/legacy (kubernetes-client.io/v1): spec.dataFrom: not supported: ",
				"keymount: convert: the input holds fields keymount cannot express (listed above); fix them, or pass --partial",
			}},
		{name: "partial", args: []string{"convert", "--partial", "-f", convertTestdata + "kes-unsupported.yaml", "--service-account=web"},
			stdout: golden("kes-unsupported.golden"),
			stderr: []string{"keymount: ExternalSecret default/parameters-by-path (kubernetes-client.io/v1): spec.data[1].path: not supported: "}},
		{name: "KES without a ServiceAccount", args: []string{"convert", "-f", convertTestdata + "kes-secretsmanager.yaml"}, code: exitError,
			stderr: []string{`keymount: ExternalSecret default/hello-service (kubernetes-client.io/v1): not supported: no ServiceAccount to read as: `}},
		{name: "no input", args: []string{"convert"}, code: exitUsage, stderr: []string{"keymount: convert: no input; pass -f FILE, or -f - to read stdin"}},
		{name: "stdin twice", args: []string{"convert", "-f", "-", "-f", "-"}, code: exitUsage, stderr: []string{"stdin) given twice"}},
		{name: "missing file", args: []string{"convert", "-f", "/nonexistent/es.yaml"}, code: exitError, stderr: []string{"keymount: convert: open /nonexistent/es.yaml: no such file or directory"}},
		{name: "not YAML", args: []string{"convert", "-f", "-"}, stdin: "kind: [\n", code: exitError, stderr: []string{"stdin, document 1: not YAML"}},
		{name: "help", args: []string{"help", "convert"}, stdout: "", stderr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			var code int
			if tt.args[0] == "convert" {
				code = exitCode(convertCommand(tt.args[1:], strings.NewReader(tt.stdin), &out, &errOut), &errOut)
			} else {
				code = run(t.Context(), tt.args, &out, &errOut)
			}
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstderr: %s", code, tt.code, errOut.String())
			}
			if tt.name == "help" {
				if !strings.Contains(out.String(), "Usage: keymount convert -f FILE") || !strings.Contains(out.String(), "--partial") {
					t.Errorf("help lacks the usage and flags:\n%s", out.String())
				}
				return
			}
			if out.String() != tt.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), tt.stdout)
			}
			for _, want := range tt.stderr {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
				}
			}
		})
	}
}

// TestConvertOutputFile: -o writes the file, nothing to stdout; a failed
// conversion writes no file.
func TestConvertOutputFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.yaml")
	var out, errOut bytes.Buffer
	err := convertCommand([]string{"-f", convertTestdata + "eso-parameterstore.yaml", "-o", path}, strings.NewReader(""), &out, &errOut)
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, errOut.String())
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(convertTestdata + "eso-parameterstore.golden")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) || out.Len() != 0 {
		t.Errorf("-o wrote %q and stdout %q; want the golden output in the file only", got, out.String())
	}

	failed := filepath.Join(dir, "failed.yaml")
	err = convertCommand([]string{"-f", convertTestdata + "eso-unsupported.yaml", "--output", failed}, strings.NewReader(""), &out, &errOut)
	if err == nil {
		t.Fatal("converting eso-unsupported.yaml succeeded without --partial")
	}
	if _, err := os.Stat(failed); !os.IsNotExist(err) {
		t.Errorf("a failed conversion wrote %s (stat: %v)", failed, err)
	}
}
