package engine

import (
	"testing"
	"unsafe"
)

// TestSharedCountersOwnTheirLines: the counters both cores write at every
// task's start or dispatched call stay a cache line away from the fields
// every timed call reads (a field moved next to them would make each of
// those reads miss again).
func TestSharedCountersOwnTheirLines(t *testing.T) {
	const line = 64
	apart := func(what string, written, read uintptr) {
		t.Helper()
		d := int(written) - int(read)
		if d < 0 {
			d = -d
		}
		if d < line {
			t.Errorf("%s: %d bytes from a field every call reads, want at least %d", what, d, line)
		}
	}
	var r spanRec
	apart("spanRec.ids / rt", unsafe.Offsetof(r.ids), unsafe.Offsetof(r.rt))
	apart("spanRec.ids / waits", unsafe.Offsetof(r.ids), unsafe.Offsetof(r.waits))
	apart("spanRec.ids / runs", unsafe.Offsetof(r.ids), unsafe.Offsetof(r.runs))
	var rs runSpans
	apart("runSpans.tasks / steps", unsafe.Offsetof(rs.tasks), unsafe.Offsetof(rs.steps))
	apart("runSpans.tasks / base", unsafe.Offsetof(rs.tasks), unsafe.Offsetof(rs.base))
	var sl callSlots
	apart("callSlots.taken / spans", unsafe.Offsetof(sl.taken), unsafe.Offsetof(sl.spans))
	apart("callSlots.taken / base", unsafe.Offsetof(sl.taken), unsafe.Offsetof(sl.base))
	apart("callSlots.taken / ids", unsafe.Offsetof(sl.taken), unsafe.Offsetof(sl.ids))
	apart("callSlots.ids / spans", unsafe.Offsetof(sl.ids), unsafe.Offsetof(sl.spans))
}
