package client

import (
	"context"
	"net/http"

	"github.com/rosterhq/roster/api"
)

// UpsertNamespace creates namespace ns or replaces its name and description
// (PUT /v1/namespaces/{ns}); it returns the index the write was applied at.
func (c *Client) UpsertNamespace(ctx context.Context, ns string, req api.NamespaceRequest) (uint64, error) {
	return c.write(ctx, http.MethodPut, newPath("v1", "namespaces").param("namespace", ns), req)
}

// DeleteNamespace deletes namespace ns (DELETE /v1/namespaces/{ns}). Deleting "public"
// or a namespace that still has services is a conflict (IsConflict).
func (c *Client) DeleteNamespace(ctx context.Context, ns string) (uint64, error) {
	return c.write(ctx, http.MethodDelete, newPath("v1", "namespaces").param("namespace", ns), nil)
}

// Namespace reads one namespace (GET /v1/namespaces/{ns}); IsNotFound when it does not exist.
func (c *Client) Namespace(ctx context.Context, ns string, q QueryOptions) (api.NamespaceResponse, Meta, error) {
	var out api.NamespaceResponse
	meta, err := c.read(ctx, newPath("v1", "namespaces").param("namespace", ns), q, nil, &out)
	return out, meta, err
}

// Namespaces lists every namespace, sorted by id (GET /v1/namespaces).
func (c *Client) Namespaces(ctx context.Context, q QueryOptions) (api.NamespacesResponse, Meta, error) {
	var out api.NamespacesResponse
	meta, err := c.read(ctx, newPath("v1", "namespaces"), q, nil, &out)
	return out, meta, err
}
