package engine

import (
	"hash/maphash"
	"sync"
	"time"
)

// A step's span ends when its step_completed write returns, and only then
// can it be reported; but the moment the write lands, another completer may
// see the stage complete and finish the run. endings keeps the order every
// observer relies on — a run is reported finished only after every span of
// it this engine is still writing — by holding a run's RunFinished until
// its completions in flight are reported. It also tells the earliest start
// of a completion still in flight (Engine.Pending), so a process that ships
// records elsewhere does not promise "everything before this instant is
// sent" while a span from before it is still to come.
//
// A step's completion write can also return after the run it belongs to was
// finished: the write landed, a completer saw it and finished the run, and
// only then did the writing task get the processor back. The completion was
// durable by the run's finish, so its span ends there (capEnd), never after
// the run it is part of.
type endings struct {
	shards [16]endingShard
	seed   maphash.Seed
	now    func() time.Duration
}

type endingShard struct {
	mu   sync.Mutex // short critical sections, never held across a wait
	runs map[string]*ending
}

// ending is one run's completions in flight and, when the run finished
// meanwhile, its held RunFinished.
type ending struct {
	since  []time.Duration // when each completion in flight began
	held   bool
	at     time.Duration
	failed bool
}

func (en *endings) shard(run string) *endingShard {
	return &en.shards[maphash.String(en.seed, run)%uint64(len(en.shards))]
}

// begin registers a completion of run starting at now; the returned token
// is passed to end.
func (en *endings) begin(run string, now time.Duration) {
	s := en.shard(run)
	s.mu.Lock()
	if s.runs == nil {
		s.runs = map[string]*ending{}
	}
	e := s.runs[run]
	if e == nil {
		e = &ending{}
		s.runs[run] = e
	}
	e.since = append(e.since, now)
	s.mu.Unlock()
}

// end removes the completion of run that began at since, after its span was
// reported, and returns the run's held finish when it was the last one.
func (en *endings) end(run string, since time.Duration) (held bool, at time.Duration, failed bool) {
	s := en.shard(run)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.runs[run]
	if e == nil {
		return false, 0, false
	}
	for i, t := range e.since {
		if t == since {
			e.since = append(e.since[:i], e.since[i+1:]...)
			break
		}
	}
	if len(e.since) > 0 {
		return false, 0, false
	}
	delete(s.runs, run)
	return e.held, e.at, e.failed
}

// finish stamps run's finish with the clock and reports whether it may be
// reported now; if not, it is held and end returns it. The clock is read
// under the shard's lock, so a completion capped before it (capEnd) ended
// no later than the finish.
func (en *endings) finish(run string, failed bool) (at time.Duration, now bool) {
	s := en.shard(run)
	s.mu.Lock()
	defer s.mu.Unlock()
	at = en.now()
	e := s.runs[run]
	if e == nil || len(e.since) == 0 {
		return at, true
	}
	if !e.held {
		e.held, e.at, e.failed = true, at, failed
	}
	return e.at, false
}

// capEnd is the end of a completion of run in flight that returned at end:
// end, or the run's finish when the run was finished first.
func (en *endings) capEnd(run string, end time.Duration) time.Duration {
	s := en.shard(run)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.runs[run]; e != nil && e.held && e.at < end {
		return e.at
	}
	return end
}

// oldest returns the earliest start of a completion in flight.
func (en *endings) oldest() (time.Duration, bool) {
	var min time.Duration
	found := false
	for i := range en.shards {
		s := &en.shards[i]
		s.mu.Lock()
		for _, e := range s.runs {
			for _, t := range e.since {
				if !found || t < min {
					min, found = t, true
				}
			}
		}
		s.mu.Unlock()
	}
	return min, found
}

// Pending returns the earliest time at which a step completion still in
// flight in this engine began, if there is one: that step's span will be
// reported later, with times after it. A process forwarding the observer's
// records holds its watermark below it.
func (e *Engine) Pending() (time.Duration, bool) { return e.end.oldest() }
