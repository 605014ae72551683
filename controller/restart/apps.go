package restart

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// GroupVersion is the API group version of the objects a Restarter reads
// and patches: its REST client serves /apis/apps/v1.
var GroupVersion = schema.GroupVersion{Group: "apps", Version: "v1"}

// fieldManager names keymount as the writer of the annotation.
const fieldManager = "keymount"

// template is what a Restarter reads of a workload.
type template struct {
	Metadata struct {
		UID             types.UID `json:"uid"`
		Generation      int64     `json:"generation"`
		ResourceVersion string    `json:"resourceVersion"`
	} `json:"metadata"`
	Spec podTemplateSpec `json:"spec"`
}

// podTemplateSpec is a workload's spec as far as its pod template's
// annotations.
type podTemplateSpec struct {
	Template struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	} `json:"template"`
}

// templatePatch is the JSON merge patch that sets one annotation on the
// pod template of the workload with uid and resourceVersion: preconditions,
// the API server refuses the patch (a conflict) when the object is another
// one or changed since it was read.
type templatePatch struct {
	Metadata struct {
		UID             types.UID `json:"uid"`
		ResourceVersion string    `json:"resourceVersion"`
	} `json:"metadata"`
	Spec podTemplateSpec `json:"spec"`
}

// controlling is what a Restarter reads of a controller to confirm what it
// controls.
type controlling struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Selector *metav1.LabelSelector `json:"selector"`
	} `json:"spec"`
}

// controller reads the metadata and selector of an apps/v1 object.
func (r *Restarter) controller(ctx context.Context, resource, namespace, name string) (*controlling, error) {
	raw, err := body(r.apps.Get().Namespace(namespace).Resource(resource).Name(name).Do(ctx))
	if err != nil {
		return nil, err
	}
	c := &controlling{}
	if err := json.Unmarshal(raw, c); err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", resource, namespace, name, err)
	}
	return c, nil
}

// template reads the uid, generation and pod-template annotations of w.
func (r *Restarter) template(ctx context.Context, w Workload) (*template, error) {
	raw, err := body(r.apps.Get().Namespace(w.Namespace).Resource(w.resource()).Name(w.Name).Do(ctx))
	if err != nil {
		return nil, err
	}
	return decodeTemplate(raw, w)
}

// annotate sets the pod-template annotation key to value on w, as read at
// resourceVersion, and returns the workload as patched.
func (r *Restarter) annotate(ctx context.Context, w Workload, resourceVersion, key, value string) (*template, error) {
	var p templatePatch
	p.Metadata.UID, p.Metadata.ResourceVersion = w.UID, resourceVersion
	p.Spec.Template.Metadata.Annotations = map[string]string{key: value}
	patch, err := json.Marshal(&p)
	if err != nil {
		return nil, err
	}
	raw, err := body(r.apps.Patch(types.MergePatchType).Namespace(w.Namespace).Resource(w.resource()).Name(w.Name).
		Param("fieldManager", fieldManager).Body(patch).Do(ctx))
	if err != nil {
		return nil, err
	}
	return decodeTemplate(raw, w)
}

// decodeTemplate decodes w as the API server answered it.
func decodeTemplate(raw []byte, w Workload) (*template, error) {
	t := &template{}
	if err := json.Unmarshal(raw, t); err != nil {
		return nil, fmt.Errorf("decode %s: %w", w, err)
	}
	return t, nil
}

// body returns the answer's body, or its error with the API server's
// Status (its message and reason) when it sent one: Raw alone gives an
// error with the status code only.
func body(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}
