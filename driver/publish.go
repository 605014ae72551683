package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/internal/killpoint"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/rotation"
)

// publish runs the publish pipeline. A first publish that fails leaves
// nothing mounted; a republish that fails keeps the files the pod already
// has, records the failure and succeeds, because kubelet deletes the mount
// directory of a volume whose republish fails. The cluster side hears of
// the outcome after the volume lock is released, asynchronously, but for
// the Secrets a first publish syncs that do not exist yet.
func (d *Driver) publish(ctx context.Context, req *csi.NodePublishVolumeRequest) error {
	p, err := parsePublishRequest(req, d.cfg.KubeletRootDir)
	if err != nil {
		return err
	}
	release, err := d.locks.acquire(p.volumeID, p.targetPath)
	if err != nil {
		return err
	}
	o, err := func() (*Outcome, error) {
		defer release() // also when a bug panics: the volume must not stay locked
		return d.publishLocked(ctx, p)
	}()
	if o != nil {
		d.reporter.syncMissing(ctx, o)
		d.reporter.published(o)
	}
	if err == nil {
		d.held.hold(p, req)
	}
	return err
}

// publishLocked runs the pipeline under the volume lock and returns what the
// cluster side should hear, nil for nothing.
func (d *Driver) publishLocked(ctx context.Context, p *publishRequest) (*Outcome, error) {
	killpoint.Reached("publish.locked")
	v := d.deps.Volumes.Lookup(p.volumeID)
	prev, err := d.loadRecord(v, p)
	if err != nil {
		return nil, err
	}
	if err := sameVolume(prev, p); err != nil {
		return nil, err
	}
	dec := d.decide(prev, p)
	if prev != nil {
		d.deps.Metrics.RefreshDecision(dec.Verdict)
		klog.V(5).InfoS("refresh decision", "volumeID", p.volumeID, "decision", dec.Verdict)
		if !dec.Refreshes() {
			return nil, d.keepMounted(v, p, prev)
		}
	}
	start := d.deps.Clock.Now()
	o, err := d.refresh(ctx, v, p, prev, dec)
	if prev != nil {
		d.reconciled(o, prev, err, start)
	}
	switch {
	case err == nil:
		return o, nil
	case prev == nil:
		// Nothing is mounted: the cluster side only tells the pod why.
		return &Outcome{
			VolumeID: p.volumeID, TargetPath: p.targetPath,
			PodName: p.podName, PodNamespace: p.podNamespace, PodUID: p.podUID,
			ClassName: p.className, Class: o.Class, First: true, Err: err,
		}, err
	case errors.Is(err, errConflict), errors.Is(err, volume.ErrTargetInUse):
		// The volume is not what the request says, or the target shows
		// something else: saying OK would leave the pod without its files.
		return nil, err
	}
	return d.keepAfterFailure(v, p, prev, o.Class, dec, err), nil
}

// decide decides whether a republish refreshes the volume of prev: the
// refresh policy (nil: every republish), or the pod's fsGroup changed (the
// files are rewritten in the new group). For a first publish (prev nil) it
// returns the trigger values now set, which the record keeps as handled.
func (d *Driver) decide(prev *volume.Record, p *publishRequest) rotation.Decision {
	pol := d.deps.Refresh
	switch {
	case pol == nil:
		return rotation.Decision{Verdict: rotation.DecisionDue}
	case prev == nil:
		t, problems := pol.Current(p.podNamespace, p.podName, p.className)
		return rotation.Decision{Verdict: rotation.DecisionDue, Triggers: t, Problems: problems}
	}
	dec := pol.Decide(rotation.State{
		VolumeID: prev.VolumeID, LastRefresh: prev.LastMount, Failures: prev.Failures, LastFailure: prev.LastErrorTime,
		Handled: rotation.Triggers{Class: prev.HandledClassRefresh, Pod: prev.HandledPodRefresh}, CutBackoff: prev.CutBackoff,
	}, p.podNamespace, p.podName, p.className, d.deps.Clock.Now())
	if !dec.Refreshes() && prev.MountGroup != p.mountGroup {
		dec.Verdict = rotation.DecisionDue
	}
	return dec
}

