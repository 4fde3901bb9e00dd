package nacos

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
)

// Nacos v2 result codes (Nacos's ErrorCode, as the 2.x Open API page lists them: nacos-group/nacos-group.github.io: src/content/docs/v2/zh-cn/guide/user/open-api.md). Only the codes the
// compatibility layer answers with are listed.
const (
	CodeSuccess              = 0
	CodeParameterMissing     = 10000
	CodeAccessDenied         = 10001
	CodeParameterValidate    = 20002
	CodeMediaType            = 20003
	CodeResourceNotFound     = 20004
	CodeResourceConflict     = 20005
	CodeParameterMismatch    = 20009
	CodeServiceName          = 21000
	CodeWeight               = 21001
	CodeInstanceMetadata     = 21002
	CodeInstanceNotFound     = 21003
	CodeInstanceError        = 21004
	CodeServiceMetadata      = 21005
	CodeSelector             = 21006
	CodeServiceAlreadyExist  = 21007
	CodeServiceNotExist      = 21008
	CodeServiceDeleteFailure = 21009
	CodeHealthyParamMiss     = 21010
	CodeHealthCheckRunning   = 21011
	CodeIllegalNamespace     = 22000
	CodeServerError          = 30000
)

// Message is the message Nacos pairs with a v2 result code.
func Message(code int) string {
	switch code {
	case CodeSuccess:
		return "success"
	case CodeParameterMissing:
		return "parameter missing"
	case CodeAccessDenied:
		return "access denied"
	case CodeParameterValidate:
		return "parameter validate error"
	case CodeMediaType:
		return "MediaType Error"
	case CodeResourceNotFound:
		return "resource not found"
	case CodeResourceConflict:
		return "resource conflict"
	case CodeParameterMismatch:
		return "parameter mismatch"
	case CodeServiceName:
		return "service name error"
	case CodeWeight:
		return "weight error"
	case CodeInstanceMetadata:
		return "instance metadata error"
	case CodeInstanceNotFound:
		return "instance not found"
	case CodeInstanceError:
		return "instance error"
	case CodeServiceMetadata:
		return "service metadata error"
	case CodeSelector:
		return "selector error"
	case CodeServiceAlreadyExist:
		return "service already exist"
	case CodeServiceNotExist:
		return "service not exist"
	case CodeServiceDeleteFailure:
		return "service delete failure"
	case CodeHealthyParamMiss:
		return "healthy param miss"
	case CodeHealthCheckRunning:
		return "health check still running"
	case CodeIllegalNamespace:
		return "illegal namespace"
	default:
		return "server error"
	}
}

// Error is an error answered in Nacos's shapes: v1 as the text "caused: msg;" with
// the HTTP status, v2 as {"code": code, "message": <code's message>, "data": msg}.
type Error struct {
	Status int
	Code   int
	Msg    string
	// NotLeader marks a 503 answered because this node is not the leader (or knows
	// none): it carries X-Roster-Not-Leader so that a forwarding follower retries.
	NotLeader bool
	// Auth marks a refusal by access control: v1 answers it in the shape of Nacos's
	// AuthFilter (springErrorBody), not as "caused: ...;".
	Auth  bool
	cause error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap exposes the cause, so that store sentinels stay matchable.
func (e *Error) Unwrap() error { return e.cause }

// Err builds an Error.
func Err(status, code int, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Missing is Nacos's answer to a required parameter that is absent or blank.
func Missing(name, typ string) *Error {
	return Err(http.StatusBadRequest, CodeParameterMissing,
		"Required parameter '%s' type %s is not present", name, typ)
}

// Invalid is a 400 parameter validate error.
func Invalid(format string, args ...any) *Error {
	return Err(http.StatusBadRequest, CodeParameterValidate, format, args...)
}

// weightMessage is Nacos's text for a weight outside [0, 10000].
const weightMessage = "instance format invalid: The weights range from 0.0 to 10000.0"

// Resource says which kind of object a route writes; it picks the code of a
// metadata validation error (instance 21002, service 21005).
type Resource int

const (
	ResourceOther Resource = iota
	ResourceInstance
	ResourceService
)

// paramName maps a model.ValidationError field to the Nacos parameter it came from.
func paramName(field string) string {
	switch field {
	case "namespace":
		return "namespaceId"
	case "group":
		return "groupName"
	case "service":
		return "serviceName"
	case "cluster":
		return "clusterName"
	default:
		if rest, ok := strings.CutPrefix(field, "healthCheck."); ok {
			return "healthChecker." + rest
		}
		return field
	}
}

// validation turns a store validation error into Nacos's code for the parameter:
// weight 21001, metadata 21002 (instances) or 21005 (services), service and group names
// 21000, namespace 22000, anything else 20002. All are 400s; nothing was written.
func validation(ve *model.ValidationError, res Resource) *Error {
	param := paramName(ve.Field)
	e := Invalid("Param '%s' is illegal: %s", param, ve.Message)
	e.cause = ve
	switch ve.Field {
	case "weight":
		e.Code, e.Msg = CodeWeight, weightMessage
	case "metadata":
		switch res {
		case ResourceInstance:
			e.Code = CodeInstanceMetadata
		case ResourceService:
			e.Code = CodeServiceMetadata
		}
	case "service", "group":
		e.Code = CodeServiceName
	case "namespace":
		e.Code = CodeIllegalNamespace
	}
	return e
}

// Classify maps any error to its Nacos answer. Errors the Nacos handlers raise
// themselves are *Error already; store validation errors keep their parameter's
// code; the rest (consensus, forwarding, limits) take the status the native API gives
// them (classify) with code 30000.
func Classify(err error, res Resource) *Error {
	var ne *Error
	if errors.As(err, &ne) {
		return ne
	}
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		return validation(ve, res)
	}
	switch {
	case errors.Is(err, acl.ErrPermissionDenied):
		return AuthErr(MessageDenied, err)
	case errors.Is(err, acl.ErrUnauthenticated), errors.Is(err, acl.ErrNotBootstrapped):
		// The Nacos routes resolve tokens through authenticator, which says whether one was
		// presented; an error from deeper down means none was checked.
		return AuthErr(MessageNoUser, err)
	}
	status, code, _ := httpx.Classify(err)
	out := &Error{Status: status, Code: CodeServerError, Msg: httpx.Message(err), cause: err}
	switch {
	case errors.Is(err, httpx.ErrMethodNotAllowed):
		out.Code = CodeParameterValidate
	case errors.Is(err, httpx.ErrCrossOrigin):
		out.Code = CodeAccessDenied
	case errors.Is(err, httpx.ErrUnsupportedMedia):
		out.Status, out.Code = http.StatusBadRequest, CodeMediaType
	case errors.Is(err, model.ErrInvalid):
		out.Code = CodeParameterValidate
	case errors.Is(err, model.ErrNotFound):
		out.Code = CodeResourceNotFound
	case errors.Is(err, model.ErrConflict):
		out.Code = CodeResourceConflict
	case status == http.StatusRequestEntityTooLarge:
		out.Code = CodeParameterValidate
	}
	out.NotLeader = code == api.CodeNotLeader || code == api.CodeNoLeader
	return out
}

// Result is the v2 envelope of every answer.
type Result struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}
