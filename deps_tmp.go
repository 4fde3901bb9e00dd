package main

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
	_ "pgregory.net/rapid"
	_ "github.com/nacos-group/nacos-sdk-go/clients"
	_ "github.com/hashicorp/go-msgpack/v2/codec"
)

func main() {}