// reconciled counts a refresh of a mounted volume for upstream's rotation
// metrics.
func (d *Driver) reconciled(o *Outcome, prev *volume.Record, err error, start time.Time) {
	provider := prev.Provider
	if o != nil && o.Class != nil {
		provider = string(o.Class.Spec.Provider)
	}
	changed := o != nil && o.Changed
	errType := ""
	if err != nil {
		errType = rotationErrorType(err)
	}
	d.deps.Metrics.RotationReconcile(provider, changed && err == nil, errType, d.deps.Clock.Since(start))
}

// keepMounted answers a republish that is not due: the target must still
// show the volume (a target someone unmounted is bound again); nothing is
// fetched, written or reported.
func (d *Driver) keepMounted(v *volume.Volume, p *publishRequest, prev *volume.Record) error {
	if prev.Adopted || d.deps.Volumes.Shows(v, p.target) {
		return nil // an adopted volume: the upstream driver's tmpfs is the target itself
	}
	return d.deps.Volumes.Bind(v, p.target, p.readOnly)
}

// refresh resolves the class, calls the provider, writes what it returns and
// makes sure the target shows the volume. The outcome always carries the
// class when it could be resolved, also with an error.
func (d *Driver) refresh(ctx context.Context, v *volume.Volume, p *publishRequest, prev *volume.Record, dec rotation.Decision) (*Outcome, error) {
	o := &Outcome{}
	spc, err := d.deps.Classes.Resolve(ctx, p.podNamespace, p.className)
	if err != nil {
		return o, classLookupFailed(err)
	}
	o.Class = spc
	if prev != nil && prev.Provider != "" && prev.Provider != string(spc.Spec.Provider) {
		return o, fmt.Errorf("%w: volume %s was mounted by provider %q and its class now names %q: "+
			"delete and recreate the pod to switch providers", errConflict, p.volumeID, prev.Provider, spc.Spec.Provider)
	}
	mreq, err := buildMountRequest(spc, p, currentObjects(prev))
	if err != nil {
		return o, err
	}
	switch {
	case prev != nil && prev.Adopted:
		return d.refreshAdopted(ctx, v, spc, p, mreq, prev, prev.AdoptedDevice, dec, o)
	case prev == nil:
		a, err := d.adoptable(ctx, p)
		if err != nil {
			return o, err
		}
		if a != nil {
			return d.refreshAdopted(ctx, v, spc, p, mreq, nil, a.Device, dec, o)
		}
		if err := d.mountNew(v, p); err != nil {
			return o, err
		}
		defer d.cleanUpAfterPanic(v, p)
	default:
		if err := d.deps.Volumes.Bind(v, p.target, p.readOnly); err != nil {
			// A republish re-binds a target someone unmounted, before
			// anything is fetched, so the record never runs ahead of what
			// the pod sees.
			return o, err
		}
	}
	rec, changed, err := d.fetchAndWrite(ctx, v, spc, p, mreq, prev, dec, v.DataDir)
	if err == nil && prev == nil {
		err = d.deps.Volumes.Bind(v, p.target, p.readOnly)
	}
	killpoint.Reached("publish.done")
	if err != nil {
		if prev == nil {
			d.removeAfterFailure(v, p)
		}
		return o, err
	}
	return newOutcome(v, spc, rec, prev, changed, dec, nil), nil
}

// adoptable returns the target's tmpfs when it is a volume the upstream
// driver published before the switch: a whole tmpfs mounted at the target
// that holds upstream's ..data layout, or (a provider that wrote its own
// files leaves no layout) whose pod status from the upstream driver says
// it is mounted there. Any other mount at the target is not adopted: the
// first publish then fails with AlreadyExists, as before.
func (d *Driver) adoptable(ctx context.Context, p *publishRequest) (*volume.Adoption, error) {
	a, err := d.deps.Volumes.Adoptable(p.target)
	if err != nil || a == nil || a.UpstreamLayout {
		return a, err
	}
	if d.deps.Cluster == nil {
		return nil, nil
	}
	mounted, err := d.deps.Cluster.UpstreamMounted(ctx, p.podNamespace, p.podName, p.className, p.targetPath)
	if err != nil || !mounted {
		return nil, err
	}
	return a, nil
}

