package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/rosterhq/roster/api"
)

// Instances are addressed by ip and port; an IPv6 ip is given bare ("::1") and travels
// in brackets ("[::1]:8080"). An empty namespace means "public", an empty group
// "DEFAULT_GROUP".

// RegisterInstance creates or replaces an instance (PUT .../instances/{ip}:{port}); the
// namespace, service and cluster are created if needed. Health is taken from req only
// when the instance is new.
func (c *Client) RegisterInstance(ctx context.Context, ns, group, service, ip string, port int, req api.InstanceRequest) (uint64, error) {
	return c.write(ctx, http.MethodPut, newPath("v1").service(ns, group, service).instance(ip, port), req)
}

// UpdateInstance changes only the fields set in req (PATCH .../instances/{ip}:{port});
// IsNotFound when the instance does not exist. A non-nil Metadata replaces the whole
// map: an empty, non-nil one removes every key.
func (c *Client) UpdateInstance(ctx context.Context, ns, group, service, ip string, port int, req api.InstanceRequest) (uint64, error) {
	return c.write(ctx, http.MethodPatch, newPath("v1").service(ns, group, service).instance(ip, port), patchBody(req))
}

// UpdateInstanceIf is UpdateInstance applied only if the instance's modifyIndex is
// still index (PATCH ...?cas=index); otherwise nothing changes and the error is a
// conflict (IsCASMismatch). Use it to change the metadata read with Instance without
// losing a concurrent change.
func (c *Client) UpdateInstanceIf(ctx context.Context, ns, group, service, ip string, port int, index uint64, req api.InstanceRequest) (uint64, error) {
	return c.writeIf(ctx, http.MethodPatch, newPath("v1").service(ns, group, service).instance(ip, port), index, patchBody(req))
}

// instancePatch is the body of a PATCH: unlike api.InstanceRequest it sends an empty,
// non-nil metadata map ({} removes every key) instead of leaving it out.
type instancePatch struct {
	api.InstanceRequest
	Metadata *map[string]string `json:"metadata,omitempty"`
}

func patchBody(req api.InstanceRequest) instancePatch {
	p := instancePatch{InstanceRequest: req}
	if req.Metadata != nil {
		md := req.Metadata
		p.Metadata = &md
	}
	return p
}

// DeregisterInstance removes an instance; IsNotFound when it does not exist.
func (c *Client) DeregisterInstance(ctx context.Context, ns, group, service, ip string, port int) (uint64, error) {
	return c.write(ctx, http.MethodDelete, newPath("v1").service(ns, group, service).instance(ip, port), nil)
}

// SetInstanceHealth sets an instance's health by hand (PUT .../instances/{ip}:{port}/health).
// Only instances of NONE-checked clusters accept it; others answer a conflict (IsConflict).
func (c *Client) SetInstanceHealth(ctx context.Context, ns, group, service, ip string, port int, healthy bool) (uint64, error) {
	return c.write(ctx, http.MethodPut, newPath("v1").service(ns, group, service).instance(ip, port).lit("health"), api.HealthRequest{Healthy: &healthy})
}

// Instance reads one instance; IsNotFound when it does not exist.
func (c *Client) Instance(ctx context.Context, ns, group, service, ip string, port int, q QueryOptions) (api.InstanceResponse, Meta, error) {
	var out api.InstanceResponse
	meta, err := c.read(ctx, newPath("v1").service(ns, group, service).instance(ip, port), q, nil, &out)
	return out, meta, err
}

// InstancesQuery selects a service's instances.
type InstancesQuery struct {
	QueryOptions
	// HealthyOnly asks for healthy, enabled instances only; when the protect threshold is
	// reached the server returns every enabled instance and says so in the response.
	HealthyOnly bool
	// Clusters restricts the list to these clusters (nil = all).
	Clusters []string
}

// Instances lists a service's instances sorted by address (GET .../services/{service}/instances).
// With q.WaitIndex set it blocks until the service changes past that index or the wait ends.
func (c *Client) Instances(ctx context.Context, ns, group, service string, q InstancesQuery) (api.InstancesResponse, Meta, error) {
	v := url.Values{}
	if q.HealthyOnly {
		v.Set("healthy", "true")
	}
	if len(q.Clusters) > 0 {
		v.Set("cluster", strings.Join(q.Clusters, ","))
	}
	var out api.InstancesResponse
	meta, err := c.read(ctx, newPath("v1").service(ns, group, service).lit("instances"), q.QueryOptions, v, &out)
	return out, meta, err
}
