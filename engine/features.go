package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Dispatch is how the suspension handler hands new steps to the queue.
type Dispatch string

const (
	// Sequential writes every step_created, then publishes the step messages.
	Sequential Dispatch = "sequential"
	// Parallel writes step_created and publishes the message (carrying the
	// step input) at the same time (resilient step dispatch).
	Parallel Dispatch = "parallel"
)

// PublishLoop is how step messages are published.
type PublishLoop string

const (
	Concurrent PublishLoop = "concurrent"
	Serial     PublishLoop = "serial" // the per-step enqueue loop of the reference
)

// Recovery is how a step consumer recovers a step whose step_created is
// missing (the parallel write failed while its message was delivered).
type Recovery string

const (
	// RecoveryNone never re-ensures step_created.
	RecoveryNone Recovery = "none"
	// RecoveryRedelivery re-ensures step_created only when attempt > 1 — the
	// version behind the 300 s stalls when a retry resets the attempt.
	RecoveryRedelivery Recovery = "redelivery"
	// RecoveryInband re-ensures on a step-missing rejection and retries the
	// claim once in the same delivery, whatever the attempt (the fix).
	RecoveryInband Recovery = "inband"
)

// Features is a named version's feature set (DESIGN.md §4).
type Features struct {
	Dispatch    Dispatch    `json:"dispatch" yaml:"dispatch"`
	PublishLoop PublishLoop `json:"publish_loop" yaml:"publish_loop"`
	Recovery    Recovery    `json:"recovery" yaml:"recovery"`
	// RunContext: step messages carry the run identity, so the consumer skips
	// the runs.get before its claim.
	RunContext bool `json:"run_context" yaml:"run_context"`
	// InlineSteps: up to this many steps of a stage run in the orchestrator's
	// task right after dispatch, without a queue hop ("turbo").
	InlineSteps int `json:"inline_steps" yaml:"inline_steps"`
	// InlineBudget caps the inline steps one orchestrator invocation runs
	// before it hands the run on through a queue hop (0: no cap). It is what
	// splits a long sequence's gaps into inline and queue-hop ones. Whatever
	// the budget, an invocation starts no inline step past half its
	// delivery's visibility timeout (Engine.newInvocation).
	InlineBudget int `json:"inline_budget" yaml:"inline_budget"`
	// LazyHookResume: hook_received write and queue publish in parallel,
	// deduplicated by resume id.
	LazyHookResume bool `json:"lazy_hook_resume" yaml:"lazy_hook_resume"`
	// PendingCount: step-terminal writes return the pending count, so only
	// the last completer loads the log.
	PendingCount bool `json:"pending_count" yaml:"pending_count"`
}

// Validate reports the first field with an impossible value.
func (f Features) Validate() error {
	switch f.Dispatch {
	case Sequential, Parallel:
	default:
		return fmt.Errorf("dispatch: %q is not sequential or parallel", f.Dispatch)
	}
	switch f.PublishLoop {
	case Concurrent, Serial:
	default:
		return fmt.Errorf("publish_loop: %q is not concurrent or serial", f.PublishLoop)
	}
	switch f.Recovery {
	case RecoveryNone, RecoveryRedelivery, RecoveryInband:
	default:
		return fmt.Errorf("recovery: %q is not none, redelivery or inband", f.Recovery)
	}
	if f.InlineSteps < 0 {
		return fmt.Errorf("inline_steps: %d is negative", f.InlineSteps)
	}
	if f.InlineBudget < 0 {
		return fmt.Errorf("inline_budget: %d is negative", f.InlineBudget)
	}
	return nil
}

// String is a compact description, e.g. "dispatch=parallel publish=concurrent recovery=inband run_context inline=1".
func (f Features) String() string {
	parts := []string{
		"dispatch=" + string(f.Dispatch),
		"publish=" + string(f.PublishLoop),
		"recovery=" + string(f.Recovery),
	}
	if f.RunContext {
		parts = append(parts, "run_context")
	}
	if f.InlineSteps > 0 {
		parts = append(parts, "inline="+strconv.Itoa(f.InlineSteps))
	}
	if f.InlineBudget > 0 {
		parts = append(parts, "budget="+strconv.Itoa(f.InlineBudget))
	}
	if f.LazyHookResume {
		parts = append(parts, "lazy_hook_resume")
	}
	if f.PendingCount {
		parts = append(parts, "pending_count")
	}
	return strings.Join(parts, " ")
}

// Version is a named feature set.
type Version struct {
	Name        string   `json:"name" yaml:"name"`
	Description string   `json:"description,omitempty" yaml:"description"`
	Features    Features `json:"features" yaml:"features"`
}