// refreshAdopted refreshes a volume the upstream driver mounted before the
// switch (see volume.Manager.Adoptable): the provider's files are written
// into that tmpfs in place, which the pod's running containers hold, and
// nothing is mounted over it. The first call adopts it: a record naming
// its device is kept in the state directory.
func (d *Driver) refreshAdopted(ctx context.Context, v *volume.Volume, spc *secretsstorev1.SecretProviderClass,
	p *publishRequest, mreq *v1alpha1.MountRequest, prev *volume.Record, dev uint64, dec rotation.Decision, o *Outcome,
) (*Outcome, error) {
	if err := d.deps.Volumes.PrepareAdopted(v); err != nil {
		return o, err
	}
	openDir := func() (string, func(), error) {
		f, err := d.deps.Volumes.OpenAdopted(p.target, dev)
		if err != nil {
			return "", nil, err
		}
		// The writer locks and walks a directory by path, not through a
		// /proc magic link: the path the checked descriptor resolved to.
		dir, err := os.Readlink(targetpath.ProcPath(f))
		if err != nil {
			_ = f.Close()
			return "", nil, fmt.Errorf("adopted volume at %s: %w", p.targetPath, err)
		}
		return dir, func() { _ = f.Close() }, nil
	}
	rec, changed, err := d.fetchAndWriteInto(ctx, v, spc, p, mreq, prev, dec, openDir, func(r *volume.Record) {
		r.Adopted, r.AdoptedDevice = true, dev
	})
	if err != nil {
		if prev == nil {
			if rerr := d.deps.Volumes.RemoveAdopted(v); rerr != nil {
				klog.ErrorS(rerr, "cleaning up after a failed adoption", "volumeID", v.ID)
			}
		}
		return o, err
	}
	if prev == nil {
		klog.InfoS("adopted a volume the upstream driver mounted", "volumeID", v.ID, "targetPath", p.targetPath)
	}
	out := newOutcome(v, spc, rec, prev, changed, dec, nil)
	out.DataDir = p.targetPath // the files are in the adopted tmpfs
	return out, nil
}

// mountNew mounts a fresh tmpfs for a first publish, after checking that the
// target is free, so that nothing is fetched for a target that cannot be used.
func (d *Driver) mountNew(v *volume.Volume, p *publishRequest) error {
	if err := d.deps.Volumes.CheckTarget(v, p.target); err != nil {
		return err
	}
	killpoint.Reached("publish.checked-target")
	return d.deps.Volumes.MountTmpfs(v)
}

// fetchAndWrite calls the provider and writes its files, holding a provider
// slot (bounded concurrency and bytes in flight) until the response is
// written and dropped.
func (d *Driver) fetchAndWrite(ctx context.Context, v *volume.Volume, spc *secretsstorev1.SecretProviderClass,
	p *publishRequest, mreq *v1alpha1.MountRequest, prev *volume.Record, dec rotation.Decision, dir string,
) (*volume.Record, bool, error) {
	return d.fetchAndWriteInto(ctx, v, spc, p, mreq, prev, dec, func() (string, func(), error) { return dir, func() {}, nil }, nil)
}

