package nacos

import (
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Reader is the subset of *store.Store the Nacos API reads from.
type Reader interface {
	Services(ws *store.WatchSet, ns, group string, page, size int) (uint64, []model.Service, int, error)
	ServiceView(ws *store.WatchSet, key model.ServiceKey) (uint64, store.ServiceView, error)
	Instance(ws *store.WatchSet, ref model.InstanceRef) (uint64, model.Instance, error)
}
