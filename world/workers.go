package world

// Workers run functions on goroutines kept between them, in real time: an
// idle one takes the next function, and only when none is idle does a new
// goroutine start (and stay, once its function returned, for the next).
// A function is never queued behind another. A goroutine per function
// grows its stack afresh every time, which a deep call (an engine's
// replay, a start request) pays in every call: a tenth of the driver's
// CPU at 50,000 runs/s, an eighth of the reference target's at 10,000.
// Virtual time has no use for it: every task there is the runtime's.
type Workers struct{ jobs chan func() }

// NewWorkers returns a set of workers with none started yet.
func NewWorkers() *Workers { return &Workers{jobs: make(chan func())} }

// Go runs fn on an idle worker, or a new one.
func (w *Workers) Go(fn func()) {
	select {
	case w.jobs <- fn:
	default:
		go func() {
			fn()
			for fn := range w.jobs {
				fn()
			}
		}()
	}
}

// Close lets the workers end once their functions returned; Go must not
// be called after it.
func (w *Workers) Close() { close(w.jobs) }
