package satokentest

import (
	"encoding/json"
	"io"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// ServeHTTP serves what kube-apiserver serves of the issuer: GET of the
// discovery document and the keys, POST of TokenReviews. Anything else is
// 404; with DiscoveryDown, discovery and keys are 403 (a cluster that does
// not grant them).
func (i *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && (r.URL.Path == "/.well-known/openid-configuration" || r.URL.Path == "/openid/v1/jwks"):
		body, err := i.GetRaw(r.Context(), r.URL.Path)
		if err != nil {
			status(w, http.StatusForbidden, "Forbidden")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		var review authenticationv1.TokenReview
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := json.Unmarshal(body, &review); err != nil {
			status(w, http.StatusBadRequest, "BadRequest")
			return
		}
		st, err := i.ReviewToken(r.Context(), review.Spec.Token, review.Spec.Audiences)
		if err != nil {
			status(w, http.StatusServiceUnavailable, "ServiceUnavailable")
			return
		}
		review.Spec.Token = ""
		review.Status = *st
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	default:
		status(w, http.StatusNotFound, "NotFound")
	}
}

// Handles reports whether ServeHTTP serves r.
func Handles(r *http.Request) bool {
	switch r.URL.Path {
	case "/.well-known/openid-configuration", "/openid/v1/jwks", "/apis/authentication.k8s.io/v1/tokenreviews":
		return true
	}
	return false
}

func status(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code})
}
