package nacos

import (
	"errors"
	"net/http"

	"github.com/rosterhq/roster/acl"
)

// AccessTokenParam is the parameter (HTTP) and header (gRPC) a Nacos client presents
// its token in (Nacos's Constants.ACCESS_TOKEN).
const AccessTokenParam = "accessToken"

// The texts of Nacos's refusals: its default auth plugin's AccessException messages
// (AbstractAuthenticationManager and NacosSignatureAlgorithm).
const (
	// MessageNoUser: no token was presented, or a login's credentials are wrong.
	MessageNoUser = "user not found!"
	// MessageTokenInvalid: the token presented is not known to the cluster.
	MessageTokenInvalid = "token invalid!"
	// MessageDenied: the token lacks the permission the request needs.
	MessageDenied = "authorization failed!"
)

// AuthErr is a refusal by access control: 403, v2 code 10001 (access denied), with
// one of Nacos's texts. Which permission was missing is not said: Nacos does not say it.
func AuthErr(msg string, cause error) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeAccessDenied, Msg: msg, Auth: true, cause: cause}
}

// AuthError maps an error of Registry.Authenticate for a request that presented
// secret ("" when none).
func AuthError(secret string, err error) error {
	if !errors.Is(err, acl.ErrUnauthenticated) && !errors.Is(err, acl.ErrNotBootstrapped) {
		return err
	}
	if secret == "" {
		return AuthErr(MessageNoUser, err)
	}
	return AuthErr(MessageTokenInvalid, err)
}
