package bench

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"github.com/rosterhq/roster/client/sse"
)

// sseContentType is the media type of an event stream.
const sseContentType = "text/event-stream"

// errNoSSE marks an answer that is not an event stream.
var errNoSSE = errors.New("not an event stream")

// checkSSEResponse accepts a 200 text/event-stream answer. A server without the SSE
// watch answers the plain JSON list (200 application/json) or refuses the Accept header
// (406): that is an errNoSSE naming the status, the content type and the start of the
// body, and hint, what to do. Any other status is a statusError. The body is drained
// (bounded) but not closed.
func checkSSEResponse(resp *http.Response, what, hint string) error {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if resp.StatusCode == http.StatusOK && mt == sseContentType {
		return nil
	}
	_, excerpt, _ := drain(resp)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotAcceptable {
		return fmt.Errorf("%s: %w", what, &statusError{code: resp.StatusCode, body: excerpt})
	}
	if ct == "" {
		ct = "no Content-Type"
	}
	return fmt.Errorf("%s: %w: answered %d with %s (%q): this server does not serve the SSE watch "+
		"(Accept: text/event-stream); %s", what, errNoSSE, resp.StatusCode, ct, excerpt, hint)
}

// parseSSEIndex returns the index an event carries in its id field.
func parseSSEIndex(ev sse.Event) (uint64, error) {
	idx, err := strconv.ParseUint(ev.ID, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sse %s event: id %q is not an index", ev.Type, ev.ID)
	}
	return idx, nil
}
