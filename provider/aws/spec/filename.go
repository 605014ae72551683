package spec

import (
	"slices"
	"strings"

	"github.com/keymount/keymount/provider/server"
)

// fileName is the name of the file for an objectAlias or objectName, as the
// existing provider builds it: every "/" becomes translate, or when
// translation is off ("") the leading slashes are dropped. ARNs keep their
// colons.
func fileName(src, translate string) string {
	if translate == "" {
		return strings.TrimLeft(src, "/")
	}
	return strings.ReplaceAll(src, "/", translate)
}

// checkFileName returns the file name for src, "" after reporting a name the
// driver would refuse to write.
func checkFileName(p *problems, where, src, translate string) string {
	name := fileName(src, translate)
	if err := server.ValidatePath(name); err != nil {
		p.addf("%s: cannot be written as file %w; set objectAlias to a relative file name", where, err)
		return ""
	}
	return name
}

// fileSet finds two entries writing the same file, or a file that another
// entry needs as a directory.
type fileSet map[string]string // file name -> the entry writing it

func (fs fileSet) add(p *problems, where, name string) {
	if name == "" {
		return
	}
	if prev, ok := fs[name]; ok {
		p.addf("%s: writes file %s, as %s does; set a different objectAlias", where, quote(name), prev)
		return
	}
	fs[name] = where
}

func (fs fileSet) checkDirs(p *problems) {
	names := make([]string, 0, len(fs))
	for name := range fs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for i := range len(name) {
			if name[i] != '/' {
				continue
			}
			if prev, ok := fs[name[:i]]; ok {
				p.addf("%s: writes file %s inside %s, which %s writes as a file; set a different objectAlias", fs[name], quote(name), quote(name[:i]), prev)
				break
			}
		}
	}
}
