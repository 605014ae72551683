package server

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/keymountv1"
)

// Pusher is what a provider implements to write a Secret's values into its
// store for keymount-controller (keymount.provider.v1.SecretPusher).
// Optional: a server without one does not serve the service, and the
// controller reports that the provider does not push.
//
// Both calls get one PushItem per value and return one PushResult per item,
// in order: a failed item never stops the others. An error is for the
// whole request (its identity refused, its attributes wrong).
type Pusher interface {
	Push(ctx context.Context, req *PushRequest) ([]PushResult, error)
	Remove(ctx context.Context, req *PushRequest) ([]PushResult, error)
}

// PushRequest is a validated wire PushRequest or RemoveRequest. It holds
// secrets and values: it redacts itself when printed.
type PushRequest struct {
	// Attributes are the class parameters and the PushSecret's identity,
	// as a MountRequest's.
	Attributes map[string]string
	// Secrets is the data of the class's nodePublishSecretRef, if any.
	Secrets map[string]string
	Items   []PushItem
}

// String prints the request without any value: attribute keys, the items'
// remote keys.
func (r PushRequest) String() string {
	keys := make([]string, len(r.Items))
	for i, it := range r.Items {
		keys[i] = it.RemoteKey
	}
	return fmt.Sprintf("PushRequest{AttributeKeys: %q, Secrets: <%d redacted>, RemoteKeys: %q}",
		slices.Sorted(maps.Keys(r.Attributes)), len(r.Secrets), keys)
}

// GoString redacts %#v the same way as %v.
func (r PushRequest) GoString() string { return r.String() }

// PushItem is one value to write (or remove): see keymountv1.PushItem.
type PushItem struct {
	RemoteKey   string
	Property    string
	ObjectType  string
	Value       []byte
	Policy      keymountv1.UpdatePolicy
	LastVersion string
	Owner       string
	Unchanged   bool
}

// PushResult is what happened to one item: see keymountv1.ItemResult.
type PushResult struct {
	Outcome keymountv1.Outcome
	Version string
	Message string
}

// parsePush validates a wire request's parts. Errors name the field and
// never quote a value.
func parsePush(attributes, secrets string, items []*keymountv1.PushItem) (*PushRequest, error) {
	attrs, err := parseStringMap("attributes", attributes, false)
	if err != nil {
		return nil, err
	}
	sec, err := parseStringMap("secrets", secrets, true)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("items is empty: give at least one value to push")
	}
	r := &PushRequest{Attributes: attrs, Secrets: sec, Items: make([]PushItem, len(items))}
	for i, it := range items {
		if it.GetRemoteKey() == "" {
			return nil, fmt.Errorf("items[%d].remote_key is empty: name the store's object to write", i)
		}
		if _, ok := keymountv1.UpdatePolicy_name[int32(it.GetPolicy())]; !ok {
			return nil, fmt.Errorf("items[%d].policy %d is not an UpdatePolicy", i, it.GetPolicy())
		}
		r.Items[i] = PushItem{RemoteKey: it.GetRemoteKey(), Property: it.GetProperty(), ObjectType: it.GetObjectType(),
			Value: it.GetValue(), Policy: it.GetPolicy(), LastVersion: it.GetLastVersion(), Owner: it.GetOwner(), Unchanged: it.GetUnchanged()}
	}
	return r, nil
}

// pusher adapts a Pusher to the keymount.provider.v1 gRPC service.
type pusher struct {
	keymountv1.UnimplementedSecretPusherServer

	p Pusher
}

var _ keymountv1.SecretPusherServer = (*pusher)(nil)

func (s *pusher) Push(ctx context.Context, wire *keymountv1.PushRequest) (*keymountv1.PushResponse, error) {
	req, err := parsePush(wire.GetAttributes(), wire.GetSecrets(), wire.GetItems())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return answer(s.p.Push(ctx, req))(len(req.Items))
}

func (s *pusher) Remove(ctx context.Context, wire *keymountv1.RemoveRequest) (*keymountv1.PushResponse, error) {
	req, err := parsePush(wire.GetAttributes(), wire.GetSecrets(), wire.GetItems())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return answer(s.p.Remove(ctx, req))(len(req.Items))
}

// answer is the wire response of results, or the status of err; a
// provider answering another number of results than items is Internal.
func answer(results []PushResult, err error) func(items int) (*keymountv1.PushResponse, error) {
	return func(items int) (*keymountv1.PushResponse, error) {
		if err != nil {
			return nil, statusOf(err).Err()
		}
		if len(results) != items {
			return nil, status.Errorf(codes.Internal, "the provider answered %d results for %d items", len(results), items)
		}
		resp := &keymountv1.PushResponse{Results: make([]*keymountv1.ItemResult, len(results))}
		for i, r := range results {
			resp.Results[i] = &keymountv1.ItemResult{Outcome: r.Outcome, Version: r.Version, Message: r.Message}
		}
		return resp, nil
	}
}
