package healthcheck

import "errors"

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("healthcheck: invalid config")
