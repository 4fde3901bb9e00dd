package server_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// A node that was started and closed leaves no goroutine behind: every loop, Serve
// call and connection of its own ends with Close (gRPC and DNS on).
func TestServer_CloseLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Run("node", func(t *testing.T) {
		c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithGRPC(), func(cfg *server.Config) {
			cfg.DNS.Addr = "127.0.0.1:0"
		})
		c.MustLeader()
		c.WaitSettled()
	})
	goleak.VerifyNone(t, before)
}
