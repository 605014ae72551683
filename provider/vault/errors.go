package vault

import (
	"errors"
	"fmt"
	"net/http"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/keymount/keymount/internal/vaultmsg"
	"github.com/keymount/keymount/provider/server"
)

// vaultError wraps err of a request to Vault (op on path for role) with the
// gRPC kind its status means. The message carries Vault's own words, never
// a token (Vault's error messages do not echo request bodies).
func vaultError(op, path, role string, err error) error {
	kind := server.ErrUnavailable
	msg := err.Error()
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		msg = fmt.Sprintf("HTTP %d: %s", re.StatusCode, vaultmsg.Join(re.Errors))
		switch re.StatusCode {
		case http.StatusForbidden:
			kind = server.ErrPermissionDenied
		case http.StatusNotFound:
			kind = server.ErrNotFound
		case http.StatusBadRequest, http.StatusMethodNotAllowed:
			kind = server.ErrFailedPrecondition
		}
	}
	return server.Mark(fmt.Errorf("vault %s %s (role %q): %s", op, path, role, msg), kind)
}

// loginError is vaultError for a login: Vault refusing a login (400 for an
// unknown role or a token the role does not bind) is PermissionDenied.
func loginError(path, role string, err error) error {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
		return server.Mark(fmt.Errorf("vault login %s (role %q): HTTP 400: %s", path, role, vaultmsg.Join(re.Errors)), server.ErrPermissionDenied)
	}
	return vaultError("login", path, role, err)
}
