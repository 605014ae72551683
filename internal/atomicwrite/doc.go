// Package atomicwrite puts a provider's files into a secrets volume directory
// so that a reader never sees a mix of two versions.
//
// # Layout
//
// Write owns every entry of the volume directory whose name starts with "..":
//
//	dir/
//	  ..2026_11_21_10_52_01.123456789.4711/   generation: the real files, never modified once written
//	    db/password
//	    token
//	  ..data -> ..2026_11_21_10_52_01.123456789.4711
//	  db     -> ..data/db
//	  token  -> ..data/token
//
// A generation directory holds one complete file set. Its name is a UTC
// timestamp plus a random suffix, so a name is never reused. The ..data symlink
// names the current generation, and every top-level name of the file set is a
// symlink through ..data. Provider paths may therefore not start with "..":
// ValidatePath rejects them.
//
// # Why readers never see a mix
//
// Write builds the new generation beside the old one, links the top-level
// names the new generation adds, then renames a fresh symlink over ..data.
// rename(2) replaces the link in one step, so every path lookup of dir/token
// resolves either wholly in the old generation or wholly in the new one, and
// files inside a generation never change after it is published. Only then
// does Write drop the links of removed files.
//
// # Crashes
//
// A process killed at any instant of a Write leaves ..data naming one
// complete generation, old or new, with every one of its top-level names
// linked: new names are linked before the swap (they dangle until it, as in
// kubelet's own atomic writer), old names are removed after it. What a kill
// can leave behind is never wrong, only extra: a generation not swapped in,
// a link of a name that generation would have added, a temporary link.
// The next Write removes them, and Repair does so without writing.
//
// A replaced generation is not deleted at once: a lookup that read ..data just
// before the swap may be descheduled before it reaches the file, and would
// fail with ENOENT if the generation were gone (the proof test sees this within
// a few thousand reads). Write records the time a generation was retired in
// its mtime and deletes it on the first Write, changed or not, that comes
// once it has been retired for five seconds. Until then a rotated-out value
// stays readable under its ..<generation> path by whoever can read the volume.
//
// # Consistent-read recipe
//
// A reader that needs several files from the same generation does:
//
//	g1 := os.Readlink(dir/..data)
//	read every file it needs by its normal path (dir/token, dir/db/password)
//	g2 := os.Readlink(dir/..data)
//
// If g1 == g2, all the files came from generation g1: ..data only ever moves
// to a new generation, and names are never reused.
// Otherwise a Write happened in between: start over. Each file on its own is
// always intact, whatever the outcome.
//
// # Groups
//
// WriteGroup puts the volume directory and every directory and file of a
// generation in one group (a pod's fsGroup), owner unchanged, modes as
// Write gives them: files the modes asked for, directories 0755. The group
// is set on each entry before the generation is published, and a generation
// in another group does not count as holding the same files, so changing the
// group writes and swaps in a new generation like any other change.
//
// # Callers
//
// Write takes an exclusive flock(2) on dir, so concurrent writers of one
// volume, in one process or several, run one after the other. Read takes no
// lock. Files are not fsynced: a secrets volume is a tmpfs that is refilled
// after a node restart.
package atomicwrite
