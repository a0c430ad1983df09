package mem_test

import (
	"testing"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/worldtest"
)

func factory(t *testing.T, opts world.Options) worldtest.Harness {
	w := mem.New(opts)
	t.Cleanup(func() { _ = w.Close() })
	return worldtest.Harness{World: w, Run: worldtest.Direct}
}

func TestConformance(t *testing.T) { worldtest.Run(t, factory) }
