package vault

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/vaultkv"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault/spec"
)

// pushVolume is the volume record of an identity's pushes: it keeps the
// identity's login for Config.VolumeIdle after its last push, as a
// volume keeps its pod's.
const pushVolume = "push"

// objectTypeKV is the object type of a push item, the default: a KV
// secret.
const objectTypeKV = "kv"

// Push writes each item's value at its KV path (keymount's push
// extension; see docs/vault-migration.md "Push"), logged in exactly as a
// Mount of the same attributes is: the PushSecret's ServiceAccount token
// proven, then the identity's login of the provider's one login cache.
// The items of one path are one write and share its result.
func (p *Provider) Push(ctx context.Context, req *server.PushRequest) ([]server.PushResult, error) {
	return p.eachPath(ctx, req, p.pushPath)
}

// Remove removes what keymount wrote for each item (a PushSecret's
// deletionPolicy Delete), only where the current version is still the one
// keymount wrote.
func (p *Provider) Remove(ctx context.Context, req *server.PushRequest) ([]server.PushResult, error) {
	return p.eachPath(ctx, req, p.removePath)
}

// eachPath logs in as req's identity and calls do once per KV path with
// its items, in the order the paths first appear. A failed path never
// stops the others; only a failed login fails the request.
func (p *Provider) eachPath(ctx context.Context, req *server.PushRequest,
	do func(context.Context, vaultkv.KV, []server.PushItem) server.PushResult) ([]server.PushResult, error) {
	s, err := p.parse(p.cfg.Defaults.ParseIdentity(req.Attributes))
	if err != nil {
		return nil, err
	}
	l, sess, err := p.logIn(ctx, s)
	if err != nil {
		return nil, err
	}
	defer p.done(l)
	p.seen(pushVolume, l.Key(), nil)
	results := make([]server.PushResult, len(req.Items))
	paths, byPath := groupByPath(req.Items)
	for _, path := range paths {
		idx := byPath[path]
		items := make([]server.PushItem, len(idx))
		for i, j := range idx {
			items[i] = req.Items[j]
		}
		var r server.PushResult
		version, err := p.kvVersions.get(ctx, sess.Client(), s, path)
		if err == nil {
			err = kvObjects(path, items)
		}
		if err != nil {
			r = failed(err)
		} else {
			r = do(ctx, vaultkv.KV{Client: sess.Client(), Path: path, Version: version}, items)
		}
		klog.V(4).InfoS("vault push", "path", path, "role", s.Role, "outcome", r.Outcome.String(), "version", r.Version)
		for _, j := range idx {
			results[j] = r
		}
	}
	return results, nil
}

// kvObjects refuses an item of another object type than KV, the only
// one the provider writes.
func kvObjects(path string, items []server.PushItem) error {
	for _, it := range items {
		if it.ObjectType != "" && it.ObjectType != objectTypeKV {
			return fmt.Errorf("%s: object type %q: the Vault provider writes KV secrets only (give none, or %q)", path, it.ObjectType, objectTypeKV)
		}
	}
	return nil
}

// groupByPath is the KV paths of items in the order they first appear,
// and the indexes of each path's items.
func groupByPath(items []server.PushItem) ([]string, map[string][]int) {
	var paths []string
	byPath := map[string][]int{}
	for i, it := range items {
		path := strings.Trim(it.RemoteKey, "/")
		if _, ok := byPath[path]; !ok {
			paths = append(paths, path)
		}
		byPath[path] = append(byPath[path], i)
	}
	return paths, byPath
}

func (p *Provider) pushPath(ctx context.Context, kv vaultkv.KV, items []server.PushItem) server.PushResult {
	change, err := changeOf(kv.Path, items, true)
	if err != nil {
		return failed(err)
	}
	last, err := lastVersion(kv, items[0])
	if err != nil {
		return failed(err)
	}
	unchanged := true
	for _, it := range items {
		unchanged = unchanged && it.Unchanged
	}
	version, res, err := kv.PutFields(ctx, vaultkv.FieldsPut{Change: change, Last: last, Unchanged: unchanged,
		Policy: policyOf(items[0].Policy), Owner: items[0].Owner})
	if err != nil {
		r := failedOrConflict(err)
		if res.Wrote() {
			r.Version = versionString(version)
		}
		return r
	}
	return server.PushResult{Outcome: outcomes[res], Version: versionString(version)}
}

func (p *Provider) removePath(ctx context.Context, kv vaultkv.KV, items []server.PushItem) server.PushResult {
	change, _ := changeOf(kv.Path, items, false)
	last, err := lastVersion(kv, items[0])
	if err != nil {
		return failed(err)
	}
	if err := kv.RemoveFields(ctx, change, last); err != nil {
		return failedOrConflict(err)
	}
	return server.PushResult{Outcome: keymountv1.Outcome_OUTCOME_REMOVED}
}

// outcomes are the wire outcomes of vaultkv's results.
var outcomes = map[vaultkv.Result]keymountv1.Outcome{
	vaultkv.Unchanged: keymountv1.Outcome_OUTCOME_UNCHANGED,
	vaultkv.Created:   keymountv1.Outcome_OUTCOME_CREATED,
	vaultkv.Updated:   keymountv1.Outcome_OUTCOME_UPDATED,
	vaultkv.Adopted:   keymountv1.Outcome_OUTCOME_ADOPTED,
	vaultkv.Skipped:   keymountv1.Outcome_OUTCOME_SKIPPED,
}

// policyOf is vaultkv's policy of an item's.
func policyOf(p keymountv1.UpdatePolicy) vaultkv.Policy {
	switch p {
	case keymountv1.UpdatePolicy_UPDATE_POLICY_IF_NOT_EXISTS:
		return vaultkv.IfNotExists
	case keymountv1.UpdatePolicy_UPDATE_POLICY_OVERWRITE:
		return vaultkv.Replace
	}
	return vaultkv.OwnedOnly
}

// lastVersion is the KV version 2 version it names (0 for ""); KV
// version 1 keeps none.
func lastVersion(kv vaultkv.KV, it server.PushItem) (int, error) {
	if kv.Version != 2 || it.LastVersion == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(it.LastVersion)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: last_version %q is not a KV version 2 version number", kv.Path, it.LastVersion)
	}
	return n, nil
}

func versionString(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}

func failed(err error) server.PushResult {
	return server.PushResult{Outcome: keymountv1.Outcome_OUTCOME_FAILED, Message: err.Error()}
}

func failedOrConflict(err error) server.PushResult {
	if errors.Is(err, vaultkv.ErrConflict) {
		return server.PushResult{Outcome: keymountv1.Outcome_OUTCOME_CONFLICT, Message: err.Error()}
	}
	return failed(err)
}

// kvVersions caches the KV version of pushes' paths by Vault address,
// namespace and path.
type kvVersions struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *kvVersions) get(ctx context.Context, client *vaultapi.Client, s *spec.Spec, path string) (int, error) {
	key := s.Address + "|" + s.VaultNamespace + "|" + path
	c.mu.Lock()
	v, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := vaultkv.MountVersion(ctx, client, path)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[key] = v
	return v, nil
}
