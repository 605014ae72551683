package push

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
)

// Tags and labels keymount writes.
const (
	// OwnerTag marks an object keymount created: its value is the
	// PushSecret's "<namespace>/<name>".
	OwnerTag = "keymount.io/pushed-by"
	// StagingLabel is the Secrets Manager staging label of the version
	// keymount puts before it moves AWSCURRENT to it.
	StagingLabel = "keymount-pending"
	// esoTag and esoValue are the External Secrets Operator's mark of a
	// value it pushed.
	esoTag, esoValue = "managed-by", "external-secrets"
)

// Object types of PushItem.ObjectType.
const (
	TypeSecretsManager = "secretsmanager"
	TypeSSMParameter   = "ssmparameter"
)

// kind is the store of an object.
type kind int

const (
	secret kind = iota
	parameter
)

func (k kind) String() string {
	if k == parameter {
		return TypeSSMParameter
	}
	return TypeSecretsManager
}

// Config configures a Writer. The zero value writes to AWS.
type Config struct {
	// AWS is the base SDK configuration of the clients (endpoints, FIPS,
	// CA bundle). Its region is replaced per request and its credentials
	// are never used: every call is signed with the request's.
	AWS aws.Config
	// Endpoint, when set, is the BaseEndpoint of every client (testing).
	Endpoint string
	// HTTPClient, when set, sends the requests instead of AWS.HTTPClient.
	HTTPClient aws.HTTPClient
}

// Writer pushes items into Secrets Manager and SSM Parameter Store. It is
// safe for concurrent use.
type Writer struct {
	cfg     Config
	mu      sync.Mutex
	clients map[string]*clients
}

// clients are the SDK clients of one region; credentials are per call.
type clients struct {
	sm  secretsAPI
	ssm parametersAPI
}

// New returns a Writer.
func New(cfg Config) *Writer {
	return &Writer{cfg: cfg, clients: map[string]*clients{}}
}

// Request is one push or removal: its items, and the region and
// credentials of the PushSecret's identity.
type Request struct {
	Credentials aws.CredentialsProvider
	Region      string
	Items       []server.PushItem
}

// Report is the result of each item, in order, and whether AWS refused
// the credentials themselves (the caller should drop them from its cache).
type Report struct {
	Results             []server.PushResult
	CredentialsRejected bool
}

// Push writes each object the items name: see the package doc.
func (w *Writer) Push(ctx context.Context, req *Request) Report {
	return w.each(ctx, req, pushObject)
}

// Remove deletes what keymount wrote for each object the items name, only
// where its current version is still the one keymount wrote.
func (w *Writer) Remove(ctx context.Context, req *Request) Report {
	return w.each(ctx, req, removeObject)
}

// object is one remote object and the items that write it.
type object struct {
	kind  kind
	key   string
	items []server.PushItem
	idx   []int
}

// lastVersion is the version keymount last wrote there: the first item's
// that names one (an item added to a PushSecret names none yet).
func (o *object) lastVersion() string {
	for _, it := range o.items {
		if it.LastVersion != "" {
			return it.LastVersion
		}
	}
	return ""
}

// policy is the strictest of the items': IF_NOT_EXISTS if any says so,
// OVERWRITE only if all do.
func (o *object) policy() keymountv1.UpdatePolicy {
	p := keymountv1.UpdatePolicy_UPDATE_POLICY_OVERWRITE
	for _, it := range o.items {
		switch it.Policy {
		case keymountv1.UpdatePolicy_UPDATE_POLICY_IF_NOT_EXISTS:
			return it.Policy
		case keymountv1.UpdatePolicy_UPDATE_POLICY_REPLACE:
			p = it.Policy
		}
	}
	return p
}

func (o *object) unchanged() bool {
	return !slices.ContainsFunc(o.items, func(it server.PushItem) bool { return !it.Unchanged })
}

// where names the object in messages.
func (o *object) where() string { return fmt.Sprintf("%s %q", o.kind, o.key) }

type handler func(ctx context.Context, r remote, o *object) server.PushResult

// each groups the items by object and handles every object; an item of an
// unknown object type fails alone.
func (w *Writer) each(ctx context.Context, req *Request, h handler) Report {
	rep := Report{Results: make([]server.PushResult, len(req.Items))}
	var objects []*object
	byKey := map[[2]string]*object{}
	for i, it := range req.Items {
		var k kind
		switch it.ObjectType {
		case "", TypeSecretsManager:
			k = secret
		case TypeSSMParameter:
			k = parameter
		default:
			rep.Results[i] = failed(it.LastVersion, "items[%d] (remote key %q): object type %q is neither %s nor %s",
				i, it.RemoteKey, it.ObjectType, TypeSecretsManager, TypeSSMParameter)
			continue
		}
		id := [2]string{k.String(), it.RemoteKey}
		o := byKey[id]
		if o == nil {
			o = &object{kind: k, key: it.RemoteKey}
			byKey[id] = o
			objects = append(objects, o)
		}
		o.items, o.idx = append(o.items, it), append(o.idx, i)
	}
	for _, o := range objects {
		var res server.PushResult
		if err := check(o.kind, o.items); err != nil {
			res = failed(o.lastVersion(), "%s: %v", o.where(), err)
		} else {
			r := w.remote(req, o)
			res = h(ctx, r, o)
			rep.CredentialsRejected = rep.CredentialsRejected || r.rejected()
		}
		for _, i := range o.idx {
			rep.Results[i] = res
		}
	}
	return rep
}

// remote returns the object's store, with the request's credentials.
func (w *Writer) remote(req *Request, o *object) remote {
	c := w.clientsFor(req.Region)
	if o.kind == parameter {
		return &ssmParameter{api: c.ssm, name: o.key, creds: req.Credentials}
	}
	return &smSecret{api: c.sm, id: o.key, creds: req.Credentials}
}

// clientsFor returns the clients of a region, built once.
func (w *Writer) clientsFor(region string) *clients {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.clients[region]; ok {
		return c
	}
	base := w.cfg.AWS.Copy()
	base.Region = region
	base.Credentials = nil // never the node's: each call passes the identity's
	c := &clients{
		sm: secretsmanager.NewFromConfig(base, func(o *secretsmanager.Options) {
			if w.cfg.HTTPClient != nil {
				o.HTTPClient = w.cfg.HTTPClient
			}
			if w.cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(w.cfg.Endpoint)
			}
		}),
		ssm: ssm.NewFromConfig(base, func(o *ssm.Options) {
			if w.cfg.HTTPClient != nil {
				o.HTTPClient = w.cfg.HTTPClient
			}
			if w.cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(w.cfg.Endpoint)
			}
		}),
	}
	w.clients[region] = c
	return c
}

func result(o keymountv1.Outcome, version string) server.PushResult {
	return server.PushResult{Outcome: o, Version: version}
}

func failed(version, format string, args ...any) server.PushResult {
	return server.PushResult{Outcome: keymountv1.Outcome_OUTCOME_FAILED, Version: version, Message: fmt.Sprintf(format, args...)}
}

func conflict(version, format string, args ...any) server.PushResult {
	return server.PushResult{Outcome: keymountv1.Outcome_OUTCOME_CONFLICT, Version: version, Message: fmt.Sprintf(format, args...)}
}
