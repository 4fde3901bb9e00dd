package nacos

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
)

// Nacos v2 result codes (Nacos's ErrorCode, as the 2.x Open API page lists them: nacos-group/nacos-group.github.io: src/content/docs/v2/zh-cn/guide/user/open-api.md). Only the codes the
// compatibility layer answers with are listed.
const (
	nacosCodeSuccess              = 0
	nacosCodeParameterMissing     = 10000
	nacosCodeAccessDenied         = 10001
	nacosCodeParameterValidate    = 20002
	nacosCodeMediaType            = 20003
	nacosCodeResourceNotFound     = 20004
	nacosCodeResourceConflict     = 20005
	nacosCodeParameterMismatch    = 20009
	nacosCodeServiceName          = 21000
	nacosCodeWeight               = 21001
	nacosCodeInstanceMetadata     = 21002
	nacosCodeInstanceNotFound     = 21003
	nacosCodeInstanceError        = 21004
	nacosCodeServiceMetadata      = 21005
	nacosCodeSelector             = 21006
	nacosCodeServiceAlreadyExist  = 21007
	nacosCodeServiceNotExist      = 21008
	nacosCodeServiceDeleteFailure = 21009
	nacosCodeHealthyParamMiss     = 21010
	nacosCodeHealthCheckRunning   = 21011
	nacosCodeIllegalNamespace     = 22000
	nacosCodeServerError          = 30000
)

// nacosMessage is the message Nacos pairs with a v2 result code.
func nacosMessage(code int) string {
	switch code {
	case nacosCodeSuccess:
		return "success"
	case nacosCodeParameterMissing:
		return "parameter missing"
	case nacosCodeAccessDenied:
		return "access denied"
	case nacosCodeParameterValidate:
		return "parameter validate error"
	case nacosCodeMediaType:
		return "MediaType Error"
	case nacosCodeResourceNotFound:
		return "resource not found"
	case nacosCodeResourceConflict:
		return "resource conflict"
	case nacosCodeParameterMismatch:
		return "parameter mismatch"
	case nacosCodeServiceName:
		return "service name error"
	case nacosCodeWeight:
		return "weight error"
	case nacosCodeInstanceMetadata:
		return "instance metadata error"
	case nacosCodeInstanceNotFound:
		return "instance not found"
	case nacosCodeInstanceError:
		return "instance error"
	case nacosCodeServiceMetadata:
		return "service metadata error"
	case nacosCodeSelector:
		return "selector error"
	case nacosCodeServiceAlreadyExist:
		return "service already exist"
	case nacosCodeServiceNotExist:
		return "service not exist"
	case nacosCodeServiceDeleteFailure:
		return "service delete failure"
	case nacosCodeHealthyParamMiss:
		return "healthy param miss"
	case nacosCodeHealthCheckRunning:
		return "health check still running"
	case nacosCodeIllegalNamespace:
		return "illegal namespace"
	default:
		return "server error"
	}
}

// nacosError is an error answered in Nacos's shapes: v1 as the text "caused: msg;" with
// the HTTP status, v2 as {"code": code, "message": <code's message>, "data": msg}.
type nacosError struct {
	status int
	code   int
	msg    string
	// notLeader marks a 503 answered because this node is not the leader (or knows
	// none): it carries X-Roster-Not-Leader so that a forwarding follower retries.
	notLeader bool
	// auth marks a refusal by access control: v1 answers it in the shape of Nacos's
	// AuthFilter (springErrorBody), not as "caused: ...;".
	auth  bool
	cause error
}

func (e *nacosError) Error() string { return e.msg }

// Unwrap exposes the cause, so that store sentinels stay matchable.
func (e *nacosError) Unwrap() error { return e.cause }

