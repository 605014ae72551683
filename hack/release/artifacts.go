package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// packageChart packages deploy/charts/keymount into dist with the
// release's version (without the v) and appVersion (the image tag).
func packageChart(repo, dist, version string) error {
	ch, err := loader.LoadDir(filepath.Join(repo, "deploy", "charts", "keymount"))
	if err != nil {
		return fmt.Errorf("load the chart: %w", err)
	}
	ch.Metadata.Version = strings.TrimPrefix(version, "v")
	ch.Metadata.AppVersion = version
	if err := ch.Validate(); err != nil {
		return fmt.Errorf("the chart: %w", err)
	}
	if _, err := chartutil.Save(ch, dist); err != nil {
		return fmt.Errorf("package the chart: %w", err)
	}
	return nil
}

// manifestSets are the rendered manifests of a release: file → the
// kustomization's resources and components under deploy/.
var manifestSets = []struct {
	file       string
	resources  []string
	components []string
}{
	{file: "keymount.yaml", resources: []string{"."}},
	{file: "keymount-with-controller.yaml", resources: []string{"."}, components: []string{"components/controller", "components/controller-admission", "components/push-admission"}},
	{file: "keymount-provider-aws.yaml", resources: []string{"providers/aws"}},
	{file: "keymount-provider-vault.yaml", resources: []string{"providers/vault"}},
}

// renderManifests renders deploy/'s kustomizations into dir, every
// keymount image named <registry>/<name> and pinned by its index digest.
func renderManifests(repo, dir, registry string, images []image) error {
	mem := filesys.MakeFsInMemory()
	root := filepath.Join(repo, "deploy")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/deploy", filepath.ToSlash(rel)), data)
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	for _, set := range manifestSets {
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
		for _, r := range set.resources {
			k += "  - " + path.Join("../deploy", r) + "\n"
		}
		if len(set.components) > 0 {
			k += "components:\n"
			for _, c := range set.components {
				k += "  - " + path.Join("../deploy", c) + "\n"
			}
		}
		k += "images:\n"
		for _, im := range images {
			k += fmt.Sprintf("  - name: ghcr.io/keymount/%s\n    newName: %s/%s\n    digest: %s\n", im.name, registry, im.name, im.digest)
		}
		if err := mem.WriteFile("/release/kustomization.yaml", []byte(k)); err != nil {
			return err
		}
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/release")
		if err != nil {
			return fmt.Errorf("render %s: %w", set.file, err)
		}
		out, err := m.AsYaml()
		if err != nil {
			return err
		}
		if err := checkPinned(set.file, string(out), registry, images); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, set.file), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkPinned fails when a keymount image in the manifests is not pinned
// by the release's digest.
func checkPinned(file, manifests, registry string, images []image) error {
	for _, line := range strings.Split(manifests, "\n") {
		ref, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), "image: ")
		if !ok || !strings.Contains(ref, "/keymount-") {
			continue
		}
		pinned := false
		for _, im := range images {
			pinned = pinned || ref == registry+"/"+im.name+"@"+im.digest.String()
		}
		if !pinned {
			return fmt.Errorf("%s: image %s is not one of the release's pinned by digest: name it ghcr.io/keymount/<image>:<tag> in deploy/", file, ref)
		}
	}
	return nil
}

// writeNotes writes the release notes: CHANGELOG.md's section, the images
// with their digests and how to publish them.
func writeNotes(file string, c config, notes string, images []image) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# keymount %s\n\n%s\n\n## Images\n\n", c.version, notes)
	b.WriteString("Each image is a multi-platform index (" + strings.Join(c.platforms, ", ") + ") in an OCI layout under `images/`.\n\n")
	b.WriteString("| image | index digest |\n| --- | --- |\n")
	for _, im := range images {
		fmt.Fprintf(&b, "| `%s` | `%s` |\n", im.ref, im.digest)
	}
	b.WriteString("\nPublish them to your registry under the same digests (docs/releasing.md):\n\n```sh\n")
	for _, im := range images {
		fmt.Fprintf(&b, "crane push images/%s REGISTRY/%s:%s\n", im.name, im.name, c.version)
	}
	b.WriteString("```\n\nVerify the files with `sha256sum -c SHA256SUMS`.\n")
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// writeSums writes dist/SHA256SUMS over every file under dist, in the
// format `sha256sum -c` reads.
func writeSums(dist string) error {
	var files []string
	err := filepath.WalkDir(dist, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dist, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(dist, f))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	return os.WriteFile(filepath.Join(dist, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
