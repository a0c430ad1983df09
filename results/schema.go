// Package results is the results file of a sweep: its schema (one versioned
// JSON document), building a cell's summary from its timelines, atomic
// writing, the partial-cell journal, reading with validation, and the history
// store. Comparing two files (statistics, compare, gate) is package stats.
package results

import (
	"time"

	"github.com/durabench/durabench/world"
)

// Schema is the value of File.Schema this package writes and accepts.
const Schema = "durabench/results/v1"

// Methodology versions how metrics are measured; results with different
// methodology are never compared. 2: WO is the uncovered time of the steps
// the run waited for (it was span − Σ step durations, which read slower
// world writes on a fan-out as a gain); STSO after a race counts from the
// winner's end; a step whose completion write returned after its run
// finished ends at the run's finish.
const Methodology = 2

// File is one sweep's results document.
type File struct {
	Schema           string    `json:"schema"`
	Methodology      int       `json:"methodology"`
	DurabenchVersion string    `json:"durabench_version"`
	GitCommit        string    `json:"git_commit,omitempty"`
	StartedAt        time.Time `json:"started_at"`
	FinishedAt       time.Time `json:"finished_at,omitzero"`
	Host             Host      `json:"host"`
	// Partial is set when the sweep was interrupted or failed: not every
	// planned cell is present.
	Partial bool   `json:"partial,omitempty"`
	Error   string `json:"error,omitempty"`
	// Missing lists the planned cells a partial sweep did not finish, by
	// label, in plan order.
	Missing []string `json:"missing,omitempty"`
	// VirtualTime is set when every figure is simulated time (sim world).
	VirtualTime bool       `json:"virtual_time,omitempty"`
	Plan        PlanRecord `json:"plan"`
	Cells       []Cell     `json:"cells"`
}

// Host describes the machine that ran the sweep.
type Host struct {
	CPUs     int    `json:"cpus"`
	OS       string `json:"os"`
	Arch     string `json:"arch,omitempty"`
	Go       string `json:"go"`
	Hostname string `json:"hostname,omitempty"`
	// Pacer is how precisely the driver's process could sleep, measured
	// when it started (real-time sweeps only; see driver.Calibration).
	Pacer *PacerCalibration `json:"pacer,omitempty"`
}

// PacerCalibration is the sleep calibration an open-paced driver waits
// with: a coarse sleep, then spinning for SpinWindowUS before each run's
// schedule.
type PacerCalibration struct {
	// Sleep is the coarse sleep: "timerfd" or "time.Sleep" ("nanosleep"
	// in files written before the pacer read a timerfd).
	Sleep string `json:"sleep"`
	// OvershootP50US, OvershootP90US and OvershootP99US are how late it
	// returned (p99: absent from files written before it was recorded).
	OvershootP50US float64 `json:"overshoot_p50_us"`
	OvershootP90US float64 `json:"overshoot_p90_us"`
	OvershootP99US float64 `json:"overshoot_p99_us,omitempty"`
	// GoSleepOvershootP50US is time.Sleep's median overshoot.
	GoSleepOvershootP50US float64 `json:"go_sleep_overshoot_p50_us"`
	SpinWindowUS          float64 `json:"spin_window_us"`
}

