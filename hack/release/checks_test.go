package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v1.22.333", "v0.2.0-rc.1", "v1.0.0-alpha-2"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"", "0.1.0", "v0.1", "v1", "v01.2.3", "v1.2.3+meta", "latest", "v1.2.3-", "v1.2.3-rc..1", "aae48a8", "v0.1.0-dirty "} {
		err := checkVersion(v)
		if err == nil || !strings.Contains(err.Error(), "VERSION=v0.1.0") {
			t.Errorf("%q: %v, want a refusal naming the form to use", v, err)
		}
	}
}

func TestChangelogSection(t *testing.T) {
	dir := t.TempDir()
	writeText(t, filepath.Join(dir, "CHANGELOG.md"), `# Changelog

[Keep a Changelog](https://keepachangelog.com/en/1.1.0/) format.

## [Unreleased]

## [1.1.0] - 2026-12-01

### Fixed

- [a link](docs/x.md) at the start of a line stays.

## [1.0.0] - 2026-11-01

- first.

[Unreleased]: https://example.invalid/compare/v1.1.0...HEAD
[1.1.0]: https://example.invalid/v1.1.0
`)
	got, err := changelogSection(dir, "v1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := "### Fixed\n\n- [a link](docs/x.md) at the start of a line stays."; got != want {
		t.Errorf("section 1.1.0 = %q, want %q", got, want)
	}
	if got, err := changelogSection(dir, "v1.0.0"); err != nil || got != "- first." {
		t.Errorf("section 1.0.0 = %q, %v", got, err)
	}
	for _, v := range []string{"v2.0.0", "Unreleased"} {
		if _, err := changelogSection(dir, v); err == nil || !strings.Contains(err.Error(), "YYYY-MM-DD") {
			t.Errorf("%s: %v, want a refusal saying how to add the section", v, err)
		}
	}
}

// TestRepositoryChangelog: the repository's CHANGELOG.md carries the first
// release's section, the version the chart's appVersion names, and an empty
// Unreleased section.
func TestRepositoryChangelog(t *testing.T) {
	notes, err := changelogSection("../..", "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notes, "make release") {
		t.Errorf("the 0.1.0 section does not mention make release:\n%.300s", notes)
	}
	changelog, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(changelog), "## [0.1.0] - 2026-11-28\n") {
		t.Error("CHANGELOG.md has no heading `## [0.1.0] - 2026-11-28`")
	}
	chart, err := os.ReadFile("../../deploy/charts/keymount/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chart), `appVersion: "v0.1.0"`) {
		t.Error(`Chart.yaml's appVersion is not "v0.1.0", the CHANGELOG's latest release`)
	}
}

// TestRefuses: a release is refused, before anything is built, for a
// version that is not semver, a dirty or untracked file in the work tree,
// a version CHANGELOG.md has no section for, or a release directory that
// exists.
func TestRefuses(t *testing.T) {
	repo := t.TempDir()
	writeText(t, filepath.Join(repo, "CHANGELOG.md"), "# Changelog\n\n## [Unreleased]\n\n## [0.3.0] - 2026-11-28\n\n- x.\n")
	writeText(t, filepath.Join(repo, ".gitignore"), "/dist/\n")
	commitAll(t, repo)
	out := filepath.Join(repo, "dist")
	c := config{repo: repo, out: out, registry: "registry.test/km", platforms: []string{"linux/amd64"},
		caBundle: "/nonexistent", goTool: "false"}
	refused := func(version, want string) {
		t.Helper()
		c.version = version
		_, err := release(c)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("release %s: %v, want an error containing %q", version, err, want)
		}
	}
	refused("0.3.0", "not a release version")
	refused("v0.3", "not a release version")
	refused("v0.3.0+build.1", "not a release version")
	refused("v0.4.0", "has no section")

	if err := os.MkdirAll(filepath.Join(out, "v0.3.0"), 0o750); err != nil {
		t.Fatal(err)
	}
	refused("v0.3.0", "remove it to cut v0.3.0 again")
	// The build is reached (and fails on the missing CA bundle) once
	// nothing is in the way: the refusals above are the checks'.
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	refused("v0.3.0", "-ca-bundle")

	writeText(t, filepath.Join(repo, "CHANGELOG.md"), "# changed\n")
	refused("v0.3.0", "CHANGELOG.md")
	refused("v0.3.0", "is not clean")
	run(t, repo, "git", "checkout", "--", "CHANGELOG.md")
	writeText(t, filepath.Join(repo, "stray.go"), "package stray\n")
	refused("v0.3.0", "stray.go")
}

// commitAll commits every file of the work tree in repo (a new repository
// if it is not one yet).
func commitAll(t *testing.T, repo string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repo, ".git")); err != nil {
		run(t, repo, "git", "init", "-q", "-b", "main")
	}
	run(t, repo, "git", "add", "-A")
	run(t, repo, "git", "-c", "user.name=keymount test", "-c", "user.email=test@keymount.invalid", "commit", "-q", "-m", "test commit")
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