// builtins retrace the reference write-ups, oldest first.
var builtins = []Version{
	{"baseline", "create every step, then publish them all; one runs.get per step", Features{
		Dispatch: Sequential, PublishLoop: Concurrent, Recovery: RecoveryNone, InlineSteps: 1, InlineBudget: 100}},
	{"baseline-serial", "baseline with the serial per-step enqueue loop (the quickjs engine's dispatch before resilient dispatch)", Features{
		Dispatch: Sequential, PublishLoop: Serial, Recovery: RecoveryNone, InlineSteps: 1, InlineBudget: 100}},
	{"resilient", "step_created ∥ publish with step input on the message; re-ensure on redelivery (attempt > 1)", Features{
		Dispatch: Parallel, PublishLoop: Concurrent, Recovery: RecoveryRedelivery, InlineSteps: 1, InlineBudget: 100, LazyHookResume: true}},
	{"resilient-inband", "resilient, with in-band re-ensure on a step-missing rejection (the 300 s stall fix)", Features{
		Dispatch: Parallel, PublishLoop: Concurrent, Recovery: RecoveryInband, InlineSteps: 1, InlineBudget: 100, LazyHookResume: true}},
	{"runcontext", "resilient-inband, and step messages carry the run identity (no runs.get before the claim)", Features{
		Dispatch: Parallel, PublishLoop: Concurrent, Recovery: RecoveryInband, RunContext: true, InlineSteps: 1, InlineBudget: 100, LazyHookResume: true}},
	{"pending-count", "runcontext, and step-terminal writes return the pending count (only the last completer loads the log)", Features{
		Dispatch: Parallel, PublishLoop: Concurrent, Recovery: RecoveryInband, RunContext: true, InlineSteps: 1, InlineBudget: 100, LazyHookResume: true, PendingCount: true}},
}

// Versions returns the built-in versions, oldest first.
func Versions() []Version { return append([]Version(nil), builtins...) }

// DefaultVersions are the versions a sweep runs when none are named: the
// reference's node engine, oldest first. baseline-serial, its quickjs
// engine's dispatch, runs when named or with "all".
func DefaultVersions() []Version {
	var out []Version
	for _, v := range builtins {
		if v.Name != "baseline-serial" {
			out = append(out, v)
		}
	}
	return out
}

// LookupVersion returns the built-in version with that name.
func LookupVersion(name string) (Version, error) {
	for _, v := range builtins {
		if v.Name == name {
			return v, nil
		}
	}
	names := make([]string, len(builtins))
	for i, v := range builtins {
		names[i] = v.Name
	}
	return Version{}, fmt.Errorf("unknown version %q (known: %s)", name, strings.Join(names, ", "))
}

// Switch names.
const (
	SwitchResilientStepDispatch = "resilient-step-dispatch"
	SwitchLazyHookResume        = "lazy-hook-resume"
	// SwitchGuard is a world switch (guard=on|off), applied to world.Options.
	SwitchGuard = "guard"
)

// SwitchInfo describes a kill switch for `durabench list`.
type SwitchInfo struct{ Name, Values, Effect string }

// KnownSwitches lists the kill switches.
func KnownSwitches() []SwitchInfo {
	return []SwitchInfo{
		{SwitchResilientStepDispatch, "0|1", "0: back to the pre-resilient path: create every step, then publish"},
		{SwitchLazyHookResume, "0|1", "0: hook_received written before the queue publish"},
		{SwitchGuard, "on|off", "world enforces the precondition guard; under it dispatch stays sequential"},
	}
}

// SwitchSet is one set of kill-switch overrides for a cell, e.g.
// "resilient-step-dispatch=0,guard=on". The zero value is "none".
type SwitchSet struct {
	// Values maps a switch name to its value; nil or empty means none.
	Values map[string]string
}

// ParseSwitchSet parses "none" or "name=value[,name=value...]" (a '+' also
// separates pairs, so a set fits in a comma-separated flag list).
func ParseSwitchSet(s string) (SwitchSet, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return SwitchSet{}, nil
	}
	set := SwitchSet{Values: map[string]string{}}
	for _, pair := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '+' }) {
		name, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return SwitchSet{}, fmt.Errorf("switch %q: want name=value", pair)
		}
		switch name {
		case SwitchResilientStepDispatch, SwitchLazyHookResume:
			if val != "0" && val != "1" {
				return SwitchSet{}, fmt.Errorf("switch %s: value %q is not 0 or 1", name, val)
			}
		case SwitchGuard:
			if val != "on" && val != "off" {
				return SwitchSet{}, fmt.Errorf("switch %s: value %q is not on or off", name, val)
			}
		default:
			return SwitchSet{}, fmt.Errorf("unknown switch %q (known: %s, %s, %s)", name,
				SwitchResilientStepDispatch, SwitchLazyHookResume, SwitchGuard)
		}
		set.Values[name] = val
	}
	return set, nil
}

// List returns the set as sorted "name=value" strings (empty for none).
func (s SwitchSet) List() []string {
	out := make([]string, 0, len(s.Values))
	for k, v := range s.Values {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// String is "none" or the sorted pairs joined by '+'.
func (s SwitchSet) String() string {
	if len(s.Values) == 0 {
		return "none"
	}
	return strings.Join(s.List(), "+")
}

// Guard returns the guard switch: set reports whether the set names it.
func (s SwitchSet) Guard() (on, set bool) {
	v, ok := s.Values[SwitchGuard]
	return v == "on", ok
}

// Apply returns f with the set's engine switches applied.
func (s SwitchSet) Apply(f Features) Features {
	switch s.Values[SwitchResilientStepDispatch] {
	case "0": // the pre-resilient path: create every step, then publish
		f.Dispatch = Sequential
	case "1":
		f.Dispatch, f.PublishLoop = Parallel, Concurrent
	}
	switch s.Values[SwitchLazyHookResume] {
	case "0":
		f.LazyHookResume = false
	case "1":
		f.LazyHookResume = true
	}
	return f
}
