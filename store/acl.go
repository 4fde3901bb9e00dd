package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/model"
)

// The ACL bucket holds the tokens: "t/<accessor id>" → the token record, "s/<secret
// hash>" → its accessor id, "bootstrap" → the index of the bootstrap, and "index" →
// the index of the last change to any of them. A state file
// written before ACLs existed has no such bucket; the first ACL write creates it, and a
// read without it finds no token.
var (
	bucketACL       = []byte("acl")
	aclBootstrapKey = []byte("bootstrap")
	aclIndexKey     = []byte("index")
)

const (
	aclTokenPrefix  = "t/"
	aclSecretPrefix = "s/"
	watchACL        = "acl"
)

func aclTokenKey(accessor string) []byte { return []byte(aclTokenPrefix + accessor) }
func aclSecretKey(hash string) []byte    { return []byte(aclSecretPrefix + hash) }

// aclBucket returns the ACL bucket, creating it when create is set (nil if it does not
// exist and create is not set).
func (tx *Txn) aclBucket(create bool) (*bolt.Bucket, error) {
	if b := tx.btx.Bucket(bucketACL); b != nil || !create {
		return b, nil
	}
	b, err := tx.btx.CreateBucket(bucketACL)
	if err != nil {
		return nil, tx.fail(fmt.Errorf("create the acl bucket: %w", err))
	}
	tx.dirty = true
	return b, nil
}

// ACLBootstrap records the bootstrap of ACLs with its management token. It happens
// once: a second bootstrap is refused with model.ErrConflict.
func (tx *Txn) ACLBootstrap(idx uint64, t acl.Token) error {
	if !t.Management {
		return model.Invalid("token", "the bootstrap token must be a management token")
	}
	b, err := tx.aclBucket(true)
	if err != nil {
		return err
	}
	if raw := b.Get(aclBootstrapKey); raw != nil {
		at, _ := readU64(raw)
		return fmt.Errorf("%w: ACLs were bootstrapped already (at index %d)", model.ErrConflict, at)
	}
	if err := tx.put(b, aclBootstrapKey, u64(idx)); err != nil {
		return err
	}
	return tx.putToken(b, idx, t)
}

// CreateToken stores a new token. An accessor id or secret hash already in use is
// refused with model.ErrConflict; so is any token before the bootstrap.
func (tx *Txn) CreateToken(idx uint64, t acl.Token) error {
	b, err := tx.aclBucket(false)
	if err != nil {
		return err
	}
	if b == nil || b.Get(aclBootstrapKey) == nil {
		return fmt.Errorf("%w: ACLs are not bootstrapped", model.ErrConflict)
	}
	return tx.putToken(b, idx, t)
}

func (tx *Txn) putToken(b *bolt.Bucket, idx uint64, t acl.Token) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if b.Get(aclTokenKey(t.AccessorID)) != nil {
		return fmt.Errorf("%w: a token with accessor id %s exists", model.ErrConflict, t.AccessorID)
	}
	if b.Get(aclSecretKey(t.SecretHash)) != nil {
		return fmt.Errorf("%w: a token with this secret exists", model.ErrConflict)
	}
	t.CreateIndex = idx
	if err := tx.putValue(b, aclTokenKey(t.AccessorID), t); err != nil {
		return err
	}
	if err := tx.put(b, aclSecretKey(t.SecretHash), []byte(t.AccessorID)); err != nil {
		return err
	}
	return tx.aclChanged(b, idx)
}

// aclChanged records idx as the index of the last ACL change and wakes ACL watches.
func (tx *Txn) aclChanged(b *bolt.Bucket, idx uint64) error {
	tx.touch(watchACL)
	return tx.put(b, aclIndexKey, u64(idx))
}

// DeleteToken removes a token; model.ErrNotFound when there is none with that accessor id.
func (tx *Txn) DeleteToken(idx uint64, accessor string) error {
	b, err := tx.aclBucket(false)
	if err != nil {
		return err
	}
	var t acl.Token
	if b != nil {
		ok, err := tx.get(b, aclTokenKey(accessor), &t)
		if err != nil {
			return err
		}
		if !ok {
			b = nil
		}
	}
	if b == nil {
		return fmt.Errorf("token %q: %w", accessor, model.ErrNotFound)
	}
	if err := tx.del(b, aclTokenKey(accessor)); err != nil {
		return err
	}
	if err := tx.del(b, aclSecretKey(t.SecretHash)); err != nil {
		return err
	}
	return tx.aclChanged(b, idx)
}

// ACLState is what the replicated state says of ACLs.
type ACLState struct {
	// BootstrapIndex is the index of the bootstrap, 0 before it.
	BootstrapIndex uint64
	// Tokens is the number of tokens.
	Tokens int
}

