// Package engine is durabench's reference durable runtime: a replaying
// orchestrator, a step consumer, dispatch strategies, named versions and kill
// switches (DESIGN.md §4). It talks to its backend only through world.World
// and waits, sleeps, spawns and reads the clock only through world.Runtime.
package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/durabench/durabench/world"
)

// Config configures an Engine.
type Config struct {
	World    world.World
	Features Features
	// Observer receives engine-side timestamps; nil discards them.
	Observer Observer
	// Concurrency is the number of queue deliveries handled at once
	// (default 512).
	Concurrency int
	// Deployment names the deployment runs are pinned to (default "durabench").
	Deployment string
	// Seed seeds step-body jitter.
	Seed int64
}

// Engine runs workflow programs on a world.
type Engine struct {
	cfg Config
	w   world.World
	rt  world.Runtime
	f   Features // effective features (after the world's guard)
	obs Observer
	sub world.Subscription
}

// New validates cfg and returns an engine; Start begins consuming.
func New(cfg Config) (*Engine, error) {
	if cfg.World == nil {
		return nil, fmt.Errorf("engine: no world")
	}
	if err := cfg.Features.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 512
	}
	if cfg.Deployment == "" {
		cfg.Deployment = "durabench"
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Engine{cfg: cfg, w: cfg.World, rt: cfg.World.Runtime(),
		f: Effective(cfg.Features, cfg.World.Capabilities()), obs: cfg.Observer}, nil
}

// Effective returns the features the engine really uses on a world with caps:
// under an enforced guard, dispatch stays sequential.
func Effective(f Features, caps world.Capabilities) Features {
	if caps.Guard {
		f.Dispatch = Sequential
	}
	return f
}

// Features returns the effective features.
func (e *Engine) Features() Features { return e.f }

type nopObserver struct{}

func (nopObserver) StepBody(string, StepSpan)                 {}
func (nopObserver) HookCreated(string, string, time.Duration) {}
func (nopObserver) StreamChunk(string, ChunkSpan)             {}
func (nopObserver) RunFinished(string, time.Duration, bool)   {}

// Start subscribes the engine's consumer to the world's queue.
func (e *Engine) Start(ctx context.Context) error {
	sub, err := e.w.Consume(ctx, world.ConsumeOptions{Concurrency: e.cfg.Concurrency}, e.handle)
	if err != nil {
		return fmt.Errorf("engine: consume: %w", err)
	}
	e.sub = sub
	return nil
}

// Stop stops consuming and waits for running handlers.
func (e *Engine) Stop(ctx context.Context) error {
	if e.sub == nil {
		return nil
	}
	return e.sub.Stop(ctx)
}

// StartRun creates run id with program p and enqueues its first orchestrator
// invocation. The caller takes the run's anchor (t0) before calling.
func (e *Engine) StartRun(ctx context.Context, id string, p Program) error {
	return fmt.Errorf("engine: not implemented")
}

// ResumeHook resumes the hook token with payload, deduplicated by resumeID.
func (e *Engine) ResumeHook(ctx context.Context, token, resumeID string, payload []byte) error {
	return fmt.Errorf("engine: not implemented")
}

func (e *Engine) handle(ctx context.Context, d world.Delivery) error {
	return fmt.Errorf("engine: not implemented")
}
