package natsworld_test

import (
	"os"
	"testing"

	"github.com/durabench/durabench/world/nats/natstest"
)

// The external-server and cluster tests start nats-server processes through
// natstest: this test binary re-executed as a server, reached over TCP
// loopback, killable as a crash would.
func TestMain(m *testing.M) {
	natstest.Main()
	os.Exit(m.Run())
}
