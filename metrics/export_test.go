package metrics

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Exported for the package's tests only: the CLI and reports read a
// Histogram through Count, Max, Bars and Encode, and each metric through
// Collect.

// Quantile returns the value at quantile q, 0–100 (HDR bucket precision).
func (h *Histogram) Quantile(q float64) int64 { return h.h.ValueAtPercentile(q) }

// HDR exposes the underlying histogram.
func (h *Histogram) HDR() *hdrhistogram.Histogram { return h.h }

// The per-run forms of the metrics Collect computes per cell.

func BranchSkews(t *RunTimeline) []time.Duration { return branchSkews(stages(Steps(t))) }

func BranchOffsets(t *RunTimeline) []time.Duration { return branchOffsets(stages(Steps(t))) }

func StepGaps(t *RunTimeline, races ...int) []Gap { return stepGaps(stages(Steps(t)), races) }

func WorkflowOverhead(t *RunTimeline, races ...int) (d time.Duration, ok bool) {
	return workflowOverhead(t.T0, stages(Steps(t)), races)
}

// CategoryOrUnattributed is the walk's index of a category name.
func CategoryOrUnattributed(cat string) int { return categoryOrUnattributed(cat) }

// CategoryConsts are the categories' index constants, in Categories'
// order.
var CategoryConsts = []int{catDriverLag, catStart, catQueueWait, catLogLoad, catWrite, catPublish, catRunRead,
	catCompute, catBody, catContention, catUnattributed}
