package nacos

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
)

// nacosParams are a Nacos request's parameters: the query string first, then an
// application/x-www-form-urlencoded body, on every method (DELETE and GET included). A
// name given in both takes the query string's value, as a servlet container does.
// Values are trimmed; a blank value counts as absent.
type nacosParams struct {
	vals url.Values
}

// parseNacosParams merges the query string and the buffered form body. A malformed
// query or body, a name or value that is not valid UTF-8, or a body that is not a form,
// is a 400 naming the problem.
func parseNacosParams(r *http.Request) (nacosParams, error) {
	if err := httpx.CheckQuery(r.URL.RawQuery); err != nil {
		return nacosParams{}, err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nacosParams{}, Invalid("malformed query string: %v", err)
	}
	body := httpx.Body(r)
	if len(bytes.TrimSpace(body)) == 0 {
		return nacosParams{vals: q}, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			return nacosParams{}, nacosErr(http.StatusBadRequest, CodeMediaType,
				"Content-Type %q is not supported: send the parameters in the query string or as an application/x-www-form-urlencoded body", ct)
		}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nacosParams{}, Invalid("malformed form body: %v", err)
	}
	if err := checkFormText(form); err != nil {
		return nacosParams{}, err
	}
	for k, vs := range form {
		q[k] = append(q[k], vs...)
	}
	return nacosParams{vals: q}, nil
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
			return Invalid("malformed form body: a parameter name is not valid UTF-8")
		}
		for _, v := range form[k] {
			switch {
			case utf8.ValidString(v):
			case k == "":
				return Invalid("malformed form body: a value is not valid UTF-8")
			default:
				return model.Invalid(k, "must be valid UTF-8")
			}
		}
	}
	return nil
}

