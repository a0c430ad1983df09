package world

// Op names one kind of world call. Latency/fault profiles and benchmarks are
// keyed by Op. Appends are keyed by the event kind they write
// ("step_created", "step_completed", ...), so a profile can make one kind of
// write slow or flaky.
type Op string

// World operations other than appends.
const (
	OpCreateRun   Op = "run_create"
	OpGetRun      Op = "run_get"
	OpListRuns    Op = "run_list"
	OpLoad        Op = "log_load"
	OpPublish     Op = "publish"
	OpDeliver     Op = "deliver"
	OpHookRun     Op = "hook_lookup"
	OpWriteChunk  Op = "stream_write"
	OpReadChunks  Op = "stream_read"
	OpCloseStream Op = "stream_close"
)

// AppendOp is the Op of appending an event of kind k.
func AppendOp(k EventKind) Op { return Op(k.String()) }

// Ops lists every Op, appends first, in a stable order.
func Ops() []Op {
	ops := make([]Op, 0, len(eventKindNames)+10)
	for k := RunCreated; k <= StreamClosed; k++ {
		ops = append(ops, AppendOp(k))
	}
	return append(ops, OpCreateRun, OpGetRun, OpListRuns, OpLoad, OpPublish,
		OpDeliver, OpHookRun, OpWriteChunk, OpReadChunks, OpCloseStream)
}
