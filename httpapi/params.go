package httpapi

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
)

// pathParam returns a path parameter, unescaped. chi matches on the raw path when the
// request's escaping is not the default one, and then hands back escaped values.
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
	}
	return v
}

// namespaceParam returns the validated {ns}.
func namespaceParam(r *http.Request) (string, error) {
	ns := pathParam(r, "ns")
	if err := model.ValidateNamespace(ns); err != nil {
		return "", err
	}
	return ns, nil
}

// serviceKeyParam returns the validated {ns}/{group}/{service}.
func serviceKeyParam(r *http.Request) (model.ServiceKey, error) {
	k := model.ServiceKey{
		Namespace: pathParam(r, "ns"),
		Group:     pathParam(r, "group"),
		Service:   pathParam(r, "service"),
	}
	if err := model.ValidateServiceKey(k); err != nil {
		return model.ServiceKey{}, err
	}
	return k, nil
}

// clusterParam returns the validated service key and {cluster}.
func clusterParam(r *http.Request) (model.ServiceKey, string, error) {
	k, err := serviceKeyParam(r)
	if err != nil {
		return k, "", err
	}
	name := pathParam(r, "cluster")
	if err := model.ValidateClusterName(name); err != nil {
		return k, "", err
	}
	return k, name, nil
}

// instanceRefParam returns the validated reference of .../instances/{ip}:{port}.
// IPv6 addresses are bracketed ([::1]:8080), literally or URL-escaped.
func instanceRefParam(r *http.Request) (model.InstanceRef, error) {
	k, err := serviceKeyParam(r)
	if err != nil {
		return model.InstanceRef{}, err
	}
	ip, port, err := parseAddr(pathParam(r, "addr"))
	if err != nil {
		return model.InstanceRef{}, err
	}
	return model.InstanceRef{Namespace: k.Namespace, Group: k.Group, Service: k.Service, IP: ip, Port: port}, nil
}

// parseAddr splits and validates ip:port; errors name "ip" or "port".
func parseAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return "", 0, invalid("port", "the instance address %q must be ip:port (IPv6 as [addr]:port)", addr)
		}
		return "", 0, invalid("ip", "the instance address %q must be ip:port (IPv6 as [addr]:port)", addr)
	}
	if err := model.ValidateIP(host); err != nil {
		return "", 0, err
	}
	port, err := model.ParsePort("port", p)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// pageParams parses ?page= (≥ 1, default 1) and ?size= (1..MaxPageSize, default
// DefaultPageSize). A page starting beyond httpx.MaxPageOffset is refused: (page-1)*size
// could overflow and wrap around to the first page.
func pageParams(r *http.Request) (page, size int, err error) {
	q := r.URL.Query()
	page, size = 1, DefaultPageSize
	if v := q.Get("page"); v != "" {
		page, err = strconv.Atoi(v)
		if err != nil || page < 1 {
			return 0, 0, invalid("page", "must be an integer ≥ 1, got %q", v)
		}
	}
	if v := q.Get("size"); v != "" {
		size, err = strconv.Atoi(v)
		if err != nil || size < 1 || size > MaxPageSize {
			return 0, 0, invalid("size", "must be an integer between 1 and %d, got %q", MaxPageSize, v)
		}
	}
	if _, err := httpx.PageOffset("page", page, size); err != nil {
		return 0, 0, err
	}
	return page, size, nil
}

// boolParam reads an optional boolean query parameter (absent: false).
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid(name, "must be true or false, got %q", v)
	}
	return b, nil
}