// fetchAndWriteInto is fetchAndWrite with the directory of the volume's
// files opened when it is needed (an adopted volume's tmpfs, checked to be
// the recorded one each time), and a last touch to the record before it is
// saved.
func (d *Driver) fetchAndWriteInto(ctx context.Context, v *volume.Volume, spc *secretsstorev1.SecretProviderClass,
	p *publishRequest, mreq *v1alpha1.MountRequest, prev *volume.Record, dec rotation.Decision,
	openDir func() (string, func(), error), touch func(*volume.Record),
) (*volume.Record, bool, error) {
	release, err := d.slots.acquire(ctx, string(spc.Spec.Provider))
	if err != nil {
		return nil, false, err
	}
	defer release()
	resp, files, providerWrites, err := d.mount(ctx, spc, p, mreq, prev, openDir)
	if err != nil {
		return nil, false, err
	}
	killpoint.Reached("publish.provider-answered")
	if files, err = withTemplates(spc, files); err != nil {
		return nil, false, err
	}
	dir, closeDir, err := openDir()
	if err != nil {
		return nil, false, err
	}
	changed, err := d.write(v, dir, p, files)
	closeDir()
	if err != nil {
		return nil, false, err
	}
	rec := d.newRecord(p, spc, resp, prev, changed)
	rec.ProviderWrites = providerWrites
	rec.HandledClassRefresh, rec.HandledPodRefresh = dec.Triggers.Class, dec.Triggers.Pod
	if touch != nil {
		touch(rec)
	}
	if err := v.SaveRecord(rec); err != nil {
		return nil, false, err
	}
	logPublished(p, spc, rec, prev == nil, changed)
	return rec, changed, nil
}

// mount calls the provider and returns its answer and the files of the
// volume. A provider that returns no files has written them into
// target_path itself (the legacy mode of the provider contract, the
// existing AWS provider's default): the call is made with target_path
// naming a writable stage beside the target (volume.Stage), holding a copy
// of the volume's current files, on a first publish, where the mode is not
// known yet, and on every republish of a volume whose provider wrote its
// own files before; what the provider left there becomes the volume's
// files. providerWrites says that this was the case.
func (d *Driver) mount(ctx context.Context, spc *secretsstorev1.SecretProviderClass, p *publishRequest,
	mreq *v1alpha1.MountRequest, prev *volume.Record, openDir func() (string, func(), error),
) (resp *v1alpha1.MountResponse, files []*v1alpha1.File, providerWrites bool, err error) {
	if prev != nil && !prev.ProviderWrites {
		resp, err = d.deps.Providers.Mount(ctx, string(spc.Spec.Provider), mreq)
		return resp, resp.GetFiles(), false, err
	}
	stage, err := d.stage(p, prev, openDir)
	if err != nil {
		return nil, nil, false, err
	}
	// A panic in the call must not leave the stage behind.
	defer func() {
		if stage != nil {
			_ = stage.Discard()
		}
	}()
	mreq.TargetPath = stage.Path
	resp, err = d.deps.Providers.Mount(ctx, string(spc.Spec.Provider), mreq)
	mreq.TargetPath = p.targetPath
	staged, readErr, unstageErr := stage.Finish(d.cfg.ProviderMaxRecvBytes)
	stage = nil
	switch {
	case err != nil || unstageErr != nil:
		return nil, nil, false, errors.Join(err, unstageErr)
	case len(resp.GetFiles()) > 0:
		// The normal mode: whatever is in the stage is not the volume's.
		return resp, resp.GetFiles(), false, nil
	case readErr != nil:
		return nil, nil, false, fmt.Errorf("provider %q returned no files and wrote its own: %w", spc.Spec.Provider, readErr)
	}
	files = make([]*v1alpha1.File, 0, len(staged))
	for _, f := range staged {
		files = append(files, &v1alpha1.File{Path: f.Path, Mode: int32(f.Mode.Perm()), Contents: f.Contents}) //nolint:gosec // G115: permission bits fit
	}
	return resp, files, len(files) > 0 || (prev != nil && prev.ProviderWrites), nil
}

