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
// its transaction, checks the rules in their order, inserts the event at
// the run's next position and updates the run (position, pending count,
// status).
//
// Appends to one run that come while one is in flight go together in the
// next call (unless Config.Unbatched): the function checks and appends
// them one by one in arrival order, as if each were its own statement, but
// they share one transaction — one row lock hand-off and one commit flush
// instead of one each, which is what a burst of a fan-out's appends waits
// on. Correctness does not depend on it: the row lock orders the appends
// of every process.
func (w *World) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	op := "append " + ev.Kind.String()
	if err := w.check(op); err != nil {
		return world.AppendResult{}, err
	}
	if ev.Kind < world.RunCreated || ev.Kind > world.StreamClosed {
		return world.AppendResult{}, fmt.Errorf("pgworld: append to run %q: invalid event kind %d", run, ev.Kind)
	}
	req := &appendReq{call: newCall(ctx), ev: ev, guarded: w.caps.Guard && pre.Guarded, last: pre.LastPos}
	if w.cfg.Unbatched {
		w.appendBatch(run, []*appendReq{req})
	} else {
		w.appends.do(run, req)
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		return world.AppendResult{}, w.err(ctx, op, ctx.Err())
	}
	if req.err != nil {
		return world.AppendResult{}, fmt.Errorf("pgworld: %s %q to run %q: %w", op, ev.Entity, run, req.err)
	}
	return req.res, nil
}

// maxBatch bounds the calls of one batch (appends, publishes, acks).
const maxBatch = 256

// appendReq is one Append waiting for its batch.
type appendReq struct {
	call
	ev      world.Event
	guarded bool
	last    int64
	res     world.AppendResult
}

// appendBatch appends the requests' events in one call and completes them.
func (w *World) appendBatch(run string, batch []*appendReq) {
	defer complete(batch)
	live := waiting(batch)
	if len(live) == 0 {
		return
	}
	kinds := make([]int16, len(live))
	ids := make([]string, len(live))
	entities := make([]string, len(live))
	datas := make([][]byte, len(live))
	guards := make([]bool, len(live))
	lasts := make([]int64, len(live))
	for i, r := range live {
		kinds[i], ids[i], entities[i], datas[i] = int16(r.ev.Kind), r.ev.ID, r.ev.Entity, r.ev.Data
		guards[i], lasts[i] = r.guarded, r.last
	}
	ctx, cancel := w.callCtx(context.Background())
	defer cancel()
	fail := func(err error) {
		err = w.err(ctx, "append", err)
		for _, r := range live {
			r.err = err
		}
	}
	rows, err := w.pool.Query(ctx, w.q.append, run, kinds, ids, entities, datas, guards, lasts)
	if err != nil {
		fail(err)
		return
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		if i == len(live) {
			fail(fmt.Errorf("append: more rows than the %d events", len(live)))
			return
		}
		r := live[i]
		var pending int32
		var code, msg string
		if err := rows.Scan(&r.res.Pos, &r.res.Duplicate, &pending, &code, &msg); err != nil {
			fail(err)
			return
		}
		r.res.Pending = int(pending)
		if code != "" {
			typed, ok := typedCodes[code]
			if !ok {
				typed = fmt.Errorf("SQLSTATE %s", code)
			}
			r.err = fmt.Errorf("%w (%s: %s)", typed, code, msg)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		fail(err)
		return
	}
	if i != len(live) {
		fail(fmt.Errorf("append: %d rows for %d events", i, len(live)))
	}
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
