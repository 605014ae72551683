package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoTree returns the repository's top-level folders and its binaries
// (the folders under cmd/): the first path elements of the files git
// tracks or would track (`git ls-files --cached --others
// --exclude-standard`: a folder being added counts, bin/ and other ignored
// output does not) that are still in the work tree. Dot-folders (.ci) are
// left out.
func repoTree(t *testing.T) (folders, binaries []string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in the repository root: %v", err)
	}
	for _, p := range strings.Split(string(out), "\x00") {
		parts := strings.Split(p, "/")
		if len(parts) < 2 || strings.HasPrefix(parts[0], ".") {
			continue // a file at the top, or a dot-folder
		}
		if _, err := os.Lstat(filepath.Join("..", filepath.FromSlash(p))); err != nil {
			continue // deleted from the work tree, not yet from the index
		}
		if !slices.Contains(folders, parts[0]) {
			folders = append(folders, parts[0])
		}
		if parts[0] == "cmd" && len(parts) > 2 && !slices.Contains(binaries, parts[1]) {
			binaries = append(binaries, parts[1])
		}
	}
	slices.Sort(folders)
	slices.Sort(binaries)
	if !slices.Contains(folders, "driver") || !slices.Contains(binaries, "keymount-driver") {
		t.Fatalf("git ls-files found folders %q and binaries %q, without driver/ or cmd/keymount-driver: is the listing broken?", folders, binaries)
	}
	return folders, binaries
}

// mdSection returns the part of a Markdown text under the heading line
// title ("## What is here"), up to the next heading of the same or a
// higher level; lines in fenced code blocks are not headings.
func mdSection(t *testing.T, file, text, title string) string {
	t.Helper()
	level := strings.Index(title, " ")
	var out []string
	in, fenced := false, false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && heading.MatchString(line) {
			switch {
			case line == title:
				in = true
				continue
			case in && strings.Index(line, " ") <= level:
				return strings.Join(out, "\n")
			}
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s has no %q section", file, title)
	}
	return strings.Join(out, "\n")
}

// whatIsHereRow is a row of README's "What is here" table: a folder or
// binary in backticks, then what it holds.
var (
	whatIsHereRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|(.*)\\|\\s*$")
	tableRule     = regexp.MustCompile(`^\|[\s:|-]+\|\s*$`)
)

// whatIsHere returns the rows of README's "What is here" table: the folder
// or binary of each (`apis/` as "apis", `cmd/keymount` as "cmd/keymount")
// and how many rows name it.
func whatIsHere(t *testing.T) map[string]int {
	t.Helper()
	rows := map[string]int{}
	header := true
	for line := range strings.Lines(mdSection(t, "README.md", readDoc(t, "../README.md"), "## What is here")) {
		line = strings.TrimSpace(line)
		switch {
		case !strings.HasPrefix(line, "|"):
			continue
		case header:
			header = false // | folder | what lives there |
			continue
		case tableRule.MatchString(line):
			continue
		}
		m := whatIsHereRow.FindStringSubmatch(line)
		if len(m) < 3 || strings.TrimSpace(m[2]) == "" {
			t.Errorf("README's \"What is here\" has a row not of the form | `folder/` | what it holds |: %s", line)
			continue
		}
		rows[strings.TrimSuffix(m[1], "/")]++
	}
	if len(rows) == 0 {
		t.Fatal("README's \"What is here\" section has no table rows")
	}
	return rows
}

// TestREADMEWhatIsHereComplete: README's "What is here" has one row for
// each top-level folder of the repository and one for each binary in cmd/,
// and no row for anything else.
func TestREADMEWhatIsHereComplete(t *testing.T) {
	folders, binaries := repoTree(t)
	want := map[string]string{}
	for _, f := range folders {
		want[f] = "top-level folder `" + f + "/`"
	}
	for _, b := range binaries {
		want["cmd/"+b] = "binary `cmd/" + b + "`"
	}
	rows := whatIsHere(t)
	for name, what := range want {
		if rows[name] == 0 {
			t.Errorf("README's \"What is here\" has no row for the %s: add one saying what it holds", what)
		}
	}
	for name, n := range rows {
		switch {
		case want[name] == "":
			t.Errorf("README's \"What is here\" has a row for `%s`, which is neither a top-level folder of the repository nor a binary in cmd/", name)
		case n > 1:
			t.Errorf("README's \"What is here\" has %d rows for `%s`: merge them", n, name)
		}
	}
}

