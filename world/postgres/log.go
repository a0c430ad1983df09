package pgworld

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/durabench/durabench/world"
)

// statuses are runs.status's values.
var statuses = [...]world.RunStatus{world.StatusPending, world.StatusRunning, world.StatusCompleted, world.StatusFailed}

// CreateRun stores r and its run_created event (position 1) in one
// statement; a second run with the same id breaks the primary key
// (ErrConflict).
func (w *World) CreateRun(ctx context.Context, r world.Run) error {
	if err := w.check("create run"); err != nil {
		return err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	_, err := w.pool.Exec(ctx, w.q.createRun, r.ID, r.Deployment, r.SpecVersion, r.Input)
	return w.err(ctx, "create run "+r.ID, err)
}

// GetRun returns the run with its status, or ErrNotFound.
func (w *World) GetRun(ctx context.Context, id string) (world.Run, error) {
	if err := w.check("get run"); err != nil {
		return world.Run{}, err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	r := world.Run{ID: id}
	var status int16
	err := w.pool.QueryRow(ctx, w.q.getRun, id).Scan(&r.Deployment, &r.SpecVersion, &r.Input, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return world.Run{}, fmt.Errorf("pgworld: run %q: %w", id, world.ErrNotFound)
	}
	if err != nil {
		return world.Run{}, w.err(ctx, "get run "+id, err)
	}
	if status < 0 || int(status) >= len(statuses) {
		return world.Run{}, fmt.Errorf("pgworld: run %q: unknown status %d", id, status)
	}
	r.Status = statuses[status]
	return r, nil
}

// ListRuns returns the ids of all runs in creation order.
func (w *World) ListRuns(ctx context.Context) ([]string, error) {
	if err := w.check("list runs"); err != nil {
		return nil, err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	rows, err := w.pool.Query(ctx, w.q.listRuns)
	if err != nil {
		return nil, w.err(ctx, "list runs", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, w.err(ctx, "list runs", err)
	}
	return ids, nil
}

// Append applies world.Log's rules and appends ev, all in the database:
// one call of the schema's append function, which locks the run's row for
// its statement, checks the rules in their order, inserts the event at the
// run's next position and updates the run (position, pending count,
// status).
func (w *World) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	op := "append " + ev.Kind.String()
	if err := w.check(op); err != nil {
		return world.AppendResult{}, err
	}
	if ev.Kind < world.RunCreated || ev.Kind > world.StreamClosed {
		return world.AppendResult{}, fmt.Errorf("pgworld: append to run %q: invalid event kind %d", run, ev.Kind)
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	var id *string
	if ev.ID != "" {
		id = &ev.ID
	}
	guarded := w.caps.Guard && pre.Guarded
	var res world.AppendResult
	var pending int32
	err := w.pool.QueryRow(ctx, w.q.append, run, int16(ev.Kind), id, ev.Entity, ev.Data, guarded, pre.LastPos).
		Scan(&res.Pos, &res.Duplicate, &pending)
	if err != nil {
		return world.AppendResult{}, w.err(ctx, fmt.Sprintf("%s %q to run %q", op, ev.Entity, run), err)
	}
	res.Pending = int(pending)
	return res, nil
}

// Load returns the run's whole log in position order: one indexed range
// read of its rows.
func (w *World) Load(ctx context.Context, run string) ([]world.Event, error) {
	if err := w.check("load"); err != nil {
		return nil, err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	rows, err := w.pool.Query(ctx, w.q.load, run)
	if err != nil {
		return nil, w.err(ctx, "load "+run, err)
	}
	defer rows.Close()
	var evs []world.Event
	for rows.Next() {
		var ev world.Event
		var kind int16
		if err := rows.Scan(&ev.Pos, &kind, &ev.ID, &ev.Entity, &ev.Data); err != nil {
			return nil, w.err(ctx, "load "+run, err)
		}
		ev.Kind = world.EventKind(kind)
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, w.err(ctx, "load "+run, err)
	}
	// Every run has its run_created row: no row means no run.
	if len(evs) == 0 {
		return nil, fmt.Errorf("pgworld: load run %q: %w", run, world.ErrNotFound)
	}
	return evs, nil
}

// HookRun returns the run that created the hook token, or ErrNotFound.
func (w *World) HookRun(ctx context.Context, token string) (string, error) {
	if err := w.check("hook lookup"); err != nil {
		return "", err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	var run string
	err := w.pool.QueryRow(ctx, w.q.hookRun, token).Scan(&run)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("pgworld: hook %q: %w", token, world.ErrNotFound)
	}
	return run, w.err(ctx, "hook lookup "+token, err)
}