// stage mounts the stage of a provider call that may write its own files:
// on a refresh it holds a copy of the volume's current files, where the
// provider reads back the objects that did not change.
func (d *Driver) stage(p *publishRequest, prev *volume.Record, openDir func() (string, func(), error)) (*volume.Stage, error) {
	var current []volume.StagedFile
	if prev != nil {
		dir, closeDir, err := openDir()
		if err != nil {
			return nil, err
		}
		files, err := atomicwrite.Read(dir)
		closeDir()
		if err != nil {
			return nil, fmt.Errorf("read the volume's files for the provider's stage: %w", err)
		}
		current = make([]volume.StagedFile, len(files))
		for i, f := range files {
			current[i] = volume.StagedFile{Path: f.Path, Mode: f.Mode, Contents: f.Contents}
		}
	}
	return d.deps.Volumes.Stage(p.target, current)
}

// write puts the provider's files into the volume, in the request's mount
// group (the pod's fsGroup) or else in the driver's own group (root's), as
// before VOLUME_MOUNT_GROUP. A write whose swap happened but whose clean-up
// failed counts as written: the pod sees the new generation, and the next
// write repairs the rest.
func (d *Driver) write(v *volume.Volume, dir string, p *publishRequest, files []*v1alpha1.File) (bool, error) {
	if len(files) == 0 {
		return false, nil
	}
	wf, err := toWriterFiles(files)
	if err != nil {
		return false, err
	}
	if need, limit := atomicwrite.Need(wf), d.deps.Volumes.SizeBytes(); need > limit {
		return false, fmt.Errorf("%w: the provider returned %d files that take %d bytes of tmpfs "+
			"(each file rounded up to whole pages), more than a volume holds (%d): raise the driver's --tmpfs-size",
			errTooLarge, len(wf), need, limit)
	}
	gid := p.gid
	if gid == noMountGroup {
		gid = os.Getegid()
	}
	changed, err := atomicwrite.WriteGroup(dir, wf, gid)
	if err != nil && changed {
		klog.ErrorS(err, "new volume content is live, cleaning up the old failed; the next write retries", "volumeID", v.ID)
		return true, nil
	}
	return changed, err
}

func newOutcome(v *volume.Volume, spc *secretsstorev1.SecretProviderClass, rec *volume.Record, prev *volume.Record,
	changed bool, dec rotation.Decision, cause error,
) *Outcome {
	o := &Outcome{
		VolumeID: rec.VolumeID, TargetPath: rec.TargetPath, DataDir: v.DataDir,
		PodName: rec.PodName, PodNamespace: rec.PodNamespace, PodUID: rec.PodUID,
		ClassName: rec.Class, Class: spc, Objects: rec.Objects, First: prev == nil, Changed: changed, Err: cause,
		LastRefresh: rec.LastMount, Triggered: dec.Verdict == rotation.DecisionTriggered,
		Handled: rotation.Triggers{Class: rec.HandledClassRefresh, Pod: rec.HandledPodRefresh},
	}
	if prev != nil {
		o.Previous = prev.Objects
	}
	for _, e := range dec.Problems {
		o.PolicyProblems = append(o.PolicyProblems, e.Error())
	}
	return o
}

func (d *Driver) newRecord(p *publishRequest, spc *secretsstorev1.SecretProviderClass, resp *v1alpha1.MountResponse,
	prev *volume.Record, changed bool,
) *volume.Record {
	now := d.deps.Clock.Now()
	rec := &volume.Record{
		VolumeID: p.volumeID, TargetPath: p.targetPath, ReadOnly: p.readOnly,
		PodName: p.podName, PodNamespace: p.podNamespace, PodUID: p.podUID, ServiceAccount: p.serviceAccount,
		Class: p.className, Provider: string(spc.Spec.Provider), MountGroup: p.mountGroup,
		LastMount: now, LastChange: now, Generation: 1,
	}
	for _, o := range resp.GetObjectVersion() {
		rec.Objects = append(rec.Objects, volume.Object{ID: o.GetId(), Version: o.GetVersion()})
	}
	if prev != nil {
		rec.Generation = prev.Generation
		rec.LastChange = prev.LastChange
		if changed {
			rec.Generation++
			rec.LastChange = now
		}
	}
	return rec
}