// Bootstrapped reports whether ACLs were bootstrapped.
func (a ACLState) Bootstrapped() bool { return a.BootstrapIndex != 0 }

// ACLState reads the ACL state.
func (s *Store) ACLState() (ACLState, error) {
	var st ACLState
	err := s.view(nil, func(r *reader) error {
		b := r.btx.Bucket(bucketACL)
		if b == nil {
			return nil
		}
		var err error
		if raw := b.Get(aclBootstrapKey); raw != nil {
			if st.BootstrapIndex, err = readU64(raw); err != nil {
				return err
			}
		}
		c := b.Cursor()
		p := []byte(aclTokenPrefix)
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			st.Tokens++
		}
		return nil
	})
	return st, err
}

// aclCache is the committed ACL state held in memory: authentication reads it on every
// request, so it must cost no transaction. It is rebuilt whole by each commit that
// changes the ACL bucket (tokens number in the hundreds, not millions), on open and on
// restore, and never modified after it is published.
type aclCache struct {
	bootstrapIndex uint64
	bySecretHash   map[string]acl.Token
}

// readACLCache builds the ACL cache from btx (a read or a not yet committed write
// transaction).
func readACLCache(btx *bolt.Tx, codec *valueCodec) (*aclCache, error) {
	c := &aclCache{bySecretHash: map[string]acl.Token{}}
	b := btx.Bucket(bucketACL)
	if b == nil {
		return c, nil
	}
	var err error
	if c.bootstrapIndex, err = readU64(b.Get(aclBootstrapKey)); err != nil {
		return nil, err
	}
	cur := b.Cursor()
	p := []byte(aclSecretPrefix)
	for k, accessor := cur.Seek(p); k != nil && bytes.HasPrefix(k, p); k, accessor = cur.Next() {
		raw := b.Get(aclTokenKey(string(accessor)))
		if raw == nil {
			return nil, fmt.Errorf("%w: secret %s names token %q, which does not exist", ErrCorrupt, k, accessor)
		}
		var t acl.Token
		if err := codec.decode(raw, &t); err != nil {
			return nil, fmt.Errorf("token %q: %w", accessor, err)
		}
		c.bySecretHash[string(k[len(p):])] = t
	}
	return c, nil
}

// loadACL reads the committed ACL state of db into memory.
func (s *Store) loadACL(db *bolt.DB) error {
	var c *aclCache
	err := db.View(func(btx *bolt.Tx) error {
		var err error
		c, err = readACLCache(btx, &s.codec)
		return err
	})
	if err != nil {
		return fmt.Errorf("read ACL state: %w", err)
	}
	s.acl.Store(c)
	return nil
}

// ACLBootstrapIndex returns the index of the ACL bootstrap, 0 before it, for the check
// every request makes: from memory, without a transaction.
func (s *Store) ACLBootstrapIndex() (uint64, error) {
	if c := s.acl.Load(); c != nil {
		return c.bootstrapIndex, nil
	}
	var idx uint64
	err := s.view(nil, func(r *reader) error {
		b := r.btx.Bucket(bucketACL)
		if b == nil {
			return nil
		}
		var err error
		idx, err = readU64(b.Get(aclBootstrapKey))
		return err
	})
	return idx, err
}

// TokenBySecretHash returns the token whose secret hashes to hash: from memory, without
// a transaction.
func (s *Store) TokenBySecretHash(hash string) (acl.Token, bool, error) {
	if c := s.acl.Load(); c != nil {
		t, ok := c.bySecretHash[hash]
		return t, ok, nil
	}
	var t acl.Token
	var ok bool
	err := s.view(nil, func(r *reader) error {
		b := r.btx.Bucket(bucketACL)
		if b == nil {
			return nil
		}
		accessor := b.Get(aclSecretKey(hash))
		if accessor == nil {
			return nil
		}
		var err error
		ok, err = r.get(b, aclTokenKey(string(accessor)), &t)
		return err
	})
	return t, ok, err
}

// aclIndex is the index of the last ACL change recorded in b (0 without b).
func aclIndex(b *bolt.Bucket) uint64 {
	if b == nil {
		return 0
	}
	i, _ := readU64(b.Get(aclIndexKey))
	return i
}

// Token returns the token with the given accessor id (model.ErrNotFound when none) and
// the index of the last ACL change.
func (s *Store) Token(ws *WatchSet, accessor string) (uint64, acl.Token, error) {
	var t acl.Token
	var idx uint64
	err := s.view(ws, func(r *reader) error {
		r.addWatch(watchACL)
		b := r.btx.Bucket(bucketACL)
		idx = r.result(aclIndex(b))
		ok := false
		if b != nil {
			var err error
			if ok, err = r.get(b, aclTokenKey(accessor), &t); err != nil {
				return err
			}
		}
		if !ok {
			return fmt.Errorf("token %q: %w", accessor, model.ErrNotFound)
		}
		return nil
	})
	return idx, t, err
}

