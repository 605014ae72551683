package volume

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/keymount/keymount/internal/killpoint"
)

const recordFile = "record.json"

// Object is one mounted object and its version as reported by the provider.
type Object struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// Record is what the driver knows about a mounted volume. It holds no
// secret material: names, versions and times only.
type Record struct {
	VolumeID       string   `json:"volumeID"`
	TargetPath     string   `json:"targetPath"`
	PodName        string   `json:"podName"`
	PodNamespace   string   `json:"podNamespace"`
	PodUID         string   `json:"podUID,omitempty"`
	ServiceAccount string   `json:"serviceAccount,omitempty"`
	Class          string   `json:"secretProviderClass"`
	Provider       string   `json:"provider"`
	ReadOnly       bool     `json:"readOnly"`
	Objects        []Object `json:"objects"`
	// MountGroup is the group the files were written with: the pod's
	// fsGroup kubelet sent as volume_mount_group, in decimal; "" for none
	// (root's group).
	MountGroup string `json:"volumeMountGroup,omitempty"`
	// Adopted says the volume is a tmpfs the upstream driver mounted at the
	// target before the switch, written in place (see Manager.Adoptable);
	// AdoptedDevice is that tmpfs's device.
	Adopted       bool   `json:"adopted,omitempty"`
	AdoptedDevice uint64 `json:"adoptedDevice,omitempty"`
	// ProviderWrites says the provider wrote the files into the target
	// itself (returned none: the legacy mode of the provider contract), so
	// every refresh gives it a writable stage there.
	ProviderWrites bool `json:"providerWrites,omitempty"`
	// Generation counts content changes written into the volume.
	Generation int64 `json:"generation"`
	// LastMount is the time of the last successful provider call.
	LastMount time.Time `json:"lastMount"`
	// LastChange is the time the files last changed.
	LastChange time.Time `json:"lastChange"`
	// LastError is the last failed refresh, cleared by the next success;
	// Failures counts the refreshes that failed in a row (their retries
	// back off).
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
	Failures      int       `json:"failures,omitempty"`
	// CutBackoff is Failures when a trigger last cut the backoff short
	// (rotation.State.CutBackoff).
	CutBackoff int `json:"cutBackoff,omitempty"`
	// HandledClassRefresh and HandledPodRefresh are the values of the
	// refresh trigger annotation of the class and of the pod that the
	// volume last acted on: a new value is a request to refresh.
	HandledClassRefresh string `json:"handledClassRefresh,omitempty"`
	HandledPodRefresh   string `json:"handledPodRefresh,omitempty"`
}

// ErrCorruptRecord is wrapped when a record cannot be read back: truncated,
// not JSON, or about another volume. The caller rebuilds it from what is
// mounted.
var ErrCorruptRecord = errors.New("corrupt volume record")

// maxRecordBytes bounds what LoadRecord reads; a real record is a few KiB.
const maxRecordBytes = 4 << 20

// LoadRecord returns the volume's record, or (nil, nil) when none was saved:
// the volume has never been published successfully. A record that cannot be
// decoded, or that names another volume, is an error wrapping
// ErrCorruptRecord.
func (v *Volume) LoadRecord() (*Record, error) {
	f, err := os.Open(filepath.Join(v.Dir, recordFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read volume record: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read volume record: %w", err)
	}
	return decodeRecord(v.ID, data)
}

// decodeRecord parses a record of volume id.
func decodeRecord(id string, data []byte) (*Record, error) {
	if len(data) > maxRecordBytes {
		return nil, fmt.Errorf("%w of volume %s: larger than %d bytes", ErrCorruptRecord, id, maxRecordBytes)
	}
	r := &Record{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%w of volume %s: %w", ErrCorruptRecord, id, err)
	}
	if r.VolumeID != id {
		return nil, fmt.Errorf("%w: the record in the directory of volume %s names volume %q", ErrCorruptRecord, id, r.VolumeID)
	}
	// A time JSON can carry but not encode (a zone offset of a day or more,
	// a year past 9999) would make the record unsavable: rebuild it instead.
	for _, t := range []time.Time{r.LastMount, r.LastChange, r.LastErrorTime} {
		if _, err := t.MarshalJSON(); err != nil {
			return nil, fmt.Errorf("%w of volume %s: %w", ErrCorruptRecord, id, err)
		}
	}
	return r, nil
}

// SaveRecord replaces the volume's record atomically. Whatever holds the
// record's name or its temporary name (a directory, a symlink) is removed
// first, so a damaged record never stays unwritable.
func (v *Volume) SaveRecord(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode volume record: %w", err)
	}
	tmp := filepath.Join(v.Dir, "."+recordFile+".tmp")
	dst := filepath.Join(v.Dir, recordFile)
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("write volume record: %w", err)
	}
	if err := writeNew(tmp, data); err != nil {
		return fmt.Errorf("write volume record: %w", err)
	}
	killpoint.Reached("record.written")
	if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		if err := os.RemoveAll(dst); err != nil {
			return fmt.Errorf("replace damaged volume record: %w", err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("save volume record: %w", err)
	}
	killpoint.Reached("record.saved")
	return nil
}

// writeNew creates path, which must not exist, with data.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}
