package metrics

// Categories of a run's critical path (DESIGN.md §12). A run's time to last
// step is split along its critical path into these; one run's categories
// add up exactly to its TTLS. The vocabulary is the same for every engine:
// the built-in engine's spans are classified by Classify, a target's spans
// arrive with their category.
const (
	CatDriverLag    = "driver_lag"
	CatStart        = "start"
	CatQueueWait    = "queue_wait"
	CatLogLoad      = "log_load"
	CatWrite        = "write"
	CatPublish      = "publish"
	CatRunRead      = "run_read"
	CatCompute      = "compute"
	CatBody         = "body"
	CatContention   = "contention"
	CatUnattributed = "unattributed"
)

// CategoryDef defines one category of the critical path.
type CategoryDef struct {
	// Name is the key in results files ("queue_wait").
	Name string
	// Definition says which time on the path the category holds.
	Definition string
}

// Categories lists every category in report order; docs/critical-path.md
// quotes this table (TestDocsQuoteTheCategories).
var Categories = []CategoryDef{
	{CatDriverLag, "actual run start − scheduled start (t0): the driver's lateness, before the engine was asked to start the run"},
	{CatStart, "the run's start: creating the run and publishing its first message (the engine's StartRun), its own time included"},
	{CatQueueWait, "a message's wait in the queue: its publish returning → its delivery's handler starting (a queue's latency, a free consumer slot, a redelivery's visibility timeout)"},
	{CatLogLoad, "loading a run's event log (log_load), served"},
	{CatWrite, "appending an event to a run's log (step_created, step_started, step_completed, run_started, hook_received, …), served"},
	{CatPublish, "publishing a queue message (a step's or an orchestrator's), served"},
	{CatRunRead, "reading a run or a hook (runs.get: run_get, hook_lookup), served"},
	{CatCompute, "the engine's own time in a task (an orchestrator activation or a step consumer) outside its world calls and step bodies: replay, dispatch decisions, decoding"},
	{CatBody, "a step body (user code; durabench's are no-ops unless a scenario gives them a duration)"},
	{CatContention, "a world call's wait for backend capacity before it was served (a profile's capacity limit), and a delivery's"},
	{CatUnattributed, "time on the path that no span covers (a gap between spans, or a run whose engine reports no spans): shown, never spread over the others"},
}

// The categories' indexes in Categories, for code that keeps a category
// as a small number (packed spans, the walk); TestCategoryIndexes keeps
// them equal to Categories' order.
const (
	catDriverLag = iota
	catStart
	catQueueWait
	catLogLoad
	catWrite
	catPublish
	catRunRead
	catCompute
	catBody
	catContention
	catUnattributed
)

// categoryIndex maps a category name to its index in Categories.
var categoryIndex = func() map[string]int {
	m := make(map[string]int, len(Categories))
	for i, c := range Categories {
		m[c.Name] = i
	}
	return m
}()

// CategoryIndex returns the index of name in Categories.
func CategoryIndex(name string) (int, bool) {
	i, ok := categoryIndex[name]
	return i, ok
}

// LookupCategory returns the definition of name.
func LookupCategory(name string) (CategoryDef, bool) {
	if i, ok := categoryIndex[name]; ok {
		return Categories[i], true
	}
	return CategoryDef{}, false
}

// PathMetric names the critical path where compare and gate name its
// categories as metrics, each as PathMetricPrefix + its name:
// critical_path.queue_wait. CompletionPathMetric names the path to
// completion (TTC: RunCompletionPath) the same way:
// critical_path_ttc.queue_wait.
const (
	PathMetric                 = "critical_path"
	PathMetricPrefix           = PathMetric + "."
	CompletionPathMetric       = "critical_path_ttc"
	CompletionPathMetricPrefix = CompletionPathMetric + "."
)