// nacosErr builds a nacosError.
func nacosErr(status, code int, format string, args ...any) *nacosError {
	return &nacosError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// nacosMissing is Nacos's answer to a required parameter that is absent or blank.
func nacosMissing(name, typ string) *nacosError {
	return nacosErr(http.StatusBadRequest, nacosCodeParameterMissing,
		"Required parameter '%s' type %s is not present", name, typ)
}

// nacosInvalid is a 400 parameter validate error.
func nacosInvalid(format string, args ...any) *nacosError {
	return nacosErr(http.StatusBadRequest, nacosCodeParameterValidate, format, args...)
}

// nacosWeightMessage is Nacos's text for a weight outside [0, 10000].
const nacosWeightMessage = "instance format invalid: The weights range from 0.0 to 10000.0"

// nacosResource says which kind of object a route writes; it picks the code of a
// metadata validation error (instance 21002, service 21005).
type nacosResource int

const (
	nacosOther nacosResource = iota
	nacosInstance
	nacosService
)

// nacosParamName maps a model.ValidationError field to the Nacos parameter it came from.
func nacosParamName(field string) string {
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

// nacosValidation turns a store validation error into Nacos's code for the parameter:
// weight 21001, metadata 21002 (instances) or 21005 (services), service and group names
// 21000, namespace 22000, anything else 20002. All are 400s; nothing was written.
func nacosValidation(ve *model.ValidationError, res nacosResource) *nacosError {
	param := nacosParamName(ve.Field)
	e := nacosInvalid("Param '%s' is illegal: %s", param, ve.Message)
	e.cause = ve
	switch ve.Field {
	case "weight":
		e.code, e.msg = nacosCodeWeight, nacosWeightMessage
	case "metadata":
		switch res {
		case nacosInstance:
			e.code = nacosCodeInstanceMetadata
		case nacosService:
			e.code = nacosCodeServiceMetadata
		}
	case "service", "group":
		e.code = nacosCodeServiceName
	case "namespace":
		e.code = nacosCodeIllegalNamespace
	}
	return e
}

// nacosClassify maps any error to its Nacos answer. Errors the Nacos handlers raise
// themselves are *nacosError already; store validation errors keep their parameter's
// code; the rest (consensus, forwarding, limits) take the status the native API gives
// them (classify) with code 30000.
func (s *API) nacosClassify(err error, res nacosResource) *nacosError {
	var ne *nacosError
	if errors.As(err, &ne) {
		return ne
	}
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		return nacosValidation(ve, res)
	}
	switch {
	case errors.Is(err, acl.ErrPermissionDenied):
		return nacosAuthErr(nacosMessageDenied, err)
	case errors.Is(err, acl.ErrUnauthenticated), errors.Is(err, acl.ErrNotBootstrapped):
		// The Nacos routes resolve tokens through nacosAuth, which says whether one was
		// presented; an error from deeper down means none was checked.
		return nacosAuthErr(nacosMessageNoUser, err)
	}
	status, code, _ := httpx.Classify(err)
	out := &nacosError{status: status, code: nacosCodeServerError, msg: httpx.Message(err), cause: err}
	switch {
	case errors.Is(err, httpx.ErrMethodNotAllowed):
		out.code = nacosCodeParameterValidate
	case errors.Is(err, httpx.ErrCrossOrigin):
		out.code = nacosCodeAccessDenied
	case errors.Is(err, httpx.ErrUnsupportedMedia):
		out.status, out.code = http.StatusBadRequest, nacosCodeMediaType
	case errors.Is(err, model.ErrInvalid):
		out.code = nacosCodeParameterValidate
	case errors.Is(err, model.ErrNotFound):
		out.code = nacosCodeResourceNotFound
	case errors.Is(err, model.ErrConflict):
		out.code = nacosCodeResourceConflict
	case status == http.StatusRequestEntityTooLarge:
		out.code = nacosCodeParameterValidate
	}
	out.notLeader = code == api.CodeNotLeader || code == api.CodeNoLeader
	return out
}

// nacosResult is the v2 envelope of every answer.
type nacosResult struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// nacosV2 reports whether r is a /nacos/v2/ request (envelope answers).
func nacosV2(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/nacos/v2/") }

// writeNacosError answers err in the request's Nacos shape.
func (s *API) writeNacosError(w http.ResponseWriter, r *http.Request, err error, res nacosResource) {
	ne := s.nacosClassify(err, res)
	if ne.notLeader {
		w.Header().Set(api.HeaderNotLeader, "true")
	}
	switch {
	case ne.status == http.StatusInternalServerError:
		s.log.ErrorContext(r.Context(), "nacos request failed", "method", r.Method, "path", r.URL.Path, "status", ne.status, "err", err)
	case ne.status >= 500:
		s.log.WarnContext(r.Context(), "nacos request failed", "method", r.Method, "path", r.URL.Path, "status", ne.status, "err", err)
	}
	if nacosV2(r) {
		writeJSON(w, ne.status, nacosResult{Code: ne.code, Message: nacosMessage(ne.code), Data: ne.msg})
		return
	}
	if ne.auth {
		writeJSON(w, ne.status, springErrorBody{
			Timestamp: time.Now().UTC().Format(springTimestamp), Status: ne.status,
			Error: http.StatusText(ne.status), Message: ne.msg, Path: r.URL.Path,
		})
		return
	}
	writeText(w, ne.status, "caused: "+ne.msg+";")
}

// springErrorBody is the answer of Spring Boot's error controller, which Nacos's
// AuthFilter sends every refusal through (HttpServletResponse.sendError(403, message),
// with server.error.include-message=ALWAYS in Nacos's application.properties): the
// shape Nacos clients print when a v1 request is refused for want of a token or a right.
type springErrorBody struct {
	Timestamp string `json:"timestamp"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Message   string `json:"message"`
	Path      string `json:"path"`
}

// springTimestamp is how Spring Boot 2's Jackson writes the error's timestamp.
const springTimestamp = "2006-01-02T15:04:05.000-07:00"

// writeNacosOK answers a success: v2 wraps data in the envelope; v1 writes a string as
// plain text ("ok") and anything else as bare JSON.
func writeNacosOK(w http.ResponseWriter, r *http.Request, data any) {
	if nacosV2(r) {
		writeJSON(w, http.StatusOK, nacosResult{Code: nacosCodeSuccess, Message: nacosMessage(nacosCodeSuccess), Data: data})
		return
	}
	if text, ok := data.(string); ok {
		writeText(w, http.StatusOK, text)
		return
	}
	writeJSON(w, http.StatusOK, data)
}

// writeText writes a plain-text body.
func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text))
}
