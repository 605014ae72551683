package restart

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/rotation"
)

// The workload cache (Secret restarts) holds every Deployment, StatefulSet
// and DaemonSet of the cluster: a cache of only the annotated ones cannot
// be asked of the API server (no field selector on annotations). So each
// object is trimmed as it enters the cache (trimWorkload) to its name,
// namespace, UID, resourceVersion, creation time, and, when it opted in,
// one Secret volume per Secret its pod template consumes: a few hundred
// bytes an object, whatever its size in etcd. Images, commands, env values,
// labels and managedFields never stay in memory.

// optedIn reports whether a workload restarts when a Secret it consumes
// changes: rotation.RestartAnnotation "true" on the workload or on its pod
// template.
func optedIn(meta, template *metav1.ObjectMeta) bool {
	for _, m := range []*metav1.ObjectMeta{meta, template} {
		if on, err := strconv.ParseBool(m.Annotations[rotation.RestartAnnotation]); err == nil && on {
			return true
		}
	}
	return false
}

// consumedSecrets returns the names of the Secrets spec reads: env
// valueFrom.secretKeyRef, envFrom secretRef (containers and init
// containers), secret volumes and projected volumes' secret sources.
func consumedSecrets(spec *corev1.PodSpec) []string {
	seen := map[string]bool{}
	var names []string
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for _, e := range cs[i].Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					add(e.ValueFrom.SecretKeyRef.Name)
				}
			}
			for _, e := range cs[i].EnvFrom {
				if e.SecretRef != nil {
					add(e.SecretRef.Name)
				}
			}
		}
	}
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil:
			add(v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add(s.Secret.Name)
				}
			}
		}
	}
	return names
}

// trimmedTemplate is the pod template a trimmed workload keeps: when it
// opted in, one Secret volume per consumed Secret, else nothing.
func trimmedTemplate(meta *metav1.ObjectMeta, t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	if !optedIn(meta, &t.ObjectMeta) {
		return corev1.PodTemplateSpec{}
	}
	var out corev1.PodTemplateSpec
	for _, name := range consumedSecrets(&t.Spec) {
		out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{
			Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}},
		})
	}
	return out
}

// trimmedMeta keeps what a restart needs of a workload's metadata.
func trimmedMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp,
	}
}

// trimWorkload is the cache transform of Deployments, StatefulSets and
// DaemonSets (see above). Anything else passes unchanged.
func trimWorkload(obj any) (any, error) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: trimmedMeta(&w.ObjectMeta),
			Spec: appsv1.DeploymentSpec{Template: trimmedTemplate(&w.ObjectMeta, &w.Spec.Template)}}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: trimmedMeta(&w.ObjectMeta),
			Spec: appsv1.StatefulSetSpec{Template: trimmedTemplate(&w.ObjectMeta, &w.Spec.Template)}}, nil
	case *appsv1.DaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: trimmedMeta(&w.ObjectMeta),
			Spec: appsv1.DaemonSetSpec{Template: trimmedTemplate(&w.ObjectMeta, &w.Spec.Template)}}, nil
	}
	return obj, nil
}

// indexConsumes is the cache index of trimmed workloads by the Secrets they
// consume (only opted-in workloads consume any once trimmed).
const indexConsumes = "keymount.io/restart-consumes"

// secretsOf returns the consumed Secrets a trimmed workload keeps.
func secretsOf(obj client.Object) []string {
	var t *corev1.PodTemplateSpec
	switch w := obj.(type) {
	case *appsv1.Deployment:
		t = &w.Spec.Template
	case *appsv1.StatefulSet:
		t = &w.Spec.Template
	case *appsv1.DaemonSet:
		t = &w.Spec.Template
	default:
		return nil
	}
	names := make([]string, 0, len(t.Spec.Volumes))
	for _, v := range t.Spec.Volumes {
		if v.Secret != nil {
			names = append(names, v.Secret.SecretName)
		}
	}
	return names
}

// workloadOf names a trimmed workload.
func workloadOf(obj client.Object) Workload {
	kind := ""
	switch obj.(type) {
	case *appsv1.Deployment:
		kind = KindDeployment
	case *appsv1.StatefulSet:
		kind = KindStatefulSet
	case *appsv1.DaemonSet:
		kind = KindDaemonSet
	}
	return Workload{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}