// PlanRecord is the sweep plan as run: the matrix and every setting that shapes the
// numbers.
type PlanRecord struct {
	Scenarios []string `json:"scenarios"`
	// Options are scenario options as given (name -> value), e.g. "steps": "50".
	Options  map[string]string `json:"options,omitempty"`
	Branches []int             `json:"branches,omitempty"`
	Versions []VersionSpec     `json:"versions"`
	Switches []string          `json:"switches"`
	Worlds   []string          `json:"worlds"`
	Profiles []string          `json:"profiles"`
	Reps     int               `json:"reps"`
	Warmup   int               `json:"warmup"`
	// Pace is burst | closed | open; Concurrency (closed) and Rate (open,
	// runs per second) apply to it.
	Pace        string  `json:"pace"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	// CellTimeoutMS is how long a cell's runs may take before the rest are
	// recorded as stalls.
	CellTimeoutMS int64 `json:"cell_timeout_ms"`
	// StallThresholdMS, when set, overrides the default stall rule.
	StallThresholdMS int64        `json:"stall_threshold_ms,omitempty"`
	Seed             int64        `json:"seed"`
	WorldOptions     WorldOptions `json:"world_options"`
	// Workers is "external" when the engine ran on `durabench worker`
	// processes (ExpectWorkers of them at least per cell), empty when it
	// ran in the driver.
	Workers       string `json:"workers,omitempty"`
	ExpectWorkers int    `json:"expect_workers,omitempty"`
	// Targets are p75/p90/p99 latency objectives in milliseconds per
	// metric (the sweep file's objectives:).
	Targets map[string][3]float64 `json:"targets,omitempty"`
	// Engines are the engines under test as the plan named them
	// (--targets); absent when only the built-in engine ran.
	Engines []string `json:"engines,omitempty"`
	// Interleave is set when the sweep ran its cells in interleaved
	// pairs (sweep --interleave; see Interleave and Cell.Pairing).
	Interleave *Interleave `json:"interleave,omitempty"`
	// Spans is "off" when the sweep recorded no spans (sweep --spans
	// off): its cells have no critical_path. Absent: spans were recorded.
	Spans string `json:"spans,omitempty"`
}

// SpansOff is PlanRecord.Spans of a sweep that recorded no spans.
const SpansOff = "off"

// NoSpans reports whether the sweep recorded no spans (--spans off).
func (p *PlanRecord) NoSpans() bool { return p.Spans == SpansOff }

// VersionSpec is an engine version with its feature set.
type VersionSpec struct {
	Name     string         `json:"name"`
	Features map[string]any `json:"features"`
}

// WorldOptions are the world settings common to every cell.
type WorldOptions struct {
	Guard               bool   `json:"guard,omitempty"`
	RetryStyle          string `json:"retry_style"`
	VisibilityTimeoutMS int64  `json:"visibility_timeout_ms"`
	NATSURL             string `json:"nats_url,omitempty"`
	NATSStorage         string `json:"nats_storage,omitempty"`
	NATSReplicas        int    `json:"nats_replicas,omitempty"`
	SimLog              string `json:"sim_log,omitempty"`
	// PostgresURL is the PostgreSQL world's server, its password left out
	// (empty: a throwaway server); PostgresFsync that server's fsync.
	PostgresURL   string `json:"postgres_url,omitempty"`
	PostgresFsync string `json:"postgres_fsync,omitempty"`
}

// Cell is one point of the matrix.
type Cell struct {
	// Target is the engine under test when it was not the built-in one
	// (the --targets name; a URL target's host:port). Such a cell has no
	// version, switches or world of durabench's.
	Target string `json:"target,omitempty"`
	// TargetSpec is the target as the plan gave it ("workflow
	// --sdk=5.0.0-beta.55 --world=local") when Target is the label the
	// target gave itself instead (its /v1/info label): the cell's key uses
	// it, so a resumed sweep or a comparison matches the cell.
	TargetSpec string `json:"target_spec,omitempty"`
	// Engine and EngineVersion are what the target said it is (its
	// GET /v1/info).
	Engine        string `json:"engine,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	// Skipped is why the target did not run the cell (a scenario it does
	// not support, an option over its limit): the cell has no runs.
	Skipped string `json:"skipped,omitempty"`
	// ClockErrorUS bounds the error of the target's timestamps once
	// converted to the driver's clock (half the best clock round trip).
	ClockErrorUS float64 `json:"clock_error_us,omitempty"`
	// ClockDriftUS is the largest change of the target's clock offset
	// from the cell's start, signed, among the samples taken every few
	// seconds and at the cell's end: a clock that stepped or ran at
	// another rate (every timestamp may be off by that much more).
	ClockDriftUS float64 `json:"clock_drift_us,omitempty"`
	// TargetWorld is what the target said its engine runs on (its
	// GET /v1/info "world"): a target cell runs on no world of durabench's.
	TargetWorld string `json:"target_world,omitempty"`
	// TargetPolls counts the cell's timeline polls; EarlyEmptyPolls those
	// answered empty, the run still running, before half their wait (a
	// target that does not hold long polls: durabench backs off after
	// each).
	TargetPolls     int64 `json:"target_polls,omitempty"`
	EarlyEmptyPolls int64 `json:"early_empty_polls,omitempty"`
	// DroppedSpans counts the target's span events durabench could not
	// place (protocol 1.2: a category it does not know, an end before the
	// start), left out of the critical path (their time is unattributed);
	// DroppedSpan says why the first one was.
	DroppedSpans int64             `json:"dropped_spans,omitempty"`
	DroppedSpan  string            `json:"dropped_span,omitempty"`
	Scenario     string            `json:"scenario"`
	Branches     int               `json:"branches,omitempty"`
	Steps        int               `json:"steps,omitempty"`
	Options      map[string]string `json:"options,omitempty"`
	Version      string            `json:"version"`
	Switches     []string          `json:"switches"`
	World        string            `json:"world"`
	Profile      string            `json:"profile"`
	// Runs is the number of measured runs (warm-ups excluded), including
	// failed and stalled ones.
	Runs   int `json:"runs"`
	Errors int `json:"errors"`
	Stalls int `json:"stalls"`
	// StalledRuns lists each stalled run with its TTLS (or its elapsed time
	// when it never finished).
	StalledRuns []StalledRun `json:"stalled_runs,omitempty"`
	// StallThresholdMS is the TTLS above which a finished run counted as a
	// stall (metrics.StallRule), as applied to this cell.
	StallThresholdMS float64 `json:"stall_threshold_ms,omitempty"`
	// FailedRuns lists runs that failed, with the error.
	FailedRuns []FailedRun `json:"failed_runs,omitempty"`
	// Anomalies counts the measured runs whose engine-side history the
	// target found wrong (a duplicate terminal event, a step completed
	// twice, a status disagreeing with the terminal event: the target
	// protocol's anomalies); AnomalousRuns lists them with what was found.
	Anomalies     int            `json:"anomalies,omitempty"`
	AnomalousRuns []AnomalousRun `json:"anomalous_runs,omitempty"`
	// ElapsedMS is the cell's wall (or virtual) duration.
	ElapsedMS float64 `json:"elapsed_ms"`
	// DriverLagUS summarises actual − scheduled start (open-loop pacing).
	DriverLag *Metric `json:"driver_lag,omitempty"`
	// CPU is what the cell cost the machine's processors while its driver
	// ran, warm-up included (absent when it could not be read).
	CPU *CellCPU `json:"cpu,omitempty"`
	// Metrics maps a metric name (metrics package constants: "ttfs", "ttls",
	// "skew", "skew_offset", "stso", "stso_inline", "stso_queue", "wo",
	// "ttc", ...) to its summary.
	Metrics map[string]Metric `json:"metrics"`
	// CriticalPath is where the time went: the runs' TTLS split along each
	// run's critical path by category (metrics.Categories, in that order,
	// unattributed included). One finished run's categories add up
	// exactly to its TTLS, so the means add up to the TTLS mean of the
	// finished runs. Absent when the engine reported no spans.
	CriticalPath []PathCategory `json:"critical_path,omitempty"`
	// CompletionPath is the same split of the runs' TTC: each finished
	// run's path from t0 to its terminal event (metrics.RunCompletionPath),
	// its categories adding up exactly to its TTC, the means to the TTC
	// mean of the finished runs. Where a run is recorded done well after
	// its last step, it says where that time went. Absent with
	// CriticalPath, and in a cell that does not report TTC.
	CompletionPath []PathCategory `json:"critical_path_ttc,omitempty"`
	// STSOSlopeUS is the least-squares slope of STSO over the step index, in
	// microseconds per step (sequential scenarios).
	STSOSlopeUS *float64 `json:"stso_slope_us,omitempty"`
	// Workers names the external workers (durabench worker ids) that ran
	// the cell's engine; empty when the driver's own engine ran it.
	Workers []string `json:"workers,omitempty"`
	// Redeliveries counts queue deliveries with attempt > 1 on the
	// external workers: engine retries (a nak'ed delivery, e.g. a step
	// message that arrived before its step_created) and messages a worker
	// that died held (redelivered after the visibility timeout).
	Redeliveries int `json:"redeliveries,omitempty"`
	// WorkerStats are each external worker's clock offset against the
	// driver and its counts.
	WorkerStats []WorkerStat `json:"worker_stats,omitempty"`
	// CadenceSHA256 is the SHA-256 of the replayed cadence's canonical
	// tuples (stream-replay): two cells replayed the same capture when
	// they are equal, whatever the file was called.
	CadenceSHA256 string `json:"cadence_sha256,omitempty"`
	// CRTTProgress is the mean chunk round trip per tenth of the stream
	// (Key 0..9: chunk index × 10 / chunks), pooled over the cell's runs;
	// CRTTBySize the same per chunk size in bytes (Key), ascending. Stream
	// cells only.
	CRTTProgress []CRTTBin `json:"crtt_progress,omitempty"`
	CRTTBySize   []CRTTBin `json:"crtt_by_size,omitempty"`
	// WorldIncidents counts what went wrong below the world contract while
	// the cell ran (world.Incidents: replies the client dropped, timeouts,
	// reads refused for a gap, lost connections, calls that failed
	// transiently and were retried). Absent when there were none; reports
	// show it next to stalls and errors.
	WorldIncidents *world.Incidents `json:"world_incidents,omitempty"`
	// Pairing is set on each cell of an interleaved pair (sweep
	// --interleave): its side, its partner, and each measured run's block
	// and position with its tested values.
	Pairing *Pairing `json:"pairing,omitempty"`
}

