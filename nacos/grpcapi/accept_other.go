//go:build !linux

package grpcapi

import "net"

// rawAccept is Linux's only: elsewhere Accept takes the portable path.
func (l *guardListener) rawAccept() (net.Conn, error, bool) { return nil, nil, false }
