package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/registry"
)

// healthChecker is Nacos's health checker JSON: {"type":"TCP"}, {"type":"NONE"},
// {"type":"HTTP","path":"/health","headers":"k1:v1|k2:v2","expectedResponseCode":200}
// or {"type":"MYSQL","user":"probe","pwd":"***","cmd":"SELECT 1"} (the password is
// never shown).
type healthChecker struct {
	Type                 string `json:"type"`
	Path                 string `json:"path,omitempty"`
	Headers              string `json:"headers,omitempty"`
	ExpectedResponseCode int    `json:"expectedResponseCode,omitempty"`
	User                 string `json:"user,omitempty"`
	Pwd                  string `json:"pwd,omitempty"`
	Cmd                  string `json:"cmd,omitempty"`
}

// toNacosHealthChecker shows a cluster's spec as Nacos's health checker. An HTTP spec
// with several expected statuses shows the first; with none (any 2xx or 3xx) it shows
// no expectedResponseCode.
func toNacosHealthChecker(hc model.HealthCheck) healthChecker {
	out := healthChecker{Type: string(hc.Type)}
	if hc.Type == model.CheckMySQL {
		hc = hc.Redacted()
		out.User, out.Pwd, out.Cmd = hc.User, hc.Password, hc.Query
		return out
	}
	if !hc.Type.IsHTTP() {
		return out
	}
	out.Path = hc.Path
	keys := make([]string, 0, len(hc.Headers))
	for k := range hc.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + hc.Headers[k]
	}
	out.Headers = strings.Join(parts, "|")
	if len(hc.ExpectedStatus) > 0 {
		out.ExpectedResponseCode = hc.ExpectedStatus[0]
	}
	return out
}

// parseNacosHealthChecker maps Nacos's health checker JSON onto Roster's spec (type,
// path, headers, expected status; port and timings are set by the caller). The type is
// matched case-insensitively: TCP, HTTP, MYSQL or NONE; others are refused. MYSQL's
// user, pwd and cmd are the check's user, password and query (pwd "***", what reads
// show, keeps the stored password). HTTP
// headers are "name:value" pairs separated by '|' (Nacos's splitter), split at the
// first ':' so that values may contain ':'; a pair without ':' is refused rather than
// dropped. expectedResponseCode defaults to 200, as in Nacos, and is honoured.
func parseNacosHealthChecker(raw string) (model.HealthCheck, error) {
	var in struct {
		Type                 string          `json:"type"`
		Path                 string          `json:"path"`
		Headers              string          `json:"headers"`
		ExpectedResponseCode json.RawMessage `json:"expectedResponseCode"`
		User                 string          `json:"user"`
		Pwd                  string          `json:"pwd"`
		Cmd                  string          `json:"cmd"`
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&in); err != nil {
		return model.HealthCheck{}, nacos.Invalid("Param 'healthChecker' is not a valid health checker JSON object: %v", err)
	}
	// The decoder turns an unpaired surrogate escape into U+FFFD without a word.
	if off, what := httpx.LossyJSONString([]byte(raw)); off >= 0 {
		return model.HealthCheck{}, nacos.Invalid("Param 'healthChecker' is illegal: it has %s at offset %d", what, off)
	}
	var hc model.HealthCheck
	switch t := strings.ToUpper(strings.TrimSpace(in.Type)); t {
	case "TCP":
		hc.Type = model.CheckTCP
	case "NONE":
		hc.Type = model.CheckNone
	case "HTTP":
		hc.Type = model.CheckHTTP
	case "MYSQL":
		hc.Type = model.CheckMySQL
		hc.User, hc.Password, hc.Query = strings.TrimSpace(in.User), in.Pwd, strings.TrimSpace(in.Cmd)
		return hc, nil
	case "":
		return hc, nacos.Invalid("Param 'healthChecker' has no type: use TCP, HTTP, MYSQL or NONE")
	default:
		return hc, nacos.Invalid("health checker type %q is not supported: use TCP, HTTP, MYSQL or NONE", in.Type)
	}
	if hc.Type != model.CheckHTTP {
		return hc, nil
	}
	hc.Path = strings.TrimSpace(in.Path)
	for _, pair := range strings.Split(in.Headers, "|") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return hc, nacos.Invalid("healthChecker.headers: %q is not a name:value pair (pairs are separated by '|')", pair)
		}
		if hc.Headers == nil {
			hc.Headers = map[string]string{}
		}
		hc.Headers[name] = value
	}
	code := 200
	if raw := bytes.TrimSpace(in.ExpectedResponseCode); len(raw) > 0 && string(raw) != "null" {
		// Jackson accepts the code as a number or a numeric string.
		raw = bytes.Trim(raw, `"`)
		if err := json.Unmarshal(raw, &code); err != nil {
			return hc, nacos.Invalid("healthChecker.expectedResponseCode must be an HTTP status code, got %s", in.ExpectedResponseCode)
		}
	}
	hc.ExpectedStatus = []int{code}
	return hc, nil
}

