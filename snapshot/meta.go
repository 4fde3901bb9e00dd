package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// FormatVersion is the archive format version this package writes, and the only one
// it reads.
const FormatVersion = 1

// Member names, in the order they appear in an archive.
const (
	metaName  = "meta.json"
	stateName = "state.db"
	sumsName  = "SHA256SUMS"
)

// memberList names the members for messages.
const memberList = "meta.json, state.db and SHA256SUMS, in that order"

// Size limits of the small members. They bound the memory Read spends on them
// whatever their tar headers claim.
const (
	maxMetaSize = 64 << 10
	maxSumsSize = 4 << 10
)

// Meta is the content of meta.json. Read returns it only after every check of the
// archive passed, so its Size is the exact size of state.db.
type Meta struct {
	// FormatVersion is the archive format version; Read accepts only FormatVersion.
	FormatVersion int `json:"formatVersion"`
	// Index and Term identify the Raft log position the state reflects; at most
	// MaxIndex and MaxTerm.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// RosterVersion is the version of the Roster build that wrote the archive: printable
	// text of at most MaxRosterVersionLen bytes.
	RosterVersion string `json:"rosterVersion"`
	// CreatedAt is when the archive was written (RFC 3339, UTC), from 1970 to 2261.
	CreatedAt time.Time `json:"createdAt"`
	// Size is the size of state.db in bytes, at most MaxStateSize.
	Size int64 `json:"size"`
	// Counts summarises the state, for display before a restore.
	Counts Counts `json:"counts"`
}

// Counts is the number of namespaces, services and instances in state.db, as recorded
// by the writer. Read checks that they are between 0 and MaxCount; comparing them with
// the state itself is up to ReadOptions.Check.
type Counts struct {
	Namespaces int `json:"namespaces"`
	Services   int `json:"services"`
	Instances  int `json:"instances"`
}

// validate checks the values the JSON types do not constrain: no negative size or
// count, and every number within the limits of limits.go.
func (m Meta) validate() error {
	if m.FormatVersion != FormatVersion {
		return unsupportedVersion(m.FormatVersion)
	}
	switch {
	case m.Size < 0:
		return fmt.Errorf("size is negative (%d)", m.Size)
	case m.Counts.Namespaces < 0:
		return fmt.Errorf("counts.namespaces is negative (%d)", m.Counts.Namespaces)
	case m.Counts.Services < 0:
		return fmt.Errorf("counts.services is negative (%d)", m.Counts.Services)
	case m.Counts.Instances < 0:
		return fmt.Errorf("counts.instances is negative (%d)", m.Counts.Instances)
	}
	return m.checkBounds()
}

func unsupportedVersion(v int) error {
	if v > FormatVersion {
		return fmt.Errorf("format version %d is not supported: this build reads version %d only (the archive was written by a newer Roster)", v, FormatVersion)
	}
	return fmt.Errorf("format version %d is not supported: this build reads version %d only", v, FormatVersion)
}

// encodeMeta returns meta.json for m, indented so that it reads well when unpacked.
func encodeMeta(m Meta) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// parseMeta parses meta.json strictly: one JSON object, every field of Meta present
// exactly once with its exact name and a non-null value, no other field, nothing
// after the object. The format version is checked first, so an archive of another
// version is reported as such rather than as a list of unknown fields.
func parseMeta(data []byte) (Meta, error) {
	obj, err := parseObject(data)
	if err != nil {
		return Meta{}, err
	}
	if raw, ok := obj.values["formatVersion"]; ok {
		var v int
		if err := json.Unmarshal(raw, &v); err != nil {
			return Meta{}, fmt.Errorf("field \"formatVersion\" is not an integer: %s", clip(string(raw), 40))
		}
		if v != FormatVersion {
			return Meta{}, unsupportedVersion(v)
		}
	}
	var m Meta
	err = obj.decode("", map[string]any{
		"formatVersion": &m.FormatVersion,
		"index":         &m.Index,
		"term":          &m.Term,
		"rosterVersion": &m.RosterVersion,
		"createdAt":     &m.CreatedAt,
		"size":          &m.Size,
		"counts":        nil, // an object, checked and decoded below
	})
	if err != nil {
		return Meta{}, err
	}
	counts, err := parseObject(obj.values["counts"])
	if err != nil {
		return Meta{}, fmt.Errorf("field \"counts\": %v", err)
	}
	err = counts.decode("counts.", map[string]any{
		"namespaces": &m.Counts.Namespaces,
		"services":   &m.Counts.Services,
		"instances":  &m.Counts.Instances,
	})
	if err != nil {
		return Meta{}, err
	}
	if err := m.validate(); err != nil {
		return Meta{}, err
	}
	return m, nil
}

// jsonObject is one JSON object split into its fields.
type jsonObject struct {
	names  []string // in document order
	values map[string]json.RawMessage
}

// parseObject splits one JSON object into its fields. It rejects anything else,
// duplicate names, and any data after the object.
func parseObject(data []byte) (jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return jsonObject{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return jsonObject{}, errors.New("not a JSON object")
	}
	obj := jsonObject{values: make(map[string]json.RawMessage)}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonObject{}, fmt.Errorf("invalid JSON: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return jsonObject{}, fmt.Errorf("invalid JSON: unexpected %v", tok)
		}
		if _, dup := obj.values[name]; dup {
			return jsonObject{}, fmt.Errorf("duplicate field %q", clip(name, 40))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return jsonObject{}, fmt.Errorf("invalid JSON: %v", err)
		}
		obj.names = append(obj.names, name)
		obj.values[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return jsonObject{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return jsonObject{}, errors.New("unexpected data after the JSON object")
	}
	return obj, nil
}

// decode checks that the object has exactly the fields of targets, none null, and
// decodes each into its target (a nil target is only checked). The first unknown
// field in document order is reported before any missing one; prefix qualifies the
// field names in messages.
func (o jsonObject) decode(prefix string, targets map[string]any) error {
	for _, name := range o.names {
		if _, ok := targets[name]; !ok {
			return fmt.Errorf("unknown field %q", prefix+clip(name, 40))
		}
	}
	names := make([]string, 0, len(targets))
	for name := range targets {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		raw, ok := o.values[name]
		switch {
		case !ok:
			return fmt.Errorf("missing field %q", prefix+name)
		case string(raw) == "null":
			return fmt.Errorf("field %q is null", prefix+name)
		case targets[name] == nil:
			continue
		}
		if err := json.Unmarshal(raw, targets[name]); err != nil {
			return fmt.Errorf("field %q: %s", prefix+name, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	return nil
}

// clip shortens s to at most n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
