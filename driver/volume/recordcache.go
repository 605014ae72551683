package volume

import (
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/driver/targetpath"
)

// recordCache keeps the records the driver read, with what identifies the
// file they came from, so that a republish that is not due reads no file:
// one statx says whether the record on disk is still the one decoded. A
// record is replaced by rename, so a save, or a record damaged or removed by
// anyone else, has another inode, size or change time and is read again.
type recordCache struct {
	mu sync.Mutex
	m  map[string]*cachedRecord // by volume ID
}

type cachedRecord struct {
	rec *Record
	// file identifies record.json as read.
	file fileID
	// data identifies the volume's data directory (its tmpfs root's
	// data/), which a bound target shows.
	data fileID
}

type fileID struct {
	dev, ino, size uint64
	ctimeSec       int64
	ctimeNsec      uint32
}

func statID(dirfd int, path string, flags int) (fileID, unix.Statx_t, error) {
	var stx unix.Statx_t
	err := unix.Statx(dirfd, path, flags|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT,
		unix.STATX_INO|unix.STATX_SIZE|unix.STATX_CTIME, &stx)
	return fileID{
		dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino, size: stx.Size,
		ctimeSec: stx.Ctime.Sec, ctimeNsec: stx.Ctime.Nsec,
	}, stx, err
}

// LoadRecord is Volume.LoadRecord through the manager's cache: it returns
// a copy the caller may change.
func (m *Manager) LoadRecord(v *Volume) (*Record, error) {
	path := filepath.Join(v.Dir, recordFile)
	id, _, err := statID(unix.AT_FDCWD, path, 0)
	if err == nil {
		m.records.mu.Lock()
		c := m.records.m[v.ID]
		m.records.mu.Unlock()
		if c != nil && c.file == id {
			r := *c.rec
			return &r, nil
		}
	}
	m.forget(v.ID)
	rec, err := v.LoadRecord()
	if err != nil || rec == nil {
		return rec, err
	}
	// Cache it only when the file read is the one stat'ed, and the data
	// directory is there to be compared with targets.
	again, _, err1 := statID(unix.AT_FDCWD, path, 0)
	data, _, err2 := statID(unix.AT_FDCWD, v.DataDir, 0)
	if err1 == nil && err2 == nil && again == id {
		c := &cachedRecord{rec: rec, file: id, data: data}
		m.records.mu.Lock()
		m.records.m[v.ID] = c
		m.records.mu.Unlock()
		r := *rec
		return &r, nil
	}
	return rec, nil
}

// forget drops a volume's cached record.
func (m *Manager) forget(volumeID string) {
	m.records.mu.Lock()
	delete(m.records.m, volumeID)
	m.records.mu.Unlock()
}

// Shows reports, from the cache and one statx of the target path, whether
// the target is a mount point showing the volume's data directory: then a
// republish has nothing to bind. false means "not known to": Bind checks
// and binds.
func (m *Manager) Shows(v *Volume, t *targetpath.Target) bool {
	m.records.mu.Lock()
	c := m.records.m[v.ID]
	m.records.mu.Unlock()
	if c == nil {
		return false
	}
	id, stx, err := statID(unix.AT_FDCWD, t.Path, 0)
	if err != nil || stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 || stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false
	}
	return id.dev == c.data.dev && id.ino == c.data.ino
}
