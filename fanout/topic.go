package fanout

import (
	"fmt"
	"sync"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Kind is what a Topic watches.
type Kind uint8

// Topic kinds.
const (
	// KindService watches one service: its definition, clusters and instances.
	KindService Kind = iota + 1
	// KindServices watches one page of a namespace's service list.
	KindServices
)

// Topic names one watched view. It is comparable: subscribers of equal topics share
// one read and one Update per change.
type Topic struct {
	Kind Kind
	// Service is the watched service (KindService); for KindServices only
	// Service.Namespace is set, and Group optionally selects one group.
	Service model.ServiceKey
	// Group, Name, Page and Size select the page of a KindServices list as
	// store.Store.ServiceSummaries does (Page ≥ 1; Size 0 = every service).
	Group, Name string
	Page, Size  int
}

// ServiceTopic watches a service.
func ServiceTopic(key model.ServiceKey) Topic { return Topic{Kind: KindService, Service: key} }

// ServicesTopic watches a page of a namespace's service list, filtered by f (size 0 =
// every service).
func ServicesTopic(ns string, f store.ServiceFilter, page, size int) Topic {
	return Topic{Kind: KindServices, Service: model.ServiceKey{Namespace: ns}, Group: f.Group, Name: f.Name, Page: max(page, 1), Size: size}
}

// Namespace is the namespace the topic belongs to.
func (t Topic) Namespace() string { return t.Service.Namespace }

func (t Topic) String() string {
	if t.Kind == KindService {
		return "service " + t.Service.String()
	}
	return fmt.Sprintf("services of namespace %q (group %q, name %q, page %d, size %d)", t.Namespace(), t.Group, t.Name, t.Page, t.Size)
}

// Update is the state of one topic at one index. It is shared by every subscriber of the
// topic and must not be modified.
type Update struct {
	Topic Topic
	// Index is the view's index: the service's ModifyIndex (KindService) or the
	// namespace's services-list index (KindServices). When the service or namespace does
	// not exist it is the index the store answers for a missing item.
	Index uint64
	// Err is nil when the view exists; otherwise it wraps model.ErrNotFound (or reports a
	// read failure, after which the topic is read again at the next change).
	Err error
	// Service is the view of a KindService topic.
	Service store.ServiceView
	// Services and Total are the page (with instance counts) and the number of
	// matching services of a KindServices topic.
	Services []store.ServiceSummary
	Total    int
	// Resync marks an update sent because the subscriber must replace what it holds
	// (a restore, a leadership change, or a subscriber that fell behind), not because the
	// view changed: its Index may equal the last one delivered.
	Resync bool

	memoMu sync.Mutex
	memo   map[string][]byte
}

// Render returns fn's result for key, computing it once per Update: subscribers with the
// same filter share one encoding of a change.
func (u *Update) Render(key string, fn func() ([]byte, error)) ([]byte, error) {
	u.memoMu.Lock()
	defer u.memoMu.Unlock()
	if b, ok := u.memo[key]; ok {
		return b, nil
	}
	b, err := fn()
	if err != nil {
		return nil, err
	}
	if u.memo == nil {
		u.memo = make(map[string][]byte, 1)
	}
	u.memo[key] = b
	return b, nil
}

// resynced is a copy of u marked Resync, with its own memo.
func (u *Update) resynced() *Update {
	return &Update{Topic: u.Topic, Index: u.Index, Err: u.Err, Service: u.Service, Services: u.Services, Total: u.Total, Resync: true}
}
