package registry

import (
	"log/slog"
	"sync"

	"github.com/rosterhq/roster/model"
)

// maxWarnedNames bounds the confusable names remembered as already logged; past it the
// memory starts over (a name may then be logged again), so that writers choosing new
// names cannot grow it.
const maxWarnedNames = 4096

// confusables applies this node's handling of confusable service names
// (model.ConfusableName) to the writes it admits: a WARN once per name, or with
// refuse (roster server --refuse-confusable-names) a refusal. It is a rule of the
// node that admits a write (the leader, where writes are forwarded), not a replicated
// setting: set the flag on every server.
type confusables struct {
	refuse bool
	log    *slog.Logger

	mu     sync.Mutex
	warned map[model.ServiceKey]struct{}
}

func newConfusables(refuse bool, log *slog.Logger) *confusables {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &confusables{refuse: refuse, log: log, warned: map[model.ServiceKey]struct{}{}}
}

// admit refuses a write that creates or replaces something under key when key's
// service name is confusable and this node refuses such names.
func (c *confusables) admit(key model.ServiceKey) error {
	if !c.refuse {
		return nil
	}
	if reason, ok := model.ConfusableName(key.Service); ok {
		return model.Invalid("service", "%s, so it can look like another service's name; "+
			"this server refuses such names (--refuse-confusable-names)", reason)
	}
	return nil
}

// written logs, once per name, that a write under a confusable service name was
// applied.
func (c *confusables) written(key model.ServiceKey) {
	reason, ok := model.ConfusableName(key.Service)
	if !ok {
		return
	}
	c.mu.Lock()
	_, seen := c.warned[key]
	if !seen {
		if len(c.warned) >= maxWarnedNames {
			clear(c.warned)
		}
		c.warned[key] = struct{}{}
	}
	c.mu.Unlock()
	if !seen {
		c.log.Warn("a service was registered under a confusable name: it can look like another service's name "+
			"(roster server --refuse-confusable-names refuses such names)",
			"namespace", key.Namespace, "group", key.Group, "service", key.Service, "reason", reason)
	}
}

// admitConfusable runs fn, a write under key, through the node's handling of
// confusable names.
func (r *Registry) admitConfusable(key model.ServiceKey, fn func() (uint64, error)) (uint64, error) {
	if err := r.confusable.admit(key); err != nil {
		return 0, err
	}
	idx, err := fn()
	if err == nil {
		r.confusable.written(key)
	}
	return idx, err
}
