package httpapi

import "github.com/rosterhq/roster/httpx"

// Short names for the shared HTTP helpers the handlers use most.
var (
	writeJSON  = httpx.WriteJSON
	encodeJSON = httpx.EncodeJSON
	writeBody  = httpx.WriteJSONBytes
	setIndex   = httpx.SetIndex
	invalid    = httpx.Invalid
	decodeBody = httpx.DecodeBody
)
