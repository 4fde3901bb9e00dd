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

// pathParam returns a path parameter as decodePathParams decoded it: the name of the
// resource, never its escaped spelling.
func pathParam(r *http.Request, name string) string { return chi.URLParam(r, name) }

// decodePathParams decodes every parameter of the matched route's path once, in place,
// before anything looks at it: the permission a route needs, the handler's key and the
// registry's own check all see one name. chi matches on the escaped path whenever the
// request's escaping is not the default one (s%65cret for secret, %2e, mixed-case hex)
// and then hands back escaped values; Go has already decoded the whole path once when it
// parsed the request, so each segment is decoded exactly once here and a doubly encoded
// name (s%2565cret) stays the literal name "s%65cret". A segment that is not a valid
// encoding is a 400 naming the parameter, and nothing else is done.
func (s *server) decodePathParams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawPath != "" {
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				for i, k := range rctx.URLParams.Keys {
					v, err := url.PathUnescape(rctx.URLParams.Values[i])
					if err != nil {
						s.writeError(w, r, invalid(pathParamField(k), "is not a valid percent-encoding: %q", rctx.URLParams.Values[i]))
						return
					}
					rctx.URLParams.Values[i] = v
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// pathParamField is the field an error about the path parameter k names.
func pathParamField(k string) string {
	switch k {
	case "ns":
		return "namespace"
	case "addr":
		return "ip"
	case "accessor":
		return "accessorId"
	}
	return k
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
