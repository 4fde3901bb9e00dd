package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
)

// params are a Nacos request's parameters: the query string first, then an
// application/x-www-form-urlencoded body, on every method (DELETE and GET included). A
// name given in both takes the query string's value, as a servlet container does.
// Values are trimmed; a blank value counts as absent.
type params struct {
	vals url.Values
}

// parseNacosParams merges the query string and the buffered form body. A malformed
// query or body, a name or value that is not valid UTF-8, or a body that is not a form,
// is a 400 naming the problem.
func parseNacosParams(r *http.Request) (params, error) {
	if err := httpx.CheckQuery(r.URL.RawQuery); err != nil {
		return params{}, err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return params{}, nacos.Invalid("malformed query string: %v", err)
	}
	body := httpx.Body(r)
	if len(bytes.TrimSpace(body)) == 0 {
		return params{vals: q}, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			return params{}, nacos.Err(http.StatusBadRequest, nacos.CodeMediaType,
				"Content-Type %q is not supported: send the parameters in the query string or as an application/x-www-form-urlencoded body", ct)
		}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return params{}, nacos.Invalid("malformed form body: %v", err)
	}
	if err := checkFormText(form); err != nil {
		return params{}, err
	}
	for k, vs := range form {
		q[k] = append(q[k], vs...)
	}
	return params{vals: q}, nil
}

// checkFormText refuses a form whose names or values are not valid UTF-8 once
// unescaped (the first such name in sorted order), as httpx.CheckQuery does for the
// query string: Roster stores text, and such bytes could only be stored changed.
func checkFormText(form url.Values) error {
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !utf8.ValidString(k) {
			return nacos.Invalid("malformed form body: a parameter name is not valid UTF-8")
		}
		for _, v := range form[k] {
			switch {
			case utf8.ValidString(v):
			case k == "":
				return nacos.Invalid("malformed form body: a value is not valid UTF-8")
			default:
				return model.Invalid(k, "must be valid UTF-8")
			}
		}
	}
	return nil
}