// CellCPU is the cores a cell kept busy on average (CPU time over the
// wall time its driver ran, 1 = one core all the time).
type CellCPU struct {
	// DurabenchCores is durabench's own process: its driver, and the
	// engine when it runs in process.
	DurabenchCores float64 `json:"durabench_cores"`
	// TargetCores is the adapter's process of a target durabench started
	// (not its children, such as a PostgreSQL server; Linux, to the
	// kernel's 10 ms accounting); absent for a target reached by URL.
	TargetCores *float64 `json:"target_cores,omitempty"`
	// StealCores is the processor time a virtual machine's host took from
	// its vCPUs (steal time, /proc/stat; the hypervisor's count, accounted
	// to the kernel's 10 ms ticks; Linux; 0 on bare metal): while a vCPU
	// is taken nothing on it runs, the driver's pacer included.
	StealCores *float64 `json:"steal_cores,omitempty"`
}

// WorkerStat is one external worker's part in a cell.
type WorkerStat struct {
	Worker string `json:"worker"`
	// Host is the worker's host name; Concurrency its engine's delivery
	// concurrency (durabench worker --concurrency).
	Host        string `json:"host,omitempty"`
	Concurrency int    `json:"concurrency,omitempty"`
	// OffsetUS is the worker's clock minus the driver's, estimated at cell
	// start from the round trip with the smallest RTTUS; the worker's
	// timestamps were converted with it (error at most RTTUS/2).
	OffsetUS float64 `json:"offset_us"`
	RTTUS    float64 `json:"rtt_us"`
	// DriftUS is how much the offset changed by the end of the cell (a
	// second estimate); absent when the worker did not answer it.
	DriftUS *float64 `json:"drift_us,omitempty"`
	// Deliveries and Redeliveries are the queue deliveries the worker
	// handled, and those with attempt > 1; Steps the step bodies it ran.
	Deliveries   int64 `json:"deliveries"`
	Redeliveries int64 `json:"redeliveries"`
	Steps        int64 `json:"steps"`
	// Lost is set when the worker did not answer at the end of the cell
	// (it died): its counts are missing.
	Lost bool `json:"lost,omitempty"`
	// Left is set when the worker stopped on a signal mid-cell, cleanly
	// (its running handlers finished, the messages it held were nak'ed).
	Left bool `json:"left,omitempty"`
}

