package syncrequest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/keymount/keymount/controller/tokens"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// Attribute keys the controller fills, as kubelet names them.
const (
	AttrPodName            = "csi.storage.k8s.io/pod.name"
	AttrPodNamespace       = "csi.storage.k8s.io/pod.namespace"
	AttrPodUID             = "csi.storage.k8s.io/pod.uid"
	AttrServiceAccountName = "csi.storage.k8s.io/serviceAccount.name"
	AttrTokens             = tokens.AttrTokens
)

// kubeletPrefix starts every key kubelet sets; class parameters under it
// are dropped.
const kubeletPrefix = "csi.storage.k8s.io/"

// The fixed parts of the request, as secrets-store-sync-controller sends them.
const (
	// TargetPath is the target path sent; nothing is mounted there.
	TargetPath = "/mnt/secrets-store"
	// Permission is the JSON of the default file mode 0644.
	Permission = "420"
	// Secrets is the (empty) node-publish secret: a JSON object.
	Secrets = "{}"
)

// Downward-API environment variables naming the controller's pod, as in
// secrets-store-sync-controller's Deployment.
const (
	EnvPodName      = "SYNC_CONTROLLER_POD_NAME"
	EnvPodUID       = "SYNC_CONTROLLER_POD_UID"
	EnvPodNamespace = "SYNC_CONTROLLER_POD_NAMESPACE"
)

// Pod is the controller's own pod, named in pod.name and pod.uid.
type Pod struct {
	Name, Namespace, UID string
}

// PodFromEnv reads the controller's pod from EnvPodName, EnvPodNamespace
// and EnvPodUID through getenv (os.Getenv). Unset variables stay "", which
// the sync controller sends too.
func PodFromEnv(getenv func(string) string) Pod {
	return Pod{Name: getenv(EnvPodName), Namespace: getenv(EnvPodNamespace), UID: getenv(EnvPodUID)}
}

// Input is what one SecretSync's request is built from.
type Input struct {
	// Parameters are the SecretProviderClass's spec.parameters.
	Parameters map[string]string
	// Namespace is the SecretSync's namespace.
	Namespace string
	// ServiceAccountName is the SecretSync's spec.serviceAccountName.
	ServiceAccountName string
	// Pod is the controller's own pod.
	Pod Pod
	// Tokens is the serviceAccount.tokens value (tokens.Manager.Tokens);
	// "" sends no such attribute.
	Tokens string
	// Current maps object id to version, from the last successful sync;
	// empty on a first sync.
	Current map[string]string
}

// String names what the request is for, never the tokens.
func (in Input) String() string {
	return fmt.Sprintf("syncrequest.Input{namespace: %s, serviceAccount: %s, %d parameters, tokens: %t, %d current objects}",
		in.Namespace, in.ServiceAccountName, len(in.Parameters), in.Tokens != "", len(in.Current))
}

// Build returns the MountRequest for in. Errors name the field and never
// quote the tokens.
func Build(in Input) (*v1alpha1.MountRequest, error) {
	if in.Namespace == "" || in.ServiceAccountName == "" {
		return nil, errors.New("syncrequest: the SecretSync's namespace or spec.serviceAccountName is empty: both name the identity the provider acts for")
	}
	attrs, err := Attributes(in)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		return nil, fmt.Errorf("syncrequest: encode attributes: %w", err)
	}
	return &v1alpha1.MountRequest{
		Attributes:           string(b),
		Secrets:              Secrets,
		TargetPath:           TargetPath,
		Permission:           Permission,
		CurrentObjectVersion: ObjectVersions(in.Current),
	}, nil
}

// Attributes returns the attributes map of in's request (Build sends its
// JSON). It holds the tokens: never log it.
func Attributes(in Input) (map[string]string, error) {
	attrs := make(map[string]string, len(in.Parameters)+5)
	for k, v := range in.Parameters {
		if !strings.HasPrefix(k, kubeletPrefix) {
			attrs[k] = v
		}
	}
	attrs[AttrPodName] = in.Pod.Name
	attrs[AttrPodUID] = in.Pod.UID
	attrs[AttrPodNamespace] = in.Namespace
	attrs[AttrServiceAccountName] = in.ServiceAccountName
	if in.Tokens != "" {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in.Tokens), &probe); err != nil || probe == nil {
			return nil, fmt.Errorf("syncrequest: %s is not a JSON object (contents not shown): pass tokens.Manager.Tokens' value", AttrTokens)
		}
		attrs[AttrTokens] = in.Tokens
	}
	return attrs, nil
}

// ObjectVersions returns current as the request's current_object_version,
// sorted by id; nil for none.
func ObjectVersions(current map[string]string) []*v1alpha1.ObjectVersion {
	if len(current) == 0 {
		return nil
	}
	ids := make([]string, 0, len(current))
	for id := range current {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*v1alpha1.ObjectVersion, 0, len(ids))
	for _, id := range ids {
		out = append(out, &v1alpha1.ObjectVersion{Id: id, Version: current[id]})
	}
	return out
}
