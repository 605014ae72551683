package driver

import (
	"context"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/atomicwrite"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// publish runs the publish pipeline. A first publish that fails leaves
// nothing mounted; a republish that fails keeps the files the pod already
// has, records the failure and succeeds, because kubelet deletes the mount
// directory of a volume whose republish fails.
func (d *Driver) publish(ctx context.Context, req *csi.NodePublishVolumeRequest) error {
	p, err := parsePublishRequest(req)
	if err != nil {
		return err
	}
	release, err := d.locks.acquire(p.volumeID)
	if err != nil {
		return err
	}
	defer release()

	v := d.deps.Volumes.Lookup(p.volumeID, p.targetPath)
	prev, err := v.LoadRecord()
	if err != nil {
		return err
	}
	o, err := d.refresh(ctx, p, prev)
	if err != nil && prev == nil {
		// Nothing is mounted: the cluster side only tells the pod why.
		d.report(ctx, &Outcome{
			VolumeID: p.volumeID, TargetPath: p.targetPath,
			PodName: p.podName, PodNamespace: p.podNamespace, PodUID: p.podUID,
			ClassName: p.className, Class: o.Class, First: true, Err: err,
		})
		return err
	}
	if err != nil {
		o = d.keepAfterFailure(v, p, prev, o.Class, err)
	}
	d.report(ctx, o)
	return nil
}

// refresh resolves the class, mounts the volume, calls the provider and
// writes what it returns. The outcome always carries the class when it
// could be resolved, also with an error.
func (d *Driver) refresh(ctx context.Context, p *publishRequest, prev *volume.Record) (*Outcome, error) {
	o := &Outcome{}
	spc, err := d.deps.Classes.Resolve(ctx, p.podNamespace, p.className)
	if err != nil {
		return o, err
	}
	o.Class = spc
	mreq, err := buildMountRequest(spc, p, currentObjects(prev))
	if err != nil {
		return o, err
	}
	v, _, err := d.deps.Volumes.Ensure(p.volumeID, p.targetPath, p.readOnly)
	if err != nil {
		return o, err
	}
	rec, changed, err := d.fetchAndWrite(ctx, v, spc, p, mreq, prev)
	if err != nil {
		if prev == nil {
			d.removeAfterFailure(v)
		}
		return o, err
	}
	return newOutcome(v, spc, rec, prev == nil, changed, nil), nil
}

func (d *Driver) fetchAndWrite(ctx context.Context, v *volume.Volume, spc *secretsstorev1.SecretProviderClass,
	p *publishRequest, mreq *v1alpha1.MountRequest, prev *volume.Record,
) (*volume.Record, bool, error) {
	resp, err := d.deps.Providers.Mount(ctx, string(spc.Spec.Provider), mreq)
	if err != nil {
		return nil, false, err
	}
	changed := false
	if files := resp.GetFiles(); len(files) > 0 {
		changed, err = atomicwrite.Write(v.DataDir, toWriterFiles(files))
		if err != nil {
			return nil, false, err
		}
	}
	rec := d.newRecord(p, spc, resp, prev, changed)
	if err := v.SaveRecord(rec); err != nil {
		return nil, false, err
	}
	logPublished(p, spc, rec, prev == nil, changed)
	return rec, changed, nil
}

func newOutcome(v *volume.Volume, spc *secretsstorev1.SecretProviderClass, rec *volume.Record, first, changed bool, cause error) *Outcome {
	return &Outcome{
		VolumeID: rec.VolumeID, TargetPath: rec.TargetPath, DataDir: v.DataDir,
		PodName: rec.PodName, PodNamespace: rec.PodNamespace, PodUID: rec.PodUID,
		ClassName: rec.Class, Class: spc, Objects: rec.Objects, First: first, Changed: changed, Err: cause,
		LastRefresh: rec.LastMount,
	}
}

// report hands an outcome to the cluster side. Its failures are logged and
// retried by the next republish; they never fail the publish.
func (d *Driver) report(ctx context.Context, o *Outcome) {
	if d.deps.Cluster == nil {
		return
	}
	if err := d.deps.Cluster.AfterPublish(ctx, o); err != nil {
		klog.ErrorS(err, "reporting volume to the cluster", "volumeID", o.VolumeID,
			"pod", klog.KRef(o.PodNamespace, o.PodName))
	}
}

func (d *Driver) newRecord(p *publishRequest, spc *secretsstorev1.SecretProviderClass, resp *v1alpha1.MountResponse,
	prev *volume.Record, changed bool,
) *volume.Record {
	now := d.deps.Clock.Now()
	rec := &volume.Record{
		VolumeID: p.volumeID, TargetPath: p.targetPath, ReadOnly: p.readOnly,
		PodName: p.podName, PodNamespace: p.podNamespace, PodUID: p.podUID, ServiceAccount: p.serviceAccount,
		Class: p.className, Provider: string(spc.Spec.Provider),
		LastMount: now, LastChange: now, Generation: 1,
	}
	for _, o := range resp.GetObjectVersion() {
		rec.Objects = append(rec.Objects, volume.Object{ID: o.GetId(), Version: o.GetVersion()})
	}
	if prev != nil {
		// The bind mount keeps the mode of the first publish.
		rec.ReadOnly = prev.ReadOnly
		rec.Generation = prev.Generation
		rec.LastChange = prev.LastChange
		if changed {
			rec.Generation++
			rec.LastChange = now
		}
	}
	return rec
}

func (d *Driver) keepAfterFailure(v *volume.Volume, p *publishRequest, prev *volume.Record,
	spc *secretsstorev1.SecretProviderClass, cause error,
) *Outcome {
	klog.ErrorS(cause, "refresh failed, keeping the mounted files", "volumeID", p.volumeID,
		"pod", klog.KRef(p.podNamespace, p.podName), "spc", p.className)
	prev.LastError = cause.Error()
	prev.LastErrorTime = d.deps.Clock.Now()
	if err := v.SaveRecord(prev); err != nil {
		klog.ErrorS(err, "recording refresh failure", "volumeID", p.volumeID)
	}
	return newOutcome(v, spc, prev, false, false, cause)
}

func (d *Driver) removeAfterFailure(v *volume.Volume) {
	if err := d.deps.Volumes.Remove(v.ID, v.Target); err != nil {
		klog.ErrorS(err, "cleaning up after failed first publish", "volumeID", v.ID, "targetPath", v.Target)
	}
}

func currentObjects(r *volume.Record) []volume.Object {
	if r == nil {
		return nil
	}
	return r.Objects
}

func toWriterFiles(files []*v1alpha1.File) []atomicwrite.File {
	out := make([]atomicwrite.File, len(files))
	for i, f := range files {
		out[i] = atomicwrite.File{Path: f.GetPath(), Mode: os.FileMode(f.GetMode()) & os.ModePerm, Contents: f.GetContents()} //nolint:gosec // G115: only the permission bits are kept.
	}
	return out
}

func logPublished(p *publishRequest, spc *secretsstorev1.SecretProviderClass, rec *volume.Record, first, changed bool) {
	switch {
	case first:
		klog.InfoS("volume published", "volumeID", p.volumeID, "pod", klog.KRef(p.podNamespace, p.podName),
			"spc", p.className, "provider", spc.Spec.Provider, "objects", len(rec.Objects))
	case changed:
		klog.InfoS("volume content changed", "volumeID", p.volumeID, "pod", klog.KRef(p.podNamespace, p.podName),
			"spc", p.className, "generation", rec.Generation)
	default:
		klog.V(4).InfoS("volume unchanged", "volumeID", p.volumeID, "spc", p.className)
	}
}
