// Package openapi is the Nacos Open API over HTTP (/nacos/v1/ns/..., /nacos/v2/ns/...;
// docs/nacos-compatibility.md): handler.go and routes.go build the router, the
// resource files (instances.go, services.go, cluster.go, operator.go, auth.go) serve
// its routes, and subscribe.go records the Nacos 1.x clients of the v1 instance list
// for UDP pushes (nacos/udppush). Each route parses Nacos's parameters into model
// types (params.go), calls the registry, which decides every write and read, and
// answers in Nacos's shapes (respond.go); HTTP plumbing comes from httpx.
package openapi
