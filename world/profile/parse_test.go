package profile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

const example = `name: my-backend
ops:
  default: {latency: {dist: lognormal, median: 20ms, p99: 80ms}}
  step_created: {latency: {dist: fixed, value: 25ms}, transient: 2%}
  log_load: {latency: {dist: fixed, value: 20ms}, per_event: 50us, capacity: 16}
  publish: {transient: 0.5%}
  deliver: {latency: normal:30ms:5ms}
targets: {ttfs: [200ms, 300ms, 600ms]}   # optional p75/p90/p99 targets
`

func TestParseExample(t *testing.T) {
	p, err := profile.Parse("profile.yaml", []byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "my-backend" || p.Source != "profile.yaml" {
		t.Errorf("name %q source %q", p.Name, p.Source)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	def := profile.LogNormal{Median: 20 * time.Millisecond, P99: 80 * time.Millisecond}
	tests := []struct {
		op        world.Op
		latency   profile.Dist
		transient float64
		capacity  int
		perEvent  time.Duration
	}{
		{"step_created", profile.Fixed(25 * time.Millisecond), 0.02, 0, 0},
		{world.OpLoad, profile.Fixed(20 * time.Millisecond), 0, 16, 50 * time.Microsecond},
		// Fields an op does not set come from default.
		{world.OpPublish, def, 0.005, 0, 0},
		{world.OpDeliver, profile.Normal{Mu: 30 * time.Millisecond, StdDev: 5 * time.Millisecond}, 0, 0, 0},
		{world.OpGetRun, def, 0, 0, 0},
		{"step_completed", def, 0, 0, 0},
	}
	for _, tt := range tests {
		r := p.For(tt.op)
		if r.Latency != tt.latency || r.Transient != tt.transient || r.Capacity != tt.capacity || r.PerEvent != tt.perEvent {
			t.Errorf("For(%s) = {%v %v %v %v}, want {%v %v %v %v}", tt.op,
				r.Latency, r.Transient, r.Capacity, r.PerEvent, tt.latency, tt.transient, tt.capacity, tt.perEvent)
		}
	}
	if got := p.Targets["ttfs"]; got != (profile.Targets{200 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}) {
		t.Errorf("targets %v", got)
	}
}

func TestParseGroups(t *testing.T) {
	p, err := profile.Parse("g.yaml", []byte(`
ops:
  default: {latency: 1ms}
groups:
  reads: {ops: [run_get, log_load], capacity: 8}
  writes: {ops: [appends], capacity: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "g" {
		t.Errorf("name %q, want the file's base name", p.Name)
	}
	if g := p.GroupOf(world.OpLoad); g == nil || g.Name != "reads" || g.Capacity != 8 {
		t.Errorf("GroupOf(log_load) = %+v", g)
	}
	if g := p.GroupOf("step_completed"); g == nil || g.Name != "writes" || len(g.Ops) != 12 {
		t.Errorf("GroupOf(step_completed) = %+v", g)
	}
	if g := p.GroupOf(world.OpPublish); g != nil {
		t.Errorf("GroupOf(publish) = %+v, want none", g)
	}
}

// TestParseErrors covers each kind of mistake: the error names the file, the
// line and the field, and wraps ErrInvalid.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // substring of the error
		line       int
	}{
		{"unknown top-level key", "name: x\nopz: {}\n", `p.yaml:2: opz: unknown field (did you mean "ops"?)`, 2},
		{"unknown op key", "ops:\n  publish: {latency: 1ms, transiant: 2%}\n", `p.yaml:2: ops.publish.transiant: unknown field (did you mean "transient"?)`, 2},
		{"unknown latency key", "ops:\n  publish:\n    latency: {dist: fixed, value: 1ms, mean: 2ms}\n", `p.yaml:3: ops.publish.latency.mean: not a parameter of fixed (it takes value)`, 3},
		{"wrong type capacity", "ops:\n  log_load:\n    capacity: ten\n", `p.yaml:3: ops.log_load.capacity: "ten" is not a whole number`, 3},
		{"wrong type latency", "ops:\n  publish:\n    latency: [1ms, 2ms]\n", `p.yaml:3: ops.publish.latency: expected a mapping, got a list`, 3},
		{"wrong type ops", "ops: 5\n", `p.yaml:1: ops: expected a mapping, got "5"`, 1},
		{"wrong type op entry", "ops:\n  publish: 5ms\n", `p.yaml:2: ops.publish: expected a mapping, got "5ms"`, 2},
		{"percent out of range", "name: x\nops:\n  step_created:\n    latency: 1ms\n\n\n    transient: 120%\n", `p.yaml:7: ops.step_created.transient: 120% is not in 0–100%`, 7},
		{"percent without sign", "ops:\n  step_created: {transient: 0.02}\n", `p.yaml:2: ops.step_created.transient: "0.02" needs a % sign`, 2},
		{"negative percent", "ops:\n  step_created: {transient: -1%}\n", `ops.step_created.transient: -1% is not in 0–100%`, 2},
		{"duration without unit", "ops:\n  publish: {latency: {dist: fixed, value: 25}}\n", `p.yaml:2: ops.publish.latency.value: "25" needs a unit (ns, us, ms, s), e.g. 25ms`, 2},
		{"bad duration", "ops:\n  publish: {latency: {dist: fixed, value: fast}}\n", `ops.publish.latency.value: "fast" is not a duration`, 2},
		{"negative duration", "ops:\n  log_load: {per_event: -5us}\n", `ops.log_load.per_event: -5us is negative`, 2},
		{"concurrency off deliver", "ops:\n  publish: {concurrency: 8}\n", `p.yaml:2: ops.publish.concurrency: only deliver has a concurrency`, 2},
		{"zero concurrency", "ops:\n  deliver: {concurrency: 0}\n", `p.yaml:2: ops.deliver.concurrency: 0 must be at least 1`, 2},
		{"compact latency without unit", "ops:\n  deliver: {latency: 30}\n", `p.yaml:2: ops.deliver.latency: "30" needs a unit`, 2},
		{"bad compact latency", "ops:\n  publish: {latency: soon}\n", `ops.publish.latency: "soon" is neither a duration nor dist:params`, 2},
		{"unknown op", "ops:\n  default: {latency: 1ms}\n  step_create: {transient: 1%}\n", `p.yaml:3: ops.step_create: unknown op (did you mean "step_created"?)`, 3},
		{"unknown dist", "ops:\n  publish: {latency: {dist: gaussian, mean: 1ms}}\n", `p.yaml:2: ops.publish.latency.dist: unknown dist "gaussian"`, 2},
		{"unknown compact dist", "ops:\n  publish: {latency: \"gauss:1ms:2ms\"}\n", `ops.publish.latency: unknown dist "gauss"`, 2},
		{"missing dist", "ops:\n  publish: {latency: {value: 1ms}}\n", `ops.publish.latency.dist: missing`, 2},
		{"missing param", "ops:\n  publish: {latency: {dist: lognormal, median: 1ms}}\n", `ops.publish.latency.p99: missing (lognormal takes median, p99)`, 2},
		{"p99 below median", "ops:\n  publish: {latency: {dist: lognormal, median: 10ms, p99: 5ms}}\n", `ops.publish.latency: lognormal p99 5ms is below the median 10ms`, 2},
		{"per_event on publish", "ops:\n  publish: {per_event: 1us}\n", `ops.publish.per_event: only log_load has a per-event cost`, 2},
		{"zero capacity", "ops:\n  log_load: {capacity: 0}\n", `ops.log_load.capacity: 0 must be at least 1`, 2},
		{"duplicate key", "ops:\n  publish: {latency: 1ms}\n  publish: {latency: 2ms}\n", `p.yaml:3: ops.publish: given twice (first on line 2)`, 3},
		{"group unknown op", "groups:\n  reads: {ops: [run_get, log_lod], capacity: 2}\n", `groups.reads.ops: unknown op "log_lod" (did you mean "log_load"?)`, 2},
		{"group missing capacity", "groups:\n  reads: {ops: [run_get]}\n", `groups.reads.capacity: missing`, 2},
		{"group named like an op", "groups:\n  publish: {ops: [run_get], capacity: 1}\n", `groups.publish: a group cannot be named like an op`, 2},
		{"op in two groups", "groups:\n  a: {ops: [run_get], capacity: 1}\n  b: {ops: [run_get], capacity: 1}\n", `groups.b.ops: run_get is already in group a`, 3},
		{"grouped op with capacity", "ops:\n  run_get: {capacity: 3}\ngroups:\n  a: {ops: [run_get], capacity: 1}\n", `p.yaml:2: ops.run_get.capacity: run_get is in group a, which sets its capacity`, 2},
		{"targets count", "targets:\n  ttfs: [1ms, 2ms]\n", `targets.ttfs: expected [p75, p90, p99]`, 2},
		{"targets order", "targets:\n  ttfs: [3ms, 2ms, 1ms]\n", `targets.ttfs: p75 <= p90 <= p99 expected`, 2},
		{"targets metric", "targets:\n  tffs: [1ms, 2ms, 3ms]\n", `targets.tffs: unknown metric (did you mean "ttfs"?)`, 2},
		{"bad name", "name: my backend\n", `p.yaml:1: name: "my backend" must be a non-empty name`, 1},
		{"malformed yaml", "ops:\n  publish: {latency: 1ms\n", `p.yaml:`, 0},
		{"tab indent", "ops:\n\tpublish: {}\n", `p.yaml:2: malformed YAML`, 2},
		{"empty file", "", `p.yaml: empty file`, 0},
		{"only comments", "# nothing\n", `p.yaml: empty file`, 0},
		{"two documents", "name: a\n---\nname: b\n", `p.yaml:2: a second YAML document`, 2},
		{"hdr file missing", "ops:\n  publish: {latency: {dist: hdr, file: nope.hdr}}\n", `ops.publish.latency: hdr: open nope.hdr`, 2},
		{"hdr unit", "ops:\n  publish: {latency: {dist: hdr, file: x.hdr, unit: minutes}}\n", `ops.publish.latency.unit: unknown unit "minutes"`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := profile.Parse("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !errors.Is(err, profile.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, tt.want)
			}
			var pe *profile.Error
			if errors.As(err, &pe) && tt.line > 0 && pe.Line != tt.line {
				t.Errorf("line %d, want %d", pe.Line, tt.line)
			}
		})
	}
}

// TestParseReportsEveryMistake: one run shows all mistakes, in file order.
func TestParseReportsEveryMistake(t *testing.T) {
	_, err := profile.Parse("p.yaml", []byte("ops:\n  publish: {transient: 200%}\n  deliver: {capacity: -1}\nfoo: 1\n"))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "p.yaml:2:") || !strings.HasPrefix(lines[1], "p.yaml:3:") || !strings.HasPrefix(lines[2], "p.yaml:4:") {
		t.Errorf("error:\n%v", err)
	}
}

func TestLoad(t *testing.T) {
	if got := profile.Names(); strings.Join(got, ",") != "none,lan,cloud-v1,cloud" {
		t.Errorf("Names() = %v", got)
	}
	for _, name := range profile.Names() {
		p, err := profile.Load(name)
		if err != nil {
			t.Fatalf("Load(%s): %v", name, err)
		}
		if p.Name != name || p.Source != "builtin" {
			t.Errorf("Load(%s): name %q source %q", name, p.Name, p.Source)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("Load(%s).Validate: %v", name, err)
		}
		if !strings.HasPrefix(p.Describe(), name+" (builtin)") {
			t.Errorf("Describe:\n%s", p.Describe())
		}
	}
	// Each Load is a fresh profile: changing one does not change the next.
	p, _ := profile.Load("cloud")
	p.Default.Transient = 0.5
	if q, _ := profile.Load("cloud"); q.Default.Transient != 0 {
		t.Error("Load returned a shared profile")
	}

	path := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(path, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := profile.Load(path); err != nil || p.Name != "my-backend" || p.Source != path {
		t.Errorf("Load(file) = %v, %v", p, err)
	}
	for _, bad := range []string{"clowd", filepath.Join(t.TempDir(), "missing.yaml")} {
		if _, err := profile.Load(bad); !errors.Is(err, profile.ErrInvalid) {
			t.Errorf("Load(%q) error %v, want ErrInvalid", bad, err)
		}
	}
	_, err := profile.Load("clowd")
	if want := `"clowd" is neither a profile name (none, lan, cloud-v1, cloud) nor a file`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(clowd) error %v", err)
	}
}

// TestCloudV1Numbers pins the hand-set cloud-v1 profile's documented
// numbers, so a change to them is a visible decision. (cloud's are pinned
// by the fit that makes them: calibrate's tests.)
func TestCloudV1Numbers(t *testing.T) {
	p, err := profile.Load("cloud-v1")
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	for _, tt := range []struct {
		op       world.Op
		p50, p99 time.Duration
	}{
		{"step_created", 25 * ms, 75 * ms},
		{world.OpCreateRun, 30 * ms, 90 * ms},
		{world.OpGetRun, 15 * ms, 45 * ms},
		{world.OpLoad, 20 * ms, 60 * ms},
		{world.OpPublish, 20 * ms, 50 * ms},
		{world.OpDeliver, 30 * ms, 90 * ms},
	} {
		r := p.For(tt.op)
		if r.Latency == nil || r.Latency.Quantile(0.5).Round(ms) != tt.p50 || r.Latency.Quantile(0.99).Round(ms) != tt.p99 {
			t.Errorf("cloud-v1 %s latency %v, want p50 %v p99 %v", tt.op, r.Latency, tt.p50, tt.p99)
		}
		if r.Transient != 0 {
			t.Errorf("cloud-v1 %s transient %v, want none by default", tt.op, r.Transient)
		}
	}
	if r := p.For(world.OpLoad); r.PerEvent != 100*time.Microsecond {
		t.Errorf("cloud-v1 log_load per_event %v", r.PerEvent)
	}
	if g := p.GroupOf(world.OpLoad); g == nil || g.Capacity != 8 || p.GroupOf(world.OpGetRun) != g {
		t.Errorf("cloud-v1 reads group %+v", g)
	}
	if g := p.GroupOf("step_created"); g == nil || g.Capacity != 16 {
		t.Errorf("cloud-v1 writes group %+v", g)
	}
	// The mean of a lognormal is median·exp(σ²/2): run_get 15 ms median,
	// p99 45 ms → σ = ln 3 / 2.326 = 0.472, mean 16.8 ms.
	if got := p.Expected(world.OpGetRun, world.OpGetRun); !within(got, 2*16_780*time.Microsecond, 0.01) {
		t.Errorf("Expected(run_get, run_get) = %v", got)
	}
	if p.Targets["ttfs"][0] != 200*ms || p.Targets["sl"][2] != 125*ms || p.Targets["so"][1] != 500*ms {
		t.Errorf("cloud-v1 targets %v", p.Targets)
	}
}

func TestApplyOverrides(t *testing.T) {
	base, err := profile.Load("cloud-v1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.ApplyOverrides(base, "step_created.transient=2%, publish.latency=fixed:30ms,log_load.capacity=8,reads.capacity=4,default.transient=0.1%,deliver.concurrency=128")
	if err != nil {
		t.Fatal(err)
	}
	if r := p.For(world.OpDeliver); r.Concurrency != 128 || r.Latency != base.For(world.OpDeliver).Latency {
		t.Errorf("deliver %+v: want concurrency 128 and its latency kept", r)
	}
	if _, err := profile.ApplyOverrides(base, "publish.concurrency=4"); err == nil || !strings.Contains(err.Error(), "only deliver has a concurrency") {
		t.Errorf("publish.concurrency=4: %v", err)
	}
	if r := p.For("step_created"); r.Transient != 0.02 || r.Latency != base.For("step_created").Latency {
		t.Errorf("step_created %+v: want 2%% and the default latency kept", r)
	}
	if r := p.For(world.OpPublish); r.Latency != profile.Fixed(30*time.Millisecond) {
		t.Errorf("publish latency %v", r.Latency)
	}
	if r := p.For(world.OpLoad); r.Capacity != 8 || p.GroupOf(world.OpLoad) != nil || r.PerEvent != 100*time.Microsecond {
		t.Errorf("log_load %+v group %v: want its own capacity 8, out of the reads group", r, p.GroupOf(world.OpLoad))
	}
	if g := p.GroupOf(world.OpGetRun); g == nil || g.Capacity != 4 {
		t.Errorf("reads group %+v", g)
	}
	if r := p.For(world.OpDeliver); r.Transient != 0.001 {
		t.Errorf("deliver transient %v, want the default's 0.1%%", r.Transient)
	}
	if p.Label() != "cloud-v1[step_created.transient=2%,publish.latency=fixed:30ms,log_load.capacity=8,reads.capacity=4,default.transient=0.1%,deliver.concurrency=128]" {
		t.Errorf("Label %q", p.Label())
	}
	// The base profile is unchanged.
	if base.For("step_created").Transient != 0 || base.GroupOf(world.OpLoad) == nil || base.GroupOf(world.OpGetRun).Capacity != 8 || len(base.Overrides) != 0 {
		t.Error("ApplyOverrides changed its input")
	}

	for _, tt := range []struct{ in, want string }{
		{"step_created.transient=120%", `fault override "step_created.transient=120%": 120% is not in 0–100%`},
		{"step_created.transient=2", `"2" needs a % sign`},
		{"publish.latency=fast", `fault override "publish.latency=fast": "fast" is neither a duration nor dist:params`},
		{"publish.latency=lognormal:30ms", `lognormal needs median and p99`},
		{"log_load.capacity=0", `0 must be at least 1`},
		{"publish.per_event=1us", `only log_load has a per-event cost`},
		{"step_create.transient=1%", `unknown op or group "step_create" (did you mean "step_created"?)`},
		{"publish.latancy=1ms", `unknown field "latancy" (did you mean "latency"?)`},
		{"reads.latency=1ms", `a group has only a capacity`},
		{"step_created=2%", `expected TARGET.FIELD=VALUE`},
		{"frobnicate.transient=1%", `unknown op or group "frobnicate" (known: default, run_created,`},
		{"step_created.transient", `expected TARGET.FIELD=VALUE`},
	} {
		_, err := profile.ApplyOverrides(base, "publish.transient=1%,"+tt.in)
		if err == nil || !errors.Is(err, profile.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ApplyOverrides(%q) error %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    profile.Profile
		want string
	}{
		{"transient", profile.Profile{Default: profile.Rule{Transient: 1.5}}, "ops.default.transient: 150% is not in 0–100%"},
		{"unknown op", profile.Profile{Ops: map[world.Op]profile.Rule{"nope": {}}}, "ops.nope: unknown op"},
		{"negative capacity", profile.Profile{Ops: map[world.Op]profile.Rule{world.OpPublish: {Capacity: -1}}}, "ops.publish.capacity"},
		{"group capacity", profile.Profile{Groups: []profile.Group{{Name: "g", Ops: []world.Op{world.OpGetRun}}}}, "groups.g.capacity"},
		{"group op", profile.Profile{Groups: []profile.Group{{Name: "g", Ops: []world.Op{"nope"}, Capacity: 1}}}, `groups.g.ops: unknown op "nope"`},
	} {
		err := tt.p.Validate()
		if err == nil || !errors.Is(err, profile.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestShippedFiles: a profile parsed where its hdr files are not (a
// distributed sweep's worker) gets the same distributions from the files a
// FileSet kept when it was parsed where they are; a file that was not
// shipped is an error naming it, never a read of the local disk.
func TestShippedFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "rec"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rec", "five.txt"), []byte("5000 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "seven.txt"), []byte("7000 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "p.yaml")
	yaml := []byte("ops:\n  default: {latency: {dist: hdr, file: rec/five.txt, unit: us}}\n")
	overrides := "deliver.latency=hdr:" + filepath.Join(dir, "seven.txt")

	rec := &profile.FileSet{}
	p, err := profile.ParseWith(path, yaml, rec.Read)
	if err == nil {
		p, err = profile.ApplyOverridesWith(p, overrides, rec.Read)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Files) != 2 {
		t.Fatalf("recorded %d files, want 2: %v", len(rec.Files), rec.Files)
	}
	shipped := profile.ShippedFiles(rec.Files)
	q, err := profile.ParseWith(path, yaml, shipped)
	if err == nil {
		q, err = profile.ApplyOverridesWith(q, overrides, shipped)
	}
	if err != nil {
		t.Fatal(err)
	}
	for op, want := range map[world.Op]time.Duration{world.OpLoad: 5 * time.Millisecond, world.OpDeliver: 7 * time.Millisecond} {
		if a, b := p.Expected(op), q.Expected(op); a != b || a < want*99/100 || a > want*101/100 {
			t.Errorf("%s: mean %v where the files are, %v from the shipped files, want %v", op, a, b, want)
		}
	}
	if _, err := profile.ParseWith(path, yaml, profile.ShippedFiles(nil)); err == nil ||
		!strings.Contains(err.Error(), "rec/five.txt") || !strings.Contains(err.Error(), "not among the files shipped") {
		t.Errorf("unshipped file: %v", err)
	}
}
