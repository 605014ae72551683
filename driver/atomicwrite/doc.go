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
// Write builds the new generation beside the old one, then renames a fresh
// symlink over ..data. rename(2) replaces the link in one step, so every path
// lookup of dir/token resolves either wholly in the old generation or wholly in
// the new one, and files inside a generation never change after it is
// published. A file a reader has open stays readable after its generation is
// removed. Only then does Write add missing top-level links, drop the links of
// removed files and delete the old generations.
//
// # Consistent-read recipe
//
// A reader that needs several files from the same generation does:
//
//	g1 := os.Readlink(dir/..data)
//	read every file it needs by its normal path (dir/token, dir/db/password)
//	g2 := os.Readlink(dir/..data)
//
// If g1 == g2, all the files came from generation g1 (names are never reused).
// Otherwise a Write happened in between: start over. Each file on its own is
// always intact, whatever the outcome. A lookup that the kernel is in the
// middle of while Write swaps ..data and deletes the old generation can, in
// theory, fail with ENOENT; a reader that gets an error while ..data moved
// also starts over.
//
// # Callers
//
// Write takes an exclusive flock(2) on dir, so concurrent writers of one
// volume, in one process or several, run one after the other. Read takes no
// lock. Files are not fsynced: a secrets volume is a tmpfs that is refilled
// after a node restart.
package atomicwrite