// str returns the first non-blank value among names (trimmed), or "".
func (p params) str(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(p.vals.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// name returns the first of names that has a non-blank value, or "".
func (p params) name(names ...string) string {
	for _, n := range names {
		if strings.TrimSpace(p.vals.Get(n)) != "" {
			return n
		}
	}
	return ""
}

// required returns the value of a required parameter (10000 when absent or blank).
func (p params) required(name, typ string) (string, error) {
	v := p.str(name)
	if v == "" {
		return "", nacos.Missing(name, typ)
	}
	return v, nil
}

// boolean parses the first present of names. Accepted spellings (any case): true, on,
// yes, 1 and false, off, no, 0, as Spring binds a Boolean; anything else is a 400.
func (p params) boolean(names ...string) (value, present bool, err error) {
	n := p.name(names...)
	if n == "" {
		return false, false, nil
	}
	v := p.str(n)
	switch strings.ToLower(v) {
	case "true", "on", "yes", "1":
		return true, true, nil
	case "false", "off", "no", "0":
		return false, true, nil
	}
	return false, true, nacos.Invalid("Param '%s' must be true or false, got %q", n, v)
}

// integer parses an optional integer parameter.
func (p params) integer(name string) (value int, present bool, err error) {
	v := p.str(name)
	if v == "" {
		return 0, false, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		return 0, true, nacos.Invalid("Param '%s' must be an integer, got %q", name, v)
	}
	return i, true, nil
}

// page reads the paging parameters of a list: pageNo (default 1; below 1 it is the
// first page, as Nacos computes max((pageNo-1)*pageSize, 0) — nacos-sdk-go v1 sends 0
// when the application gives no page) and pageSize (default defSize) at least 0, and the
// page must start within httpx.MaxPageOffset (a larger (pageNo-1)*pageSize could
// overflow and wrap around). Nacos fails on a negative size; Roster refuses it with a
// 400 naming the parameter.
func (p params) page(defSize int) (page, size int, err error) {
	page, size = 1, defSize
	if v, ok, err := p.integer("pageNo"); err != nil {
		return 0, 0, err
	} else if ok {
		page = max(v, 1)
	}
	if v, ok, err := p.integer("pageSize"); err != nil {
		return 0, 0, err
	} else if ok {
		if v < 0 {
			return 0, 0, nacos.Invalid("Param 'pageSize' must not be negative, got %d", v)
		}
		size = v
	}
	if _, err := httpx.PageOffset("pageNo", page, size); err != nil {
		return 0, 0, err
	}
	return page, size, nil
}

// clusterFilter reads a list's cluster filter (the comma-separated names of name) and
// refuses a name that is not a valid cluster name, naming the parameter: an instance
// list is cached and pushed under it.
func (p params) clusterFilter(name string) (string, error) {
	v := p.str(name)
	if err := nacos.CheckClusterList(name, v); err != nil {
		return "", err
	}
	return v, nil
}

// port parses an optional port parameter strictly (model.ParsePort: digits only, no
// sign or leading zeros; the surrounding blanks every value loses are not part of it).
func (p params) port(name string) (value int, present bool, err error) {
	v := p.str(name)
	if v == "" {
		return 0, false, nil
	}
	port, err := model.ParsePort(name, v)
	return port, true, err
}

// float parses an optional finite number.
func (p params) float(name string) (value float64, present bool, err error) {
	v := p.str(name)
	if v == "" {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, true, nacos.Invalid("Param '%s' must be a number, got %q", name, v)
	}
	return f, true, nil
}

// serviceKey resolves namespaceId (blank: public), groupName (blank: DEFAULT_GROUP)
// and the required serviceName, which may already be grouped (group@@service). A
// grouped name's group wins; a groupName that contradicts it is refused (20009) rather
// than silently ignored as Nacos does. Names are checked with the store's rules.
func serviceKey(p params) (model.ServiceKey, error) {
	raw, err := p.required("serviceName", "String")
	if err != nil {
		return model.ServiceKey{}, err
	}
	key, err := nacos.ResolveServiceKey(p.str("namespaceId"), p.str("groupName"), raw)
	switch {
	case errors.Is(err, nacos.ErrGroupedName):
		return model.ServiceKey{}, nacos.Err(http.StatusBadRequest, nacos.CodeServiceName,
			"Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName', got %q", raw)
	case errors.Is(err, nacos.ErrGroupMismatch):
		return model.ServiceKey{}, nacos.Err(http.StatusBadRequest, nacos.CodeParameterMismatch,
			"Param 'groupName' (%q) does not match the group of serviceName %q", key.Group, raw)
	case err != nil:
		return model.ServiceKey{}, err
	}
	return key, nil
}

// instanceRef resolves the service key, the required ip and the required port.
// Parameters are checked in Nacos's order: serviceName, ip, port.
func instanceRef(p params) (model.InstanceRef, error) {
	if _, err := p.required("serviceName", "String"); err != nil {
		return model.InstanceRef{}, err
	}
	ip, err := p.required("ip", "String")
	if err != nil {
		return model.InstanceRef{}, err
	}
	if _, err := p.required("port", "Integer"); err != nil {
		return model.InstanceRef{}, err
	}
	key, err := serviceKey(p)
	if err != nil {
		return model.InstanceRef{}, err
	}
	port, _, err := p.port("port")
	if err != nil {
		return model.InstanceRef{}, err
	}
	ref := model.InstanceRef{Namespace: key.Namespace, Group: key.Group, Service: key.Service, IP: ip, Port: port}
	if err := model.ValidateInstanceRef(ref); err != nil {
		return model.InstanceRef{}, err
	}
	return ref, nil
}

// metadata parses a metadata parameter the way Nacos's parseMetadata does: a JSON
// object first (string values; numbers and booleans are taken as their text, null
// values dropped), else the form k1=v1,k2=v2. Anything else is a 400
// "metadata format incorrect" with the given code (21002 for instances, 21005 for
// services). Blank means no metadata.
func metadata(raw string, code int) (map[string]string, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	if md, ok, err := jsonMetadata(raw, code); ok {
		return md, err
	}
	md := map[string]string{}
	for _, pair := range javaSplit(raw, ",") {
		kv := javaSplit(pair, "=")
		if len(kv) != 2 {
			return nil, nacos.Err(http.StatusBadRequest, code, "metadata format incorrect:%s", raw)
		}
		md[kv[0]] = kv[1]
	}
	return md, nil
}

// jsonMetadata decodes raw as one JSON object; ok is false when raw is not a JSON
// object at all (the caller then tries the k=v form).
func jsonMetadata(raw string, code int) (map[string]string, bool, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, false, nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false, nil
	}
	// The decoder turns an unpaired surrogate escape into U+FFFD without a word.
	if off, what := httpx.LossyJSONString([]byte(raw)); off >= 0 {
		return nil, true, nacos.Err(http.StatusBadRequest, code,
			"metadata format incorrect:%s (%s at offset %d)", raw, what, off)
	}
	md := make(map[string]string, len(obj))
	for k, v := range obj {
		switch val := v.(type) {
		case nil:
		case string:
			md[k] = val
		case json.Number:
			md[k] = val.String()
		case bool:
			md[k] = strconv.FormatBool(val)
		default:
			return nil, true, nacos.Err(http.StatusBadRequest, code,
				"metadata format incorrect:%s (the value of %q must be a string)", raw, k)
		}
	}
	return md, true, nil
}

// javaSplit splits like Java's String.split with a literal separator: trailing empty
// strings are dropped.
func javaSplit(s, sep string) []string {
	parts := strings.Split(s, sep)
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// parseNacosInstanceForm reads ip, port, the service key, clusterName (legacy cluster),
// weight, enabled (legacy enable), healthy, metadata and ephemeral, and checks each
// given value with the store's rules. clientIP, udpPort, app, env, tid, isCheck and the
// auth parameters are accepted and ignored.
func parseNacosInstanceForm(p params, limits model.Limits) (nacos.InstanceForm, error) {
	var f nacos.InstanceForm
	var err error
	if f.Ref, err = instanceRef(p); err != nil {
		return f, err
	}
	if c := p.str("clusterName", "cluster"); c != "" {
		if err := model.ValidateClusterName(c); err != nil {
			return f, err
		}
		f.Cluster = &c
	}
	if w, ok, err := p.float("weight"); err != nil {
		return f, err
	} else if ok {
		if err := model.ValidateWeight(w); err != nil {
			return f, err
		}
		f.Weight = &w
	}
	if b, ok, err := p.boolean("enabled", "enable"); err != nil {
		return f, err
	} else if ok {
		f.Enabled = &b
	}
	if b, ok, err := p.boolean("healthy"); err != nil {
		return f, err
	} else if ok {
		f.Healthy = &b
	}
	if b, ok, err := p.boolean("ephemeral"); err != nil {
		return f, err
	} else if ok {
		f.Ephemeral = &b
	}
	if raw := p.str("metadata"); raw != "" {
		md, err := metadata(raw, nacos.CodeInstanceMetadata)
		if err != nil {
			return f, err
		}
		if err := limits.AdmitMetadata("metadata", md); err != nil {
			return f, err
		}
		f.Metadata = &md
	}
	return f, nil
}

// registration builds the instance a Nacos registration describes, with Nacos's
// defaults (cluster DEFAULT, weight 1, enabled, healthy, no metadata), checked under
// the admission rules (model.AdmitInstance). An ephemeral registration, explicit or by Nacos's default when
// ephemeral is absent, is refused with Nacos's wording: Roster keeps persistent
// instances only.
func registration(p params, limits model.Limits) (model.Instance, error) {
	f, err := parseNacosInstanceForm(p, limits)
	if err != nil {
		return model.Instance{}, err
	}
	return f.Registration(limits)
}
