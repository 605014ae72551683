package main

import (
	"debug/buildinfo"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"

	"github.com/keymount/keymount/internal/ociimage"
)

// writeSBOMs writes a CycloneDX SBOM of each image into dir/<name>.cdx.json:
// the image (the index digest, and each platform's), its binaries, and the
// Go modules and toolchain their build information lists.
func writeSBOMs(dir string, images []image, binDirs map[string]string, version, created string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	for i, p := range ociimage.Programs {
		if images[i].name != p.Name {
			return fmt.Errorf("sbom: image %d is %s, want %s", i, images[i].name, p.Name)
		}
		bom, err := imageBOM(p, images[i], binDirs, version, created)
		if err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, p.Name+".cdx.json"))
		if err != nil {
			return err
		}
		enc := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true)
		err = enc.EncodeVersion(bom, cdx.SpecVersion1_6)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sbom of %s: %w", p.Name, err)
		}
	}
	return nil
}

// imageBOM is the SBOM of one image.
func imageBOM(p ociimage.Program, im image, binDirs map[string]string, version, created string) (*cdx.BOM, error) {
	root := cdx.Component{
		BOMRef: "image:" + p.Name, Type: cdx.ComponentTypeContainer, Name: p.Name, Version: version,
		PackageURL: fmt.Sprintf("pkg:oci/%s@%s?tag=%s", p.Name, im.digest, version),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: im.digest.Hex}},
		Properties: &[]cdx.Property{{Name: "keymount:image:reference", Value: im.ref}},
	}
	for _, arch := range slices.Sorted(maps.Keys(im.platforms)) {
		*root.Properties = append(*root.Properties, cdx.Property{Name: "keymount:image:platform:linux/" + arch, Value: im.platforms[arch].String()})
	}
	modules := map[string]cdx.Component{}
	var deps []cdx.Dependency
	var binRefs []string
	for _, bin := range p.Bins {
		comp, mods, err := binaryComponents(bin, binDirs, version)
		if err != nil {
			return nil, err
		}
		var modRefs []string
		for _, m := range mods {
			modules[m.BOMRef] = m
			modRefs = append(modRefs, m.BOMRef)
		}
		binRefs = append(binRefs, comp.BOMRef)
		modules[comp.BOMRef] = comp
		deps = append(deps, cdx.Dependency{Ref: comp.BOMRef, Dependencies: &modRefs})
	}
	deps = append([]cdx.Dependency{{Ref: root.BOMRef, Dependencies: &binRefs}}, deps...)
	var comps []cdx.Component
	for _, ref := range slices.Sorted(maps.Keys(modules)) {
		comps = append(comps, modules[ref])
	}
	bom := cdx.NewBOM()
	// The same image gets the same serial number.
	bom.SerialNumber = uuid.NewSHA1(uuid.NameSpaceURL, []byte(root.PackageURL)).URN()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created, Component: &root,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{Type: cdx.ComponentTypeApplication, Name: "keymount hack/release", Version: version}}},
	}
	bom.Components = &comps
	bom.Dependencies = &deps
	return bom, nil
}

// binaryComponents reads bin's build information (from every platform's
// build: the modules are the same) and returns it as a component and the
// components of its modules and Go toolchain.
func binaryComponents(bin string, binDirs map[string]string, version string) (cdx.Component, []cdx.Component, error) {
	var info *buildinfo.BuildInfo
	for _, arch := range slices.Sorted(maps.Keys(binDirs)) {
		bi, err := buildinfo.ReadFile(filepath.Join(binDirs[arch], bin))
		if err != nil {
			return cdx.Component{}, nil, fmt.Errorf("build information of %s (%s): %w", bin, arch, err)
		}
		if info != nil && !slices.EqualFunc(info.Deps, bi.Deps, func(a, b *debug.Module) bool { return a.Path == b.Path && a.Version == b.Version }) {
			return cdx.Component{}, nil, fmt.Errorf("%s lists other modules for %s than for another platform", bin, arch)
		}
		info = bi
	}
	comp := cdx.Component{
		BOMRef: "binary:" + bin, Type: cdx.ComponentTypeApplication, Name: bin, Version: version,
		PackageURL: fmt.Sprintf("pkg:golang/%s@%s#%s", info.Main.Path, version, strings.TrimPrefix(info.Path, info.Main.Path+"/")),
		Properties: &[]cdx.Property{{Name: "keymount:binary:path", Value: "/usr/local/bin/" + bin}},
	}
	goVersion := info.GoVersion
	mods := []cdx.Component{{
		BOMRef: "pkg:golang/stdlib@" + goVersion, Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: goVersion,
		PackageURL: "pkg:golang/stdlib@" + goVersion,
	}}
	for _, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		purl := fmt.Sprintf("pkg:golang/%s@%s", m.Path, m.Version)
		c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl}
		if m.Sum != "" {
			c.Properties = &[]cdx.Property{{Name: "keymount:go:sum", Value: m.Sum}}
		}
		mods = append(mods, c)
	}
	return comp, mods, nil
}