// keepAfterFailure records a failed refresh of a mounted volume: the files
// stay, the failure counts towards the retry backoff, and the trigger
// values it tried to act on count as handled (a retry follows the backoff,
// whatever the policy).
func (d *Driver) keepAfterFailure(v *volume.Volume, p *publishRequest, prev *volume.Record,
	spc *secretsstorev1.SecretProviderClass, dec rotation.Decision, cause error,
) *Outcome {
	klog.ErrorS(cause, "refresh failed, keeping the mounted files", "volumeID", p.volumeID,
		"pod", klog.KRef(p.podNamespace, p.podName), "spc", p.className, "failuresInARow", prev.Failures+1)
	before := prev.Objects
	prev.LastError = truncate(cause.Error())
	prev.LastErrorTime = d.deps.Clock.Now()
	if dec.CutBackoff {
		prev.CutBackoff = prev.Failures // a trigger cut this step short
	}
	prev.Failures++
	if d.deps.Refresh != nil {
		prev.HandledClassRefresh, prev.HandledPodRefresh = dec.Triggers.Class, dec.Triggers.Pod
	}
	if err := v.SaveRecord(prev); err != nil {
		klog.ErrorS(err, "recording refresh failure", "volumeID", p.volumeID)
	}
	o := newOutcome(v, spc, prev, prev, false, dec, cause)
	o.Previous = before
	return o
}

func (d *Driver) removeAfterFailure(v *volume.Volume, p *publishRequest) {
	unbound, err := d.deps.Volumes.Unbind(v, p.target)
	if err != nil {
		klog.ErrorS(err, "cleaning up after failed first publish", "volumeID", v.ID, "targetPath", p.targetPath)
	}
	if !unbound && err == nil {
		// The provider's stage created the target directory: remove it when
		// it is empty and no mount point (anything else stays).
		if err := p.target.RemoveDir(); err != nil && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EBUSY) {
			klog.ErrorS(err, "cleaning up after failed first publish", "volumeID", v.ID, "targetPath", p.targetPath)
		}
	}
	if err := d.deps.Volumes.RemoveTmpfs(v); err != nil {
		klog.ErrorS(err, "cleaning up after failed first publish", "volumeID", v.ID, "dir", v.Dir)
	}
}

// cleanUpAfterPanic removes what a first publish mounted when a bug panics
// before it finished, then lets the panic go on to the handler's recovery.
func (d *Driver) cleanUpAfterPanic(v *volume.Volume, p *publishRequest) {
	if r := recover(); r != nil {
		d.removeAfterFailure(v, p)
		panic(r)
	}
}

func currentObjects(r *volume.Record) []volume.Object {
	if r == nil {
		return nil
	}
	return r.Objects
}

// toWriterFiles converts the provider's files. A mode that is negative or has
// bits outside 0777 is refused, never masked into something wider.
func toWriterFiles(files []*v1alpha1.File) ([]atomicwrite.File, error) {
	out := make([]atomicwrite.File, len(files))
	for i, f := range files {
		m := f.GetMode()
		if m < 0 || m > 0o777 {
			return nil, fmt.Errorf("%w: file %s has mode %d (%#o): a mode must be permission bits 0 to 0777",
				errInvalidProviderFile, quoteName(f.GetPath()), m, m)
		}
		out[i] = atomicwrite.File{Path: f.GetPath(), Mode: fileMode(m), Contents: f.GetContents()}
	}
	return out, nil
}

func logPublished(p *publishRequest, spc *secretsstorev1.SecretProviderClass, rec *volume.Record, first, changed bool) {
	switch {
	case first:
		klog.InfoS("volume published", "volumeID", p.volumeID, "pod", klog.KRef(p.podNamespace, p.podName),
			"spc", p.className, "provider", spc.Spec.Provider, "objects", len(rec.Objects))
	case changed:
		klog.InfoS("volume content changed", "volumeID", p.volumeID, "pod", klog.KRef(p.podNamespace, p.podName),
			"spc", p.className, "generation", rec.Generation, "mountGroup", rec.MountGroup)
	default:
		klog.V(4).InfoS("volume unchanged", "volumeID", p.volumeID, "spc", p.className)
	}
}