// str returns the first non-blank value among names (trimmed), or "".
func (p nacosParams) str(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(p.vals.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// name returns the first of names that has a non-blank value, or "".
func (p nacosParams) name(names ...string) string {
	for _, n := range names {
		if strings.TrimSpace(p.vals.Get(n)) != "" {
			return n
		}
	}
	return ""
}

// required returns the value of a required parameter (10000 when absent or blank).
func (p nacosParams) required(name, typ string) (string, error) {
	v := p.str(name)
	if v == "" {
		return "", Missing(name, typ)
	}
	return v, nil
}

// boolean parses the first present of names. Accepted spellings (any case): true, on,
// yes, 1 and false, off, no, 0, as Spring binds a Boolean; anything else is a 400.
func (p nacosParams) boolean(names ...string) (value, present bool, err error) {
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
	return false, true, Invalid("Param '%s' must be true or false, got %q", n, v)
}

// integer parses an optional integer parameter.
func (p nacosParams) integer(name string) (value int, present bool, err error) {
	v := p.str(name)
	if v == "" {
		return 0, false, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		return 0, true, Invalid("Param '%s' must be an integer, got %q", name, v)
	}
	return i, true, nil
}

// page reads the paging parameters of a list: pageNo (default 1; below 1 it is the
// first page, as Nacos computes max((pageNo-1)*pageSize, 0) — nacos-sdk-go v1 sends 0
// when the application gives no page) and pageSize (default defSize) at least 0, and the
// page must start within httpx.MaxPageOffset (a larger (pageNo-1)*pageSize could
// overflow and wrap around). Nacos fails on a negative size; Roster refuses it with a
// 400 naming the parameter.
func (p nacosParams) page(defSize int) (page, size int, err error) {
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
			return 0, 0, Invalid("Param 'pageSize' must not be negative, got %d", v)
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
func (p nacosParams) clusterFilter(name string) (string, error) {
	v := p.str(name)
	if err := CheckClusterList(name, v); err != nil {
		return "", err
	}
	return v, nil
}

// CheckClusterList is the one check of a comma-separated cluster list, for every Nacos
// surface: each non-blank name must be a cluster name; a refusal names field.
func CheckClusterList(field, list string) error {
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if err := model.ValidateClusterName(c); err != nil {
			var ve *model.ValidationError
			if errors.As(err, &ve) {
				return model.Invalid(field, "%q is not a cluster name: %s", c, ve.Message)
			}
			return err
		}
	}
	return nil
}

// port parses an optional port parameter strictly (model.ParsePort: digits only, no
// sign or leading zeros; the surrounding blanks every value loses are not part of it).
func (p nacosParams) port(name string) (value int, present bool, err error) {
	v := p.str(name)
	if v == "" {
		return 0, false, nil
	}
	port, err := model.ParsePort(name, v)
	return port, true, err
}

// float parses an optional finite number.
func (p nacosParams) float(name string) (value float64, present bool, err error) {
	v := p.str(name)
	if v == "" {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, true, Invalid("Param '%s' must be a number, got %q", name, v)
	}
	return f, true, nil
}

// nacosServiceKey resolves namespaceId (blank: public), groupName (blank: DEFAULT_GROUP)
// and the required serviceName, which may already be grouped (group@@service). A
// grouped name's group wins; a groupName that contradicts it is refused (20009) rather
// than silently ignored as Nacos does. Names are checked with the store's rules.
func nacosServiceKey(p nacosParams) (model.ServiceKey, error) {
	raw, err := p.required("serviceName", "String")
	if err != nil {
		return model.ServiceKey{}, err
	}
	key, err := ResolveServiceKey(p.str("namespaceId"), p.str("groupName"), raw)
	switch {
	case errors.Is(err, ErrGroupedName):
		return model.ServiceKey{}, nacosErr(http.StatusBadRequest, CodeServiceName,
			"Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName', got %q", raw)
	case errors.Is(err, ErrGroupMismatch):
		return model.ServiceKey{}, nacosErr(http.StatusBadRequest, CodeParameterMismatch,
			"Param 'groupName' (%q) does not match the group of serviceName %q", key.Group, raw)
	case err != nil:
		return model.ServiceKey{}, err
	}
	return key, nil
}

// Why resolveServiceKey refused a service reference, besides the model's validation.
var (
	ErrGroupedName   = errors.New("a grouped service name needs both parts")
	ErrGroupMismatch = errors.New("the group does not match the grouped service name")
)

// ResolveServiceKey is the one reading of a Nacos service reference, for every Nacos
// surface: the namespace ("" is public), the group ("" is DEFAULT_GROUP) and a service
// name that may carry its group ("group@@service", both parts non-empty, agreeing with
// group when that is given too). The key is validated; on errGroupMismatch it holds the
// group given.
func ResolveServiceKey(namespace, group, name string) (model.ServiceKey, error) {
	key := model.ServiceKey{Namespace: namespace, Group: group, Service: name}
	if g, svc, ok := strings.Cut(name, model.GroupSeparator); ok {
		if g == "" || svc == "" {
			return key, ErrGroupedName
		}
		if key.Group != "" && key.Group != g {
			return key, ErrGroupMismatch
		}
		key.Group, key.Service = g, svc
	}
	if key.Namespace == "" {
		key.Namespace = model.DefaultNamespace
	}
	if key.Group == "" {
		key.Group = model.DefaultGroup
	}
	return key, model.ValidateServiceKey(key)
}

// nacosInstanceRef resolves the service key, the required ip and the required port.
// Parameters are checked in Nacos's order: serviceName, ip, port.
func nacosInstanceRef(p nacosParams) (model.InstanceRef, error) {
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
	key, err := nacosServiceKey(p)
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

// nacosMetadata parses a metadata parameter the way Nacos's parseMetadata does: a JSON
// object first (string values; numbers and booleans are taken as their text, null
// values dropped), else the form k1=v1,k2=v2. Anything else is a 400
// "metadata format incorrect" with the given code (21002 for instances, 21005 for
// services). Blank means no metadata.
func nacosMetadata(raw string, code int) (map[string]string, error) {
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
			return nil, nacosErr(http.StatusBadRequest, code, "metadata format incorrect:%s", raw)
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
		return nil, true, nacosErr(http.StatusBadRequest, code,
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
			return nil, true, nacosErr(http.StatusBadRequest, code,
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

// InstanceForm is what a register, update or patch request says about an instance.
type InstanceForm struct {
	Ref model.InstanceRef
	// Each field is set only when its parameter was given.
	Cluster   *string
	Weight    *float64
	Enabled   *bool
	Healthy   *bool
	Metadata  *map[string]string
	Ephemeral *bool
}

// parseNacosInstanceForm reads ip, port, the service key, clusterName (legacy cluster),
// weight, enabled (legacy enable), healthy, metadata and ephemeral, and checks each
// given value with the store's rules. clientIP, udpPort, app, env, tid, isCheck and the
// auth parameters are accepted and ignored.
func parseNacosInstanceForm(p nacosParams, limits model.Limits) (InstanceForm, error) {
	var f InstanceForm
	var err error
	if f.Ref, err = nacosInstanceRef(p); err != nil {
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
		md, err := nacosMetadata(raw, CodeInstanceMetadata)
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

// nacosRegistration builds the instance a Nacos registration describes, with Nacos's
// defaults (cluster DEFAULT, weight 1, enabled, healthy, no metadata), checked under
// the admission rules (model.AdmitInstance). An ephemeral registration, explicit or by Nacos's default when
// ephemeral is absent, is refused with Nacos's wording: Roster keeps persistent
// instances only.
func nacosRegistration(p nacosParams, limits model.Limits) (model.Instance, error) {
	f, err := parseNacosInstanceForm(p, limits)
	if err != nil {
		return model.Instance{}, err
	}
	return f.Registration(limits)
}

// Registration is the instance the form registers (nacosRegistration).
func (f InstanceForm) Registration(limits model.Limits) (model.Instance, error) {
	ref := f.Ref
	in := model.Instance{
		Namespace: ref.Namespace, Group: ref.Group, Service: ref.Service, IP: ref.IP, Port: ref.Port,
		Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
	}
	if f.Cluster != nil {
		in.Cluster = *f.Cluster
	}
	if f.Weight != nil {
		in.Weight = *f.Weight
	}
	if f.Enabled != nil {
		in.Enabled = *f.Enabled
	}
	if f.Healthy != nil {
		in.Healthy = *f.Healthy
	}
	if f.Metadata != nil && len(*f.Metadata) > 0 {
		in.Metadata = *f.Metadata
	}
	if err := limits.AdmitInstance(in); err != nil {
		return model.Instance{}, err
	}
	if f.Ephemeral == nil || *f.Ephemeral {
		return model.Instance{}, errEphemeral(ref.ServiceKey(), "register")
	}
	return in, nil
}

// errEphemeral refuses an ephemeral instance with Nacos's own sentence, so that a
// client that forgot ephemeral=false fails loudly instead of losing its instance.
func errEphemeral(key model.ServiceKey, verb string) error {
	return nacosErr(http.StatusBadRequest, CodeInstanceError,
		"Current service %s is persistent service, can't %s ephemeral instance. "+
			"Roster keeps persistent instances only: send ephemeral=false", key.GroupedName(), verb)
}
