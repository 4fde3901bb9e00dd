package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rosterhq/roster/api"
)

// In every method below an empty namespace means "public" and an empty group
// "DEFAULT_GROUP"; the other names must be non-empty.

// ServicesQuery selects a page of a namespace's services.
type ServicesQuery struct {
	QueryOptions
	// Group restricts the list to one group ("" = every group).
	Group string
	// Name restricts it to services whose name contains Name, ignoring case ("" = all).
	Name string
	// Page (from 1) and Size (0 = the server's default) select a page.
	Page, Size int
}

// Services lists a namespace's services with the counts of their instances, sorted by
// group and name (GET /v1/namespaces/{ns}/services).
func (c *Client) Services(ctx context.Context, ns string, q ServicesQuery) (api.ServicesResponse, Meta, error) {
	v := url.Values{}
	if q.Group != "" {
		v.Set("group", q.Group)
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.Page > 0 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	if q.Size > 0 {
		v.Set("size", strconv.Itoa(q.Size))
	}
	var out api.ServicesResponse
	meta, err := c.read(ctx, newPath("v1").ns(ns).lit("services"), q.QueryOptions, v, &out)
	return out, meta, err
}

// UpsertService creates a service or replaces its definition (never its clusters or
// instances) (PUT .../groups/{group}/services/{service}).
func (c *Client) UpsertService(ctx context.Context, ns, group, service string, req api.ServiceRequest) (uint64, error) {
	return c.write(ctx, http.MethodPut, newPath("v1").service(ns, group, service), req)
}

// Service reads a service with its clusters and instance counts; IsNotFound when it does not exist.
func (c *Client) Service(ctx context.Context, ns, group, service string, q QueryOptions) (api.ServiceResponse, Meta, error) {
	var out api.ServiceResponse
	meta, err := c.read(ctx, newPath("v1").service(ns, group, service), q, nil, &out)
	return out, meta, err
}

// DeleteService deletes a service and its clusters; a service that still has instances
// is a conflict (IsConflict).
func (c *Client) DeleteService(ctx context.Context, ns, group, service string) (uint64, error) {
	return c.write(ctx, http.MethodDelete, newPath("v1").service(ns, group, service), nil)
}

// UpsertCluster creates a cluster or replaces its health check and metadata
// (PUT .../services/{service}/clusters/{cluster}); the service is created if needed.
func (c *Client) UpsertCluster(ctx context.Context, ns, group, service, cluster string, req api.ClusterRequest) (uint64, error) {
	return c.write(ctx, http.MethodPut, newPath("v1").service(ns, group, service).lit("clusters").param("cluster", cluster), req)
}

// UpsertClusterIf is UpsertCluster applied only if the cluster's modifyIndex is still
// index, or, with index 0, only if the cluster does not exist yet (PUT ...?cas=index);
// otherwise nothing changes and the error is a conflict (IsCASMismatch). Use it to
// write back a cluster read with Cluster without losing a concurrent change.
func (c *Client) UpsertClusterIf(ctx context.Context, ns, group, service, cluster string, index uint64, req api.ClusterRequest) (uint64, error) {
	return c.writeIf(ctx, http.MethodPut, newPath("v1").service(ns, group, service).lit("clusters").param("cluster", cluster), index, req)
}

// Cluster reads one cluster; IsNotFound when it does not exist.
func (c *Client) Cluster(ctx context.Context, ns, group, service, cluster string, q QueryOptions) (api.ClusterResponse, Meta, error) {
	var out api.ClusterResponse
	meta, err := c.read(ctx, newPath("v1").service(ns, group, service).lit("clusters").param("cluster", cluster), q, nil, &out)
	return out, meta, err
}

// Clusters lists a service's clusters (GET .../services/{service}/clusters).
func (c *Client) Clusters(ctx context.Context, ns, group, service string, q QueryOptions) (api.ClustersResponse, Meta, error) {
	var out api.ClustersResponse
	meta, err := c.read(ctx, newPath("v1").service(ns, group, service).lit("clusters"), q, nil, &out)
	return out, meta, err
}
