// Package floor holds what the floor worlds of make bench (internal/bench/rawjs,
// internal/bench/rawpg) share: the world operations no floor measures.
package floor

import (
	"context"
	"fmt"
	"time"

	"github.com/durabench/durabench/world"
)

// Unmeasured answers the world operations a floor does not implement —
// hooks and streams — with world.ErrNotFound. A floor world embeds it with
// its name, which prefixes the errors.
type Unmeasured struct{ Name string }

// HookRun is not part of the floor.
func (u Unmeasured) HookRun(context.Context, string) (string, error) {
	return "", fmt.Errorf("%s: hooks: %w", u.Name, world.ErrNotFound)
}

// WriteChunk is not part of the floor.
func (u Unmeasured) WriteChunk(context.Context, string, world.Chunk) error {
	return fmt.Errorf("%s: streams: %w", u.Name, world.ErrNotFound)
}

// ReadChunks is not part of the floor.
func (u Unmeasured) ReadChunks(context.Context, string, int, time.Duration) ([]world.Chunk, bool, error) {
	return nil, false, fmt.Errorf("%s: streams: %w", u.Name, world.ErrNotFound)
}

// CloseStream is not part of the floor.
func (u Unmeasured) CloseStream(context.Context, string) error {
	return fmt.Errorf("%s: streams: %w", u.Name, world.ErrNotFound)
}
