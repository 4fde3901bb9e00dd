package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
)

// State is the whole logical state, read at one point in time: every record in key
// order, the applied index and the index table (namespace list, member list and each
// namespace's services list). It is meant for tests and comparisons of replicas; the
// index floor is not part of it.
type State struct {
	Namespaces   []model.Namespace
	Services     []model.Service
	Clusters     []model.Cluster
	Instances    []model.Instance
	Members      []model.Member
	Settings     model.Settings
	ClusterID    string
	AppliedIndex uint64
	Indexes      map[string]uint64
	// ACLBootstrapIndex and Tokens are the ACL state (absent before the bootstrap, so
	// that the hash of a state without ACLs is what it always was).
	ACLBootstrapIndex uint64      `json:",omitempty"`
	Tokens            []acl.Token `json:",omitempty"`
}

// Hash is a SHA-256 of the state's canonical JSON encoding (struct fields in order, map
// keys sorted): replicas that applied the same log have the same hash.
func (st State) Hash() string {
	b, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("store: encoding a state for its hash: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Dump reads the whole state in one read transaction.
func (s *Store) Dump() (State, error) {
	var st State
	err := s.view(nil, func(r *reader) error {
		var err error
		if st.Namespaces, err = decodeAll[model.Namespace](r, r.namespaces); err != nil {
			return err
		}
		if st.Services, err = decodeAll[model.Service](r, r.services); err != nil {
			return err
		}
		if st.Clusters, err = decodeAll[model.Cluster](r, r.clusters); err != nil {
			return err
		}
		if st.Instances, err = decodeAll[model.Instance](r, r.instances); err != nil {
			return err
		}
		if st.Members, err = decodeAll[model.Member](r, r.members); err != nil {
			return err
		}
		st.Settings = model.DefaultSettings()
		if _, err := r.get(r.meta, metaSettings, &st.Settings); err != nil {
			return err
		}
		st.ClusterID = string(r.meta.Get(metaClusterID))
		if st.AppliedIndex, err = readU64(r.btx.Bucket(bucketMeta).Get(metaApplied)); err != nil {
			return err
		}
		if b := r.btx.Bucket(bucketACL); b != nil {
			if st.ACLBootstrapIndex, err = readU64(b.Get(aclBootstrapKey)); err != nil {
				return err
			}
			c := b.Cursor()
			p := []byte(aclTokenPrefix)
			for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
				var t acl.Token
				if err := r.s.codec.decode(v, &t); err != nil {
					return err
				}
				st.Tokens = append(st.Tokens, t)
			}
		}
		st.Indexes = make(map[string]uint64)
		return r.indexes.ForEach(func(k, v []byte) error {
			i, err := readU64(v)
			st.Indexes[string(k)] = i
			return err
		})
	})
	if err != nil {
		return State{}, err
	}
	return st, nil
}

func decodeAll[T any](r *reader, b *bolt.Bucket) ([]T, error) {
	var out []T
	err := b.ForEach(func(_, v []byte) error {
		var x T
		if err := r.s.codec.decode(v, &x); err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

// Counts returns the number of namespaces, services and instances.
func (s *Store) Counts() (namespaces, services, instances int, err error) {
	err = s.view(nil, func(r *reader) error {
		namespaces = r.namespaces.Stats().KeyN
		services = r.services.Stats().KeyN
		instances = r.instances.Stats().KeyN
		return nil
	})
	return namespaces, services, instances, err
}

// ForEachInstance calls fn with every instance and the health-check spec of its cluster,
// in key order, from one consistent read, until fn returns false. fn runs outside the
// read transaction, so it may call the store.
func (s *Store) ForEachInstance(fn func(in model.Instance, hc model.HealthCheck) bool) error {
	type item struct {
		in model.Instance
		hc model.HealthCheck
	}
	var items []item
	err := s.view(nil, func(r *reader) error {
		specs := make(map[string]model.HealthCheck)
		d := instanceDecoder{codec: r.s.codec}
		return r.instances.ForEach(func(_, v []byte) error {
			var in model.Instance
			if err := d.decode(v, &in); err != nil {
				return err
			}
			ck := string(clusterKey(in.ServiceKey(), in.Cluster))
			hc, ok := specs[ck]
			if !ok {
				var c model.Cluster
				found, err := r.get(r.clusters, []byte(ck), &c)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("instance %s of %s: cluster %q missing: %w", in.Addr(), in.ServiceKey(), in.Cluster, ErrCorrupt)
				}
				hc = c.HealthCheck
				specs[ck] = hc
			}
			items = append(items, item{in: in, hc: hc})
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, it := range items {
		if !fn(it.in, it.hc) {
			return nil
		}
	}
	return nil
}
