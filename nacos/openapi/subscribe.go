package openapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/udppush"
)

// headerNacosPush marks an instance-list query a follower forwards to the leader after
// recording its client for pushes: the leader answers it the push cacheMillis. Only the
// node the client queried records and pushes (from its own state, to the source address
// of the query); a forwarded query's source is the forwarding node.
const headerNacosPush = "X-Roster-Nacos-Push"

// pushCacheKey marks, in a request's context, a query whose client receives pushes.
type pushCacheKey struct{}

// pushRoute records the client of a v1 instance-list query for UDP pushes (or
// renews it) before the read is served here or forwarded, as Nacos's doSrvIPXT does —
// once the caller's token was found to grant read access to the namespace, and only
// for as long as it does:
// when udpPort is 1..65535 and the agent (User-Agent, else Client-Version) names a
// client Nacos pushes to. Pushes go
// to the query's source IP at udpPort, never to clientIP. An absent or 0 udpPort asks
// for no push (the Nacos 1.x Java client sends 0 for reads without a subscription); any
// other value outside 1..65535 is a 400. Parameters the list refuses are left to it.
func (s *API) pushRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := parseNacosParams(r)
		if err != nil {
			next.ServeHTTP(w, r) // the list answers the error
			return
		}
		port, err := udpPort(p)
		if err != nil {
			s.writeNacosError(w, r, err, nacos.ResourceInstance)
			return
		}
		if r.Header.Get(api.HeaderForwardedBy) != "" {
			// The forwarding node recorded the client (or did not); this one only answers.
			if port > 0 && r.Header.Get(headerNacosPush) == "1" {
				r = r.WithContext(context.WithValue(r.Context(), pushCacheKey{}, true))
			}
			next.ServeHTTP(w, r)
			return
		}
		r.Header.Del(headerNacosPush)
		agent := agent(r)
		if port == 0 || s.push == nil || !udppush.Supported(agent) {
			next.ServeHTTP(w, r)
			return
		}
		key, err := serviceKey(p)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		clusters, err := p.clusterFilter("clusters")
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		healthyOnly, _, err := p.boolean("healthyOnly")
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		addr, ok := udppush.Target(r.RemoteAddr, port)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		sub, ok := s.push.Subscribe(udppush.Query{
			Service: key, Clusters: clusters, HealthyOnly: healthyOnly, Addr: addr,
			Agent: agent, App: p.str("app"), Allowed: s.reg.StillAllowed(tokenOf(r), httpx.PermissionOf(r)),
		})
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if !s.push.Polling(sub) {
			r.Header.Set(headerNacosPush, "1")
			r = r.WithContext(context.WithValue(r.Context(), pushCacheKey{}, true))
		}
		next.ServeHTTP(w, r)
		// The answer's index (the leader's, when forwarded) is a state the client has.
		if idx, err := strconv.ParseUint(w.Header().Get(api.HeaderIndex), 10, 64); err == nil {
			s.push.Answered(sub, idx)
		}
	})
}

// agent is the client's agent as Nacos reads it (WebUtils.getUserAgent): the
// User-Agent header, else Client-Version.
func agent(r *http.Request) string {
	if ua := r.UserAgent(); ua != "" {
		return ua
	}
	return r.Header.Get("Client-Version")
}

// udpPort reads udpPort: 0 when absent or 0 (no push), else 1..65535.
func udpPort(p params) (int, error) {
	port, _, err := p.integer("udpPort")
	if err != nil {
		return 0, err
	}
	if port < 0 || port > 65535 {
		return 0, nacos.Invalid("Param 'udpPort' must be a port 1..65535 (or 0 for no push), got %d", port)
	}
	return port, nil
}

// listCacheMillis is the cacheMillis of an instance list answered to r.
func listCacheMillis(r *http.Request) int64 {
	if push, _ := r.Context().Value(pushCacheKey{}).(bool); push && !isV2(r) {
		return udppush.CacheMillis
	}
	return nacos.CacheMillis
}

// Paging of GET /nacos/v1/ns/service/subscribers (Nacos's defaults).
const subscribersPageSize = 1000

// subscribersV1 is the body of GET /nacos/v1/ns/service/subscribers.
type subscribersV1 struct {
	Count       int                      `json:"count"`
	Subscribers []udppush.SubscriberInfo `json:"subscribers"`
}

// subscribers serves GET /nacos/v1/ns/service/subscribers: the clients this node
// pushes the service's changes to, one page (pageNo, default 1; pageSize, default 1000)
// at a time, with their number. pageNo is at least 1 and pageSize at least 0
// (params.page); a page size of 0 is an empty page. aggregation is accepted, but
// only this node's subscribers are listed (Nacos asks every member by default).
func (s *API) subscribers(_ http.ResponseWriter, _ *http.Request, p params) (any, error) {
	key, err := serviceKey(p)
	if err != nil {
		return nil, err
	}
	if _, _, err := p.boolean("aggregation"); err != nil {
		return nil, err
	}
	page, size, err := p.page(subscribersPageSize)
	if err != nil {
		return nil, err
	}
	var all []udppush.SubscriberInfo
	if s.push != nil {
		all = s.push.Subscribers(key)
	}
	out := subscribersV1{Count: len(all), Subscribers: []udppush.SubscriberInfo{}}
	if size > 0 {
		pages := len(all) / size
		if len(all)%size != 0 {
			pages++
		}
		if page <= pages { // so (page-1)*size cannot overflow
			start := (page - 1) * size
			out.Subscribers = append(out.Subscribers, all[start:start+min(size, len(all)-start)]...)
		}
	}
	return out, nil
}
