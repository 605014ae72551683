package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/mod/semver"
)

// releaseVersion is vMAJOR.MINOR.PATCH with an optional pre-release: no
// build metadata, which an image tag cannot hold.
var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// checkVersion refuses a version that is not vX.Y.Z[-pre] semver.
func checkVersion(v string) error {
	if !releaseVersion.MatchString(v) || !semver.IsValid(v) {
		return fmt.Errorf("VERSION %q is not a release version: want semantic versioning with a leading v and no build metadata, e.g. make release VERSION=v0.1.0 (or v0.2.0-rc.1)", v)
	}
	return nil
}

// checkClean refuses a work tree with changes or untracked files that git
// does not ignore: a release is built from a commit, nothing else.
func checkClean(repo string) error {
	cmd := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=normal")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git status in %s: %w (a release is cut from a git work tree)", repo, err)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("the work tree %s is not clean: commit or stash these first:\n%s", repo, out)
	}
	return nil
}

// commitTime is HEAD's commit time (seconds since the epoch): the SBOMs'
// timestamp, so the same commit gives the same files.
func commitTime(repo string) (string, error) {
	out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%cI").Output()
	if err != nil {
		return "", fmt.Errorf("git log in %s: %w", repo, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// linkDefinition is a Markdown link reference definition ("[0.1.0]: URL"),
// which Keep a Changelog puts after the last section.
var linkDefinition = regexp.MustCompile(`^\[[^\]]+\]:\s`)

// changelogSection returns the body of CHANGELOG.md's section of version
// ("## [X.Y.Z] - date"): the release notes.
func changelogSection(repo, version string) (string, error) {
	path := filepath.Join(repo, "CHANGELOG.md")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	heading := "## [" + strings.TrimPrefix(version, "v") + "]"
	var body []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, heading):
			in = true
			continue
		case in && (strings.HasPrefix(line, "## ") || linkDefinition.MatchString(line)):
			in = false
		}
		if in {
			body = append(body, line)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	notes := strings.TrimSpace(strings.Join(body, "\n"))
	if notes == "" {
		return "", fmt.Errorf("%s has no section %q (or it is empty): move the Unreleased entries under \"%s - YYYY-MM-DD\" and commit first", path, heading, heading)
	}
	return notes, nil
}