// Tokens returns every token in accessor id order, with the index of the last ACL change.
func (s *Store) Tokens(ws *WatchSet) (uint64, []acl.Token, error) {
	var out []acl.Token
	var idx uint64
	err := s.view(ws, func(r *reader) error {
		r.addWatch(watchACL)
		b := r.btx.Bucket(bucketACL)
		if b != nil {
			c := b.Cursor()
			p := []byte(aclTokenPrefix)
			for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
				var t acl.Token
				if err := r.s.codec.decode(v, &t); err != nil {
					return err
				}
				out = append(out, t)
			}
		}
		idx = r.result(aclIndex(b))
		return nil
	})
	return idx, out, err
}

// ACLExport is the whole ACL state of a store, for KeepACL.
type ACLExport struct {
	BootstrapIndex uint64
	Index          uint64
	Tokens         []acl.Token
}

// ExportACL reads the whole ACL state.
func (s *Store) ExportACL() (ACLExport, error) {
	var e ACLExport
	err := s.view(nil, func(r *reader) error {
		b := r.btx.Bucket(bucketACL)
		if b == nil {
			return nil
		}
		var err error
		if e.BootstrapIndex, err = readU64(b.Get(aclBootstrapKey)); err != nil {
			return err
		}
		e.Index = aclIndex(b)
		c := b.Cursor()
		p := []byte(aclTokenPrefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var t acl.Token
			if err := r.s.codec.decode(v, &t); err != nil {
				return err
			}
			e.Tokens = append(e.Tokens, t)
		}
		return nil
	})
	return e, err
}

// KeepACL gives a state file about to be restored the ACL state e when the file has no
// ACL bootstrap of its own and e has one: restoring an archive taken before ACLs were
// bootstrapped must not leave a cluster with ACLs on without tokens, for anyone to
// bootstrap again. A file with ACLs of its own keeps them. It reports whether it
// changed anything. Like AdoptIdentity, it is not a replicated command.
func (tx *Txn) KeepACL(e ACLExport) (bool, error) {
	if e.BootstrapIndex == 0 {
		return false, nil
	}
	if b := tx.btx.Bucket(bucketACL); b != nil && b.Get(aclBootstrapKey) != nil {
		return false, nil
	}
	if tx.btx.Bucket(bucketACL) != nil {
		if err := tx.btx.DeleteBucket(bucketACL); err != nil {
			return false, tx.fail(fmt.Errorf("reset the acl bucket: %w", err))
		}
	}
	b, err := tx.aclBucket(true)
	if err != nil {
		return false, err
	}
	if err := tx.put(b, aclBootstrapKey, u64(e.BootstrapIndex)); err != nil {
		return false, err
	}
	for _, t := range e.Tokens {
		if err := t.Validate(); err != nil {
			return false, err
		}
		if err := tx.putValue(b, aclTokenKey(t.AccessorID), t); err != nil {
			return false, err
		}
		if err := tx.put(b, aclSecretKey(t.SecretHash), []byte(t.AccessorID)); err != nil {
			return false, err
		}
	}
	return true, tx.aclChanged(b, e.Index)
}

// ReplaceACL gives a state file about to be restored exactly the ACL state e — its
// bootstrap, its tokens and nothing else — whatever ACL state the file held: a restore
// that keeps the cluster's ACLs neither plants a token written into an archive offline
// nor revives one deleted since the archive was saved. With e empty (a cluster without
// ACLs) the file is left without ACL state. Like AdoptIdentity, it is not a replicated
// command: it rewrites the file before Raft restores it.
func (tx *Txn) ReplaceACL(e ACLExport) error {
	if tx.btx.Bucket(bucketACL) != nil {
		if err := tx.btx.DeleteBucket(bucketACL); err != nil {
			return tx.fail(fmt.Errorf("reset the acl bucket: %w", err))
		}
	}
	if e.BootstrapIndex == 0 && len(e.Tokens) == 0 {
		tx.touch(watchACL)
		return nil
	}
	b, err := tx.aclBucket(true)
	if err != nil {
		return err
	}
	if e.BootstrapIndex != 0 {
		if err := tx.put(b, aclBootstrapKey, u64(e.BootstrapIndex)); err != nil {
			return err
		}
	}
	for _, t := range e.Tokens {
		if err := t.Validate(); err != nil {
			return err
		}
		if err := tx.putValue(b, aclTokenKey(t.AccessorID), t); err != nil {
			return err
		}
		if err := tx.put(b, aclSecretKey(t.SecretHash), []byte(t.AccessorID)); err != nil {
			return err
		}
	}
	return tx.aclChanged(b, e.Index)
}
