package driver

import (
	"errors"
	"fmt"
	"path"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/template"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// errInvalidTemplate marks a keymount.io/template.<fileName> annotation of
// the class that is invalid or does not render: the publish fails with
// InvalidArgument; a refresh keeps the volume's files.
var errInvalidTemplate = errors.New("invalid template")

// withTemplates adds to the provider's files one file per
// keymount.io/template.<fileName> annotation of the class, rendered from
// all of them; a template overrides a provider file of the same path. The
// files are then written together, in one generation.
func withTemplates(spc *secretsstorev1.SecretProviderClass, files []*v1alpha1.File) ([]*v1alpha1.File, error) {
	tmpls, err := template.FromAnnotations(spc.Annotations)
	if err != nil {
		return nil, fmt.Errorf("%w: SecretProviderClass %s/%s: %w", errInvalidTemplate, spc.Namespace, spc.Name, err)
	}
	if len(tmpls) == 0 {
		return files, nil
	}
	objects := make(map[string][]byte, len(files))
	for _, f := range files {
		objects[path.Clean(f.GetPath())] = f.GetContents()
	}
	rendered, err := template.RenderAll(tmpls, objects)
	if err != nil {
		return nil, fmt.Errorf("%w: SecretProviderClass %s/%s: %w", errInvalidTemplate, spc.Namespace, spc.Name, err)
	}
	out := make([]*v1alpha1.File, 0, len(files)+len(rendered))
	for _, f := range files {
		if _, ok := rendered[path.Clean(f.GetPath())]; !ok {
			out = append(out, f)
		}
	}
	for _, t := range tmpls {
		out = append(out, &v1alpha1.File{Path: t.Target, Mode: defaultFileMode, Contents: rendered[t.Target]})
	}
	return out, nil
}