// putCluster serves PUT .../cluster: create or replace a cluster's health checker
// and metadata. healthChecker is required. The probe uses the instance's own port when
// useInstancePort4Check is absent or true (Roster never falls back to port 80); with
// useInstancePort4Check=false it uses checkPort, which is then required. The service
// must exist (400, 21008, as Nacos). Interval, timeout, rise and fall, which Nacos's
// JSON cannot express, keep the cluster's current values (defaults for a new cluster).
func (s *API) putCluster(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	key, err := serviceKey(p)
	if err != nil {
		return nil, err
	}
	// A cluster is written into its service: a name the admission rules refuse is
	// refused as such, not as a service that does not exist.
	if err := model.AdmitServiceKey(key); err != nil {
		return nil, err
	}
	name := p.str("clusterName", "cluster")
	if name == "" {
		return nil, nacos.Missing("clusterName", "String")
	}
	if err := model.ValidateClusterName(name); err != nil {
		return nil, err
	}
	raw, err := p.required("healthChecker", "String")
	if err != nil {
		return nil, err
	}
	hc, err := parseNacosHealthChecker(raw)
	if err != nil {
		return nil, err
	}
	useInstancePort, present, err := p.boolean("useInstancePort4Check")
	if err != nil {
		return nil, err
	}
	if present && !useInstancePort {
		port, ok, err := p.port("checkPort")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, nacos.Missing("checkPort", "int")
		}
		hc.Port = port
	}
	var md map[string]string
	if raw := p.str("metadata"); raw != "" {
		if md, err = metadata(raw, nacos.CodeParameterValidate); err != nil {
			return nil, err
		}
	}
	// The merge with the stored cluster is conditional on the service's index as read:
	// a concurrent change is read again and merged, and a service deleted meanwhile is
	// not recreated.
	for range maxCASRetries {
		view, found, err := s.leaderView(r, key)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, errNacosServiceNotFound(key)
		}
		merged := hc
		if old, ok := findCluster(view, name); ok {
			merged.Interval, merged.Timeout = old.HealthCheck.Interval, old.HealthCheck.Timeout
			merged.Rise, merged.Fall = old.HealthCheck.Rise, old.HealthCheck.Fall
			merged.DeregisterAfter = old.HealthCheck.DeregisterAfter // Nacos has no such field
		}
		merged = merged.WithDefaults()
		c := model.Cluster{Namespace: key.Namespace, Group: key.Group, Service: key.Service, Name: name, HealthCheck: merged, Metadata: md}
		err = wrote(w)(s.reg.UpsertCluster(r.Context(), c, registry.IfServiceIndex(view.Service.ModifyIndex)))
		if errors.Is(err, model.ErrCASMismatch) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return "ok", nil
	}
	return nil, errNacosConcurrentChange(key)
}
