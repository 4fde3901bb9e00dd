package fsm

import "errors"

// ErrDecode marks a payload that is not a valid encoding of the requested type.
var ErrDecode = errors.New("cannot decode command")
