package satoken

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/klog/v2"
)

const (
	// keysFetchTimeout bounds one read of discovery and keys, which serves
	// every caller waiting for it.
	keysFetchTimeout = 15 * time.Second
	// maxDocumentBytes bounds the discovery document and the key set.
	maxDocumentBytes = 1 << 20
)

// errNoDiscovery: discovery cannot be read now; prove with a TokenReview.
var errNoDiscovery = errors.New("service account issuer discovery unavailable")

// keySet is the issuer and its public signing keys.
type keySet struct {
	issuer  string
	keys    []jose.JSONWebKey
	fetched time.Time
}

// byID returns the keys of key ID kid; every key for a token naming none.
func (s *keySet) byID(kid string) []jose.JSONWebKey {
	if kid == "" {
		return s.keys
	}
	var out []jose.JSONWebKey
	for _, k := range s.keys {
		if k.KeyID == kid {
			out = append(out, k)
		}
	}
	return out
}

func (s *keySet) has(kid string) bool { return len(s.byID(kid)) > 0 }

// keysFor returns the keys to verify a token of key ID kid with, reading
// them first when none are cached, when they are older than KeysMaxAge,
// or when kid is unknown, at most once per MinRefetchInterval (once per
// DiscoveryRetry after discovery failed). errNoDiscovery means discovery
// failed and no keys are cached.
func (v *Verifier) keysFor(ctx context.Context, kid string) (*keySet, error) {
	if ks, ok := v.cachedKeys(kid); ok {
		return keysOrFallback(ks)
	}
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	// Another caller may have read them while this one waited.
	if ks, ok := v.cachedKeys(kid); ok {
		return keysOrFallback(ks)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keysFetchTimeout)
	defer cancel()
	ks, err := v.fetchKeys(fctx)
	now := v.cfg.Clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastFetch = now
	if err != nil {
		v.discoveryErr = err
		if v.keys != nil {
			// Keep trusting the keys read before: a token of a key ID
			// they lack is refused until a read succeeds.
			klog.ErrorS(err, "reading the service account issuer keys again failed; keeping the keys read before")
			return v.keys, nil
		}
		klog.ErrorS(err, "reading the service account issuer keys failed; proving tokens with TokenReviews", "retryAfter", v.cfg.DiscoveryRetry)
		return nil, fmt.Errorf("%w: %w", errNoDiscovery, err)
	}
	ks.fetched = now
	v.keys, v.discoveryErr = ks, nil
	klog.V(2).InfoS("read the service account issuer keys", "issuer", ks.issuer, "keys", len(ks.keys))
	return ks, nil
}

// keysOrFallback is ks, or errNoDiscovery when discovery failed recently
// and no keys are cached.
func keysOrFallback(ks *keySet) (*keySet, error) {
	if ks == nil {
		return nil, errNoDiscovery
	}
	return ks, nil
}

// cachedKeys returns the cached keys when no read is due: ok false means
// read now.
func (v *Verifier) cachedKeys(kid string) (*keySet, bool) {
	now := v.cfg.Clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	sinceTry := now.Sub(v.lastFetch)
	switch {
	case v.keys == nil && v.lastFetch.IsZero():
		return nil, false
	case v.keys == nil:
		if sinceTry < v.cfg.DiscoveryRetry {
			return nil, true // a TokenReview proves the token
		}
		return nil, false
	case v.keys.has(kid) && now.Sub(v.keys.fetched) < v.cfg.KeysMaxAge:
		return v.keys, true
	case sinceTry < v.cfg.MinRefetchInterval:
		// An unknown key ID, or stale keys, read too recently: garbage key
		// IDs must not pump the API server.
		return v.keys, true
	}
	return nil, false
}

// fetchKeys reads the issuer from discovery and the keys from the API
// server's JWKS.
func (v *Verifier) fetchKeys(ctx context.Context) (*keySet, error) {
	doc, err := v.api.GetRaw(ctx, DiscoveryPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", DiscoveryPath, err)
	}
	issuer, err := parseDiscovery(doc)
	if err != nil {
		return nil, err
	}
	raw, err := v.api.GetRaw(ctx, JWKSPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", JWKSPath, err)
	}
	keys, err := parseKeySet(raw)
	if err != nil {
		return nil, err
	}
	return &keySet{issuer: issuer, keys: keys}, nil
}

// parseDiscovery returns the issuer of an OpenID configuration document.
func parseDiscovery(doc []byte) (string, error) {
	if len(doc) > maxDocumentBytes {
		return "", fmt.Errorf("%s: %d bytes, more than %d", DiscoveryPath, len(doc), maxDocumentBytes)
	}
	var d struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return "", fmt.Errorf("%s: not an OpenID configuration: %w", DiscoveryPath, err)
	}
	if d.Issuer == "" {
		return "", fmt.Errorf("%s: no issuer", DiscoveryPath)
	}
	return d.Issuer, nil
}

// parseKeySet returns the public signature keys of a JWKS document. Keys
// that are not public asymmetric signature keys are skipped; a set with
// none is an error.
func parseKeySet(raw []byte) ([]jose.JSONWebKey, error) {
	if len(raw) > maxDocumentBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", JWKSPath, len(raw), maxDocumentBytes)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("%s: not a JSON Web Key Set: %w", JWKSPath, err)
	}
	var keys []jose.JSONWebKey
	for _, r := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			continue // a key type or curve this package does not use
		}
		if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no public signature key among %d keys", JWKSPath, len(set.Keys))
	}
	return keys, nil
}