// wingPackage is an import path under one of the folders whose packages
// docs/architecture.md lists one by one.
var wingPackage = regexp.MustCompile(`^(driver|cluster|controller|provider|internal)(/[a-z0-9_]+)*$`)

// wingPackages returns the Go packages under driver/, cluster/,
// controller/, provider/ and internal/: the directories holding a .go
// file, testdata left out.
func wingPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, top := range []string{"driver", "cluster", "controller", "provider", "internal"} {
		err := filepath.WalkDir(filepath.Join("..", top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || filepath.Ext(path) != ".go" {
				return nil
			}
			rel, err := filepath.Rel("..", filepath.Dir(path))
			if err != nil {
				return err
			}
			if p := filepath.ToSlash(rel); !slices.Contains(out, p) {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(out, "driver/volume") {
		t.Fatalf("found packages %q, without driver/volume: is the walk broken?", out)
	}
	return out
}

// TestArchitectureLayoutComplete: docs/architecture.md's "Layout" names
// every top-level folder and every package under driver/, cluster/,
// controller/, provider/ and internal/, and no package that does not
// exist.
func TestArchitectureLayoutComplete(t *testing.T) {
	named := backticked(mdSection(t, "architecture.md", readDoc(t, "architecture.md"), "## Layout"))
	folders, _ := repoTree(t)
	for _, f := range folders {
		if !named[f+"/"] {
			t.Errorf("architecture.md's Layout does not name the top-level folder `%s/`", f)
		}
	}
	pkgs := wingPackages(t)
	for _, p := range pkgs {
		if !named[p] {
			t.Errorf("architecture.md's Layout does not name the package `%s`: add a line saying what it is", p)
		}
	}
	for n := range named {
		if wingPackage.MatchString(n) && !slices.Contains(pkgs, n) {
			t.Errorf("architecture.md's Layout names `%s`, which is not a package of the repository", n)
		}
	}
}

// codeLink is a Markdown link whose text is a Go name in backticks and
// whose target is a Go file: [`Driver.publish`](../driver/publish.go).
var codeLink = regexp.MustCompile("\\[`([^`]+)`\\]\\(([^)#\\s]+\\.go)\\)")

// declarations returns the top-level names a Go file declares: functions,
// methods as Receiver.Method, types, variables and constants.
func declarations(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				name = receiverName(d.Recv.List[0].Type) + "." + name
			}
			out[name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out[n.Name] = true
					}
				}
			}
		}
	}
	return out
}

// receiverName is the type name of a method's receiver: T of T, *T, T[K]
// and *T[K].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// TestArchitectureWalksNameRealCode: every [`Name`](file.go) link of
// docs/architecture.md names a function, method (Type.Method), type,
// variable or constant declared in that file, so the walks through the
// code fail here when the code they follow is renamed or moved.
func TestArchitectureWalksNameRealCode(t *testing.T) {
	links := codeLink.FindAllStringSubmatch(readDoc(t, "architecture.md"), -1)
	if len(links) < 40 {
		t.Fatalf("architecture.md has %d links to Go code; its two walks have more: is the pattern broken?", len(links))
	}
	decls := map[string]map[string]bool{}
	for _, l := range links {
		name, file := l[1], l[2]
		if _, ok := decls[file]; !ok {
			if _, err := os.Stat(file); err != nil {
				t.Errorf("architecture.md links `%s` to %s, which does not exist", name, file)
				decls[file] = nil
				continue
			}
			decls[file] = declarations(t, file)
		}
		if decls[file] != nil && !decls[file][name] {
			t.Errorf("architecture.md links `%s` to %s, which declares no %s", name, file, name)
		}
	}
}
