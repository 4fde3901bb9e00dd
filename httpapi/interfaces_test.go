package httpapi

import (
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

// The production types satisfy the interfaces the API declares.
var (
	_ Consensus = (*raftnode.Node)(nil)
	_ Reader    = (*store.Store)(nil)
)