// CRTTBin is one bin of a CRTT profile: the chunks in it and their mean
// round trip in microseconds.
type CRTTBin struct {
	Key    int     `json:"key"`
	Count  int     `json:"count"`
	MeanUS float64 `json:"mean_us"`
}

// StalledRun is a run counted as a stall.
type StalledRun struct {
	Run      string  `json:"run"`
	TTLSMS   float64 `json:"ttls_ms"`
	Finished bool    `json:"finished"`
	// NotStarted is set for a planned run the driver never started before
	// the cell timeout (TTLSMS is 0: it has no latency).
	NotStarted bool `json:"not_started,omitempty"`
}

// AnomalousRun is a run whose history held anomalies, each a kind
// ("duplicate_terminal") and what was seen ("run_completed x3").
type AnomalousRun struct {
	Run       string    `json:"run"`
	Anomalies []Anomaly `json:"anomalies"`
}

// Anomaly is one thing wrong in a run's engine-side history.
type Anomaly struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail,omitempty"`
}

// FailedRun is a run that failed.
type FailedRun struct {
	Run   string `json:"run"`
	Error string `json:"error"`
}

// Metric summarises one metric of a cell. Every value is in Unit
// (microseconds); quantiles are nearest-rank over Values.
type Metric struct {
	Unit  string  `json:"unit"`
	Count int     `json:"count"`
	Min   int64   `json:"min"`
	P50   int64   `json:"p50"`
	P75   int64   `json:"p75"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
	Max   int64   `json:"max"`
	Mean  float64 `json:"mean"`
	// Negative counts samples that were below zero (clock skew between
	// hosts); they are clamped to 0 in Values.
	Negative int `json:"negative,omitempty"`
	// Overflow counts samples above the HDR range (1 h): they are recorded
	// at 1 h in HDR, but kept exact in Values and the summary.
	Overflow int `json:"overflow,omitempty"`
	// Values are the per-sample values in run order.
	Values []int64 `json:"values"`
	// PerRun is one aggregate per run of a metric with several samples
	// per run (metrics.Def.Tested: the run's median or mean, named by
	// PerRunStat), in run order, over the runs that had a sample. Compare
	// and gate test these, since runs, not samples, are independent.
	// Absent for metrics with one sample per run (Values are per run) and
	// in files written before durabench kept it.
	PerRun     []int64 `json:"per_run,omitempty"`
	PerRunStat string  `json:"per_run_stat,omitempty"`
	// HDR is the base64 of the HDR histogram's V2 compressed encoding
	// (1 µs .. 1 h, 3 significant figures).
	HDR string `json:"hdr"`
}
