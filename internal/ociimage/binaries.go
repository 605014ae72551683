package ociimage

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Binaries says how to build the static binaries every Program carries.
type Binaries struct {
	// Go is the go command.
	Go string
	// ModuleDir is the module's root ("" for the working directory).
	ModuleDir string
	// Version is stamped into the binaries (main.version).
	Version string
	// Output receives the go command's output.
	Output io.Writer
}

// LDFlags are the linker flags of the binaries the images carry, version
// stamped into main.version: no symbol table, no DWARF. The root
// Dockerfile's build stage links with the same (TestDockerfile checks).
func LDFlags(version string) string {
	return "-s -w -X main.version=" + version
}

// Build builds the cmd/ programs of every Program for goos/arch into dir,
// static (CGO_ENABLED=0) and -trimpath, linked with LDFlags, as `make image`
// ships them.
func (b Binaries) Build(goos, arch, dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-ldflags", LDFlags(b.Version), "-o", abs + "/"}
	for _, im := range Programs {
		for _, bin := range im.Bins {
			args = append(args, "./cmd/"+bin)
		}
	}
	cmd := exec.Command(b.Go, args...) //nolint:gosec // G204: the go tool the build was given, building this module's commands
	cmd.Dir = b.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = b.Output, b.Output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the binaries for %s/%s: %w", goos, arch, err)
	}
	return nil
}

// BuildPlatforms builds the binaries for each "linux/<arch>" of platforms
// into root/<arch> and checks that the host's report the version. It
// returns the arches in order and each one's directory.
func (b Binaries) BuildPlatforms(platforms []string, root string) ([]string, map[string]string, error) {
	var arches []string
	dirs := map[string]string{}
	for _, plat := range platforms {
		goos, arch, ok := strings.Cut(strings.TrimSpace(plat), "/")
		if !ok || goos != "linux" {
			return nil, nil, fmt.Errorf("platform %q: want linux/<arch>", plat)
		}
		dirs[arch] = filepath.Join(root, arch)
		if err := b.Build(goos, arch, dirs[arch]); err != nil {
			return nil, nil, err
		}
		if arch == runtime.GOARCH {
			if err := CheckVersion(dirs[arch], b.Version); err != nil {
				return nil, nil, err
			}
		}
		arches = append(arches, arch)
	}
	return arches, dirs, nil
}

// versionArgs is how each program prints its version.
var versionArgs = map[string][]string{
	"keymount-driver":         {"--version"},
	"keymount-provider-local": {"--version"},
	"keymount-provider-aws":   {"--version"},
	"keymount-provider-vault": {"--version"},
	"keymount-controller":     {"--version"},
	"keymount":                {"version"},
}

// CheckVersion runs the host platform's binaries in dir and checks that
// each reports version.
func CheckVersion(dir, version string) error {
	for _, im := range Programs {
		for _, bin := range im.Bins {
			args, ok := versionArgs[bin]
			if !ok {
				return fmt.Errorf("ociimage: no version command known for %s: add it to versionArgs", bin)
			}
			out, err := exec.Command(filepath.Join(dir, bin), args...).CombinedOutput() //nolint:gosec // G204: the binaries this build just wrote
			if err != nil {
				return fmt.Errorf("%s %s: %w (it printed %q)", bin, strings.Join(args, " "), err, out)
			}
			if !bytes.Contains(out, []byte(version)) {
				return fmt.Errorf("%s %s printed %q, want the version %s", bin, strings.Join(args, " "), out, version)
			}
		}
	}
	return nil
}

// BuildAll packs every Program for each arch from the binaries in
// binDirs[arch]: image name → its images, one per arch, in the order of
// arches.
func BuildAll(goos string, arches []string, binDirs map[string]string, version string, ca []byte) (map[string][]v1.Image, error) {
	built := map[string][]v1.Image{}
	for _, arch := range arches {
		for _, im := range Programs {
			img, err := im.Build(goos, arch, version, binDirs[arch], ca)
			if err != nil {
				return nil, err
			}
			built[im.Name] = append(built[im.Name], img)
		}
	}
	return built, nil
}

// Tag turns a version into an image tag: git describe's output is one,
// but a tag may not hold '+'.
func Tag(version string) string {
	return strings.ReplaceAll(version, "+", "-")
}
