package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
)

// bodyKey holds the buffered request body in the request context.
type bodyKey struct{}

// JSONBodies accepts what the native API reads: application/json only. A form or
// text/plain body is what a page on another site can make a browser send without
// asking first (a "simple" cross-origin request), so refusing those media types takes
// such requests away before CrossOrigin even looks at them.
func JSONBodies(mediaType string) bool {
	return mediaType == "application/json"
}

// BufferBody reads a request body whole within maxBytes (else 413) and keeps it, so
// that the request can be decoded here or forwarded to the leader (and forwarded again
// after a leader change). With accept set, a non-empty body without a Content-Type, or
// whose Content-Type accept refuses, is a 415; with accept nil the handler decides what
// a body may be.
//
// The body must arrive within DefaultBodyTimeout (BufferBodyWithin: another bound) from
// the moment the handler starts reading it, or the request is answered 408: a client
// that sends its headers and then trickles its body (or never sends it) would otherwise
// hold a connection and a goroutine for as long as it likes.
func BufferBody(maxBytes int64, accept func(mediaType string) bool, fail ErrorWriter) func(http.Handler) http.Handler {
	return BufferBodyWithin(maxBytes, DefaultBodyTimeout, accept, fail)
}

// DefaultBodyTimeout bounds the reading of a request body (BufferBody).
const DefaultBodyTimeout = 30 * time.Second

// ErrRequestTimeout: a request body that did not arrive in time (408).
var ErrRequestTimeout = errors.New("request body not received in time")

// BufferBodyWithin is BufferBody with the body's time bound.
func BufferBodyWithin(maxBytes int64, timeout time.Duration, accept func(mediaType string) bool, fail ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hasBody := r.ContentLength != 0 || r.Method == http.MethodPut ||
				r.Method == http.MethodPost || r.Method == http.MethodPatch
			if ct := r.Header.Get("Content-Type"); accept != nil && ct != "" && hasBody {
				mt, _, err := mime.ParseMediaType(ct)
				if err != nil || !accept(mt) {
					fail(w, r, fmt.Errorf("%w: %q (use application/json)", ErrUnsupportedMedia, ct))
					return
				}
			}
			var body []byte
			if r.Body != nil && r.Body != http.NoBody {
				rc := http.NewResponseController(w)
				timed := timeout > 0 && rc.SetReadDeadline(time.Now().Add(timeout)) == nil
				b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
				if timed {
					_ = rc.SetReadDeadline(time.Time{})
				}
				if err != nil {
					var mbe *http.MaxBytesError
					var ne net.Error
					switch {
					case errors.As(err, &mbe):
						err = fmt.Errorf("%w: the limit is %d bytes", ErrBodyTooLarge, mbe.Limit)
					case errors.As(err, &ne) && ne.Timeout():
						w.Header().Set("Connection", "close")
						err = fmt.Errorf("%w: the body must arrive within %s", ErrRequestTimeout, timeout)
					default:
						err = Invalid("body", "cannot read the request body: %v", err)
					}
					fail(w, r, err)
					return
				}
				body = b
			}
			if accept != nil && len(body) > 0 && r.Header.Get("Content-Type") == "" {
				fail(w, r, fmt.Errorf("%w: a body without a Content-Type (use application/json)", ErrUnsupportedMedia))
				return
			}
			r = r.WithContext(WithBody(r.Context(), body))
			SetBody(r, body)
			next.ServeHTTP(w, r)
		})
	}
}

// WithBody returns ctx carrying b as the buffered body (what BufferBody leaves).
func WithBody(ctx context.Context, b []byte) context.Context {
	return context.WithValue(ctx, bodyKey{}, b)
}

// Body returns the body kept by BufferBody (nil when there is none).
func Body(r *http.Request) []byte {
	b, _ := r.Context().Value(bodyKey{}).([]byte)
	return b
}

// SetBody makes r's body a fresh reader over b.
func SetBody(r *http.Request, b []byte) {
	r.ContentLength = int64(len(b))
	if len(b) == 0 {
		r.Body = http.NoBody
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// DecodeBody decodes the buffered body strictly into out: unknown fields, malformed JSON,
// wrong types and trailing data are 400s naming the field. An empty body decodes as {}.
func DecodeBody(r *http.Request, out any) error {
	return DecodeJSON(Body(r), out)
}

// DecodeJSON decodes b strictly into out (see DecodeBody). A string that is not valid
// Unicode text (invalid UTF-8, an unpaired surrogate escape), which encoding/json would
// silently replace with U+FFFD, is a 400 naming its field.
func DecodeJSON(b []byte, out any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if off, what := LossyJSONString(b); off >= 0 {
		if field, ok := lossyStringField(b, off, out); ok {
			return Invalid(field, "must be valid Unicode text: the JSON body has %s at offset %d", what, off)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return jsonError(b, out, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Invalid("body", "unexpected data after the JSON value")
	}
	return nil
}

// jsonError turns a decoding error into a *model.ValidationError naming the field.
func jsonError(b []byte, out any, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return Invalid("body", "malformed JSON at offset %d: %v", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return Invalid("body", "malformed JSON: unexpected end of input")
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return Invalid("body", "must be a JSON object, got %s", te.Value)
		}
		return Invalid(field, "must be %s, got %s", jsonKind(te.Type), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		leaf := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		field := unknownFieldPath(b, reflect.TypeOf(out))
		if field == "" {
			field = leaf
		}
		return Invalid(field, "unknown field %q", leaf)
	default:
		return Invalid("body", "cannot decode the request body: %v", err)
	}
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// unknownFieldPath finds the dotted path of the first key in b that t has no field for
// ("healthCheck.foo"), or "" if there is none.
func unknownFieldPath(b []byte, t reflect.Type) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	return walkUnknown(v, t, "")
}

func walkUnknown(v any, t reflect.Type, prefix string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	switch val := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return ""
		}
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		// Report the first unknown key in a stable order.
		slices.Sort(keys)
		for _, k := range keys {
			f, ok := jsonField(t, k)
			if !ok {
				return join(k)
			}
			if p := walkUnknown(val[k], f.Type, join(k)); p != "" {
				return p
			}
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return ""
		}
		for i, e := range val {
			if p := walkUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", prefix, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonField finds the struct field encoding/json would decode key into (exact name
// first, then case-insensitively), following embedded structs.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	var fold reflect.StructField
	found := false
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if sf, ok := jsonField(ft, key); ok {
					return sf, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f, true
		}
		if !found && strings.EqualFold(name, key) {
			fold, found = f, true
		}
	}
	return fold, found
}
