package httpx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// LossyJSONString finds the first string of the JSON text b that encoding/json would
// decode into something else without a word: a string holding bytes that are not valid
// UTF-8, or a \u escape of a UTF-16 surrogate without its pair. The decoder turns both
// into U+FFFD, so a client's bytes would be stored changed. It returns the offset of the
// offending bytes and what they are, or -1 when every string decodes as written. Text
// outside strings is not examined: the decoder refuses it.
func LossyJSONString(b []byte) (int, string) {
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case !inString:
			inString = c == '"'
			i++
		case c == '"':
			inString = false
			i++
		case c == '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := escapedRune(b[i:])
				if !ok {
					i += 2 // malformed: the decoder refuses it
					continue
				}
				if utf16.IsSurrogate(r) {
					if next, ok := escapedRune(b[i+6:]); ok && r < 0xDC00 && next >= 0xDC00 && next <= 0xDFFF {
						i += 12
						continue
					}
					return i, "an unpaired UTF-16 surrogate escape"
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, w := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && w == 1 {
				return i, "bytes that are not valid UTF-8"
			}
			i += w
		}
	}
	return -1, ""
}

// escapedRune reads a \uXXXX escape at the start of b.
func escapedRune(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// lossyStringField names the field of the JSON body b whose string LossyJSONString found
// at off, for out's type (see fieldOfPath). ok is false when b is malformed before off,
// or the string is under a key out has no field for: the caller then reports the syntax
// error or the unknown field instead.
func lossyStringField(b []byte, off int, out any) (field string, ok bool) {
	path, err := jsonPathAt(b, off)
	if err != nil {
		return "", false
	}
	return fieldOfPath(path, reflect.TypeOf(out))
}

// jsonStep is one step of a path into a JSON value: an object key or an array index.
type jsonStep struct {
	key   string
	index int
	array bool
}

// jsonPathAt returns the path to the string of the JSON text b that covers offset off:
// to the string itself for a value, to its object for a key.
func jsonPathAt(b []byte, off int) ([]jsonStep, error) {
	type frame struct {
		step    jsonStep // the child being read
		wantKey bool
	}
	var stack []*frame
	path := func(n int) []jsonStep {
		out := make([]jsonStep, 0, n)
		for _, f := range stack[:n] {
			out = append(out, f.step)
		}
		return out
	}
	advance := func() {
		if len(stack) == 0 {
			return
		}
		top := stack[len(stack)-1]
		if top.step.array {
			top.step.index++
		} else {
			top.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && !top.step.array && top.wantKey
		if s, ok := tok.(string); ok {
			if int(dec.InputOffset()) > off {
				if isKey {
					return path(len(stack) - 1), nil
				}
				return path(len(stack)), nil
			}
			if isKey {
				top.step.key, top.wantKey = s, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{step: jsonStep{array: true}})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			advance()
		default:
			advance()
		}
	}
}

// fieldOfPath names path as validation errors name fields: the dotted path of the
// struct fields of t it goes through ("healthCheck.headers"), ending where t has no
// more structure to follow (a map's keys are data, not fields); "body" when empty. ok
// is false when a key of path is no field of its struct.
func fieldOfPath(path []jsonStep, t reflect.Type) (field string, ok bool) {
	var name strings.Builder
walk:
	for _, st := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case st.array && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			fmt.Fprintf(&name, "[%d]", st.index)
			t = t.Elem()
		case !st.array && t.Kind() == reflect.Struct:
			f, ok := jsonField(t, st.key)
			if !ok {
				return "", false
			}
			if name.Len() > 0 {
				name.WriteByte('.')
			}
			name.WriteString(st.key)
			t = f.Type
		default:
			break walk
		}
	}
	if name.Len() == 0 {
		return "body", true
	}
	return name.String(), true
}
