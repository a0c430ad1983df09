package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/world/profile"
)

// Config configures Fit.
type Config struct {
	// Base is the profile the search starts from and whose structure
	// (which ops have rules, the groups) the fitted profile keeps.
	Base *profile.Profile
	// Seed is the plan seed of every measured cell (default 1, the
	// sweep's): the search is deterministic for a seed.
	Seed int64
	// Parallel is how many cells are measured at once (default GOMAXPROCS).
	Parallel int
	// MaxEvals bounds the profiles measured (default DefaultMaxEvals).
	MaxEvals int
	// Log, when set, receives a line per iteration of the search.
	Log func(format string, args ...any)
}

// DefaultMaxEvals bounds a search: about two minutes on two cores for a
// table the size of examples/published.yaml.
const DefaultMaxEvals = 160

// Result is a fit: the fitted profile, the table's figures under it and
// under the base, and the parameters searched.
type Result struct {
	Table   *Table
	Profile *profile.Profile
	// Params are the parameters searched, with their values in the base
	// and in the fitted profile; Frozen are those no figure of the table
	// depends on, left as they were.
	Params []ParamValue
	Frozen []string
	// Fitted and Start are the figures' values under the fitted profile
	// and the base, per cell, in table order.
	Fitted, Start [][]float64
	// Evals is the number of profiles measured.
	Evals int
}

// ParamValue is a parameter with its starting and fitted values.
type ParamValue struct {
	Param
	Start, Fitted float64
}

// Format prints v as the profile file writes the parameter.
func (p ParamValue) Format(v float64) string { return p.Param.format(v) }

// Fit searches the parameters of cfg.Base (see Params) for the profile
// whose figures on the sim world come closest to t's. It minimises the sum
// of the fitted figures' squared relative errors (see Residual) plus a weak
// pull toward the base (see prior), by Levenberg–Marquardt in the
// parameters' logarithms with forward-difference Jacobians, and by rounds
// of pattern search where its steps stop helping. Each candidate is
// rounded to what a profile file holds (three significant digits, whole µs
// and permits) before it is measured, so the fitted profile is exactly
// what its file says. Every candidate's cells run with the same seeds —
// those of a sweep of a profile named t.Profile — so the search is
// deterministic for cfg.Seed whatever cfg.Parallel is. It stops when the
// smallest pattern moves no longer help, or after cfg.MaxEvals profiles.
func Fit(ctx context.Context, t *Table, cfg Config) (*Result, error) {
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.GOMAXPROCS(0)
	}
	if cfg.MaxEvals <= 0 {
		cfg.MaxEvals = DefaultMaxEvals
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	r, err := newRunner(t, t.Profile, cfg.Seed)
	if err != nil {
		return nil, err
	}
	s := &search{ctx: ctx, r: r, cfg: cfg, table: t}
	return s.run()
}

type search struct {
	ctx   context.Context
	r     *runner
	cfg   Config
	table *Table
	evals int

	params []Param
	// start are the parameters' values in the base: a point x of the
	// search is ln(value/start) per parameter.
	start []float64
}

// errBudget stops a search that measured its MaxEvals profiles.
var errBudget = errors.New("evaluation budget spent")

func (s *search) run() (*Result, error) {
	base := s.cfg.Base
	stalls := false
	for _, c := range s.table.Cells {
		for _, f := range c.Figures {
			stalls = stalls || f.IsRate()
		}
	}
	for _, p := range Params(base, stalls) {
		v := p.get(base)
		if v <= 0 && p.kind != kindTransient {
			continue // a zero latency or cost scales to zero: nothing to search
		}
		if v <= 0 {
			v = 1e-3 // no rate in the base: start at 0.1%
		}
		s.params = append(s.params, p)
		s.start = append(s.start, v)
	}
	if len(s.params) == 0 {
		return nil, &sweep.UsageError{Flag: "--base", Value: base.Name,
			Msg: "the profile has no parameter to search (no latency, capacity, per-event cost or fault rate)"}
	}
	res := &Result{Table: s.table}
	x := make([]float64, len(s.params))
	startVals, err := s.measureAt([][]float64{x})
	if err != nil {
		return nil, err
	}
	pt := &point{x: x, vals: startVals[0], cost: s.cost(x, startVals[0])}
	s.cfg.Log("start: cost %.4f over %d figures, %d parameters", pt.cost, s.figures(), len(s.params))

	active := make([]bool, len(s.params))
	for i := range active {
		active[i] = true
	}
	// Levenberg–Marquardt while its steps help; when none does (noise in
	// the figures, a capacity's whole permits), one round of pattern
	// search — each parameter moved up and down by a factor that shrinks
	// as rounds fail — and back to Levenberg–Marquardt from there.
	lambda := 1e-2
	factors := []float64{1.5, 1.2, 1.1, 1.05}
	fi := 0
	for iter := 1; fi < len(factors); iter++ {
		J, ok, err := s.jacobian(pt.x, pt.vals, active)
		if errors.Is(err, errBudget) {
			break
		}
		if err != nil {
			return nil, err
		}
		if iter == 1 {
			for j := range active {
				active[j] = ok[j]
				if !ok[j] {
					res.Frozen = append(res.Frozen, s.params[j].Name)
				}
			}
		}
		next, l, err := s.lmStep(pt, J, active, lambda)
		if errors.Is(err, errBudget) {
			break
		}
		if err != nil {
			return nil, err
		}
		if next != nil {
			s.cfg.Log("iteration %d: cost %.4f -> %.4f (lambda %.3g, %d profiles measured)", iter, pt.cost, next.cost, l, s.evals)
			pt, lambda = next, max(l/3, 1e-6)
			continue
		}
		for fi < len(factors) {
			next, err = s.pattern(pt, active, factors[fi])
			if errors.Is(err, errBudget) {
				fi = len(factors)
				break
			}
			if err != nil {
				return nil, err
			}
			if next != nil {
				s.cfg.Log("pattern x%.2f: cost %.4f -> %.4f (%d profiles measured)", factors[fi], pt.cost, next.cost, s.evals)
				pt = next
				break
			}
			fi++ // no move of this size helps: smaller moves
		}
	}
	res.Profile = s.profileAt(pt.x)
	res.Fitted = splitFigures(s.r, pt.vals)
	res.Start = splitFigures(s.r, startVals[0])
	q := s.quantized(pt.x)
	for i, p := range s.params {
		res.Params = append(res.Params, ParamValue{Param: p, Start: p.get(base), Fitted: q[i]})
	}
	res.Evals = s.evals
	return res, nil
}

// point is a point of the search with its figures and cost.
type point struct {
	x, vals []float64
	cost    float64
}

// better returns the point of points (measured as vals) with the lowest
// cost, and its index, if it improves on cur by more than 0.01%; else nil.
func (s *search) better(cur *point, points, vals [][]float64) (*point, int) {
	var best *point
	at := -1
	for k := range points {
		c := s.cost(points[k], vals[k])
		if c < cur.cost*(1-1e-4) && (best == nil || c < best.cost) {
			best, at = &point{x: points[k], vals: vals[k], cost: c}, k
		}
	}
	return best, at
}

// lmStep measures the Levenberg–Marquardt steps from pt for damping λ/10,
// λ, 10λ and 100λ at once and returns the best if it improves on pt, with
// its λ.
func (s *search) lmStep(pt *point, J [][]float64, active []bool, lambda float64) (*point, float64, error) {
	var points [][]float64
	var lambdas []float64
	for _, l := range []float64{lambda / 10, lambda, 10 * lambda, 100 * lambda} {
		next := s.step(pt.x, pt.vals, J, active, l)
		q := s.quantized(next)
		if slices.Equal(q, s.quantized(pt.x)) || slices.ContainsFunc(points, func(p []float64) bool { return slices.Equal(s.quantized(p), q) }) {
			continue
		}
		points, lambdas = append(points, next), append(lambdas, l)
	}
	if len(points) == 0 {
		return nil, 0, nil
	}
	vals, err := s.measureAt(points)
	if err != nil {
		return nil, 0, err
	}
	best, at := s.better(pt, points, vals)
	if best == nil {
		return nil, 0, nil
	}
	return best, lambdas[at], nil
}

// pattern measures every active parameter moved up and down by factor f
// (a capacity by at least one permit) and returns the best move if it
// improves on pt.
func (s *search) pattern(pt *point, active []bool, f float64) (*point, error) {
	var points [][]float64
	q := s.quantized(pt.x)
	for j, a := range active {
		if !a {
			continue
		}
		for _, dir := range []float64{1, -1} {
			next := slices.Clone(pt.x)
			next[j] = s.clamp(j, pt.x[j]+dir*math.Log(f))
			if s.params[j].integer() && s.params[j].quantize(s.start[j]*math.Exp(next[j])) == q[j] {
				next[j] = s.clamp(j, math.Log((q[j]+dir)/s.start[j]))
			}
			if !slices.Equal(s.quantized(next), q) {
				points = append(points, next)
			}
		}
	}
	if len(points) == 0 {
		return nil, nil
	}
	vals, err := s.measureAt(points)
	if err != nil {
		return nil, err
	}
	best, _ := s.better(pt, points, vals)
	return best, nil
}

// figures is the number of figures of the table.
func (s *search) figures() int {
	n := 0
	for _, c := range s.table.Cells {
		n += len(c.Figures)
	}
	return n
}

// prior weighs the pull of each parameter toward its value in the base:
// prior·ln(value/base)² is added to the cost, so parameters the table
// cannot tell apart (two latencies on one path) stay in the base's
// proportions instead of drifting apart. It is small next to a figure's
// error: a parameter moved 1.5× costs what a 2% error on one figure does.
const prior = 0.0025

// residuals are the figures' relative errors, flattened in table order and
// weighted (see Figure.Weight), then the prior's terms of the parameters
// at log point x.
func (s *search) residuals(x, vals []float64) []float64 {
	out := make([]float64, 0, len(vals)+len(x))
	k := 0
	for _, c := range s.table.Cells {
		for _, f := range c.Figures {
			out = append(out, f.weight()*Residual(f, vals[k]))
			k++
		}
	}
	for _, xj := range x {
		out = append(out, math.Sqrt(prior)*xj)
	}
	return out
}

// Residual is the error a fit minimises for figure f measured as v:
// ln(v/observed) for a duration, (v − observed)/max(observed, 1%) for a
// rate.
func Residual(f Figure, v float64) float64 {
	if f.IsRate() {
		return (v - f.Value) / max(f.Value, 0.01)
	}
	return math.Log(max(v, 1e3) / f.Value) // below 1 µs is "not measured"
}

func (s *search) cost(x, vals []float64) float64 {
	var c float64
	for _, r := range s.residuals(x, vals) {
		c += r * r
	}
	return c
}

// quantized returns the parameters' values at log point x, rounded.
func (s *search) quantized(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, p := range s.params {
		v := s.start[i] * math.Exp(x[i])
		if p.kind == kindTransient {
			v = min(max(v, minTransient), maxTransient)
		}
		out[i] = p.quantize(v)
	}
	return out
}

// profileAt is the base with the parameters at x, written and read back so
// that it is exactly what its file says.
func (s *search) profileAt(x []float64) *profile.Profile {
	p := s.cfg.Base.Clone()
	p.Name, p.Description, p.Overrides = s.table.Profile, s.table.Description, nil
	if p.Description == "" {
		p.Description = s.cfg.Base.Description
	}
	for i, v := range s.quantized(x) {
		s.params[i].set(p, v)
	}
	q, err := profile.Parse(p.Name+".yaml", profile.Format(p, ""))
	if err != nil {
		panic(fmt.Sprintf("calibrate: a formatted profile does not read back: %v", err)) // a bug in Format
	}
	q.Source = "calibrate"
	return q
}

// step is the Levenberg–Marquardt step from x: (JᵀJ + λ·diag(JᵀJ)) δ = −Jᵀr
// over the active parameters, clamped to the search's bounds.
func (s *search) step(x, vals []float64, J [][]float64, active []bool, lambda float64) []float64 {
	r := s.residuals(x, vals)
	var idx []int
	for j, a := range active {
		if a {
			idx = append(idx, j)
		}
	}
	n := len(idx)
	A := make([][]float64, n)
	g := make([]float64, n)
	for a, ja := range idx {
		A[a] = make([]float64, n)
		for b, jb := range idx {
			for i := range r {
				A[a][b] += J[i][ja] * J[i][jb]
			}
		}
		for i := range r {
			g[a] -= J[i][ja] * r[i]
		}
	}
	for a := range n {
		A[a][a] += lambda * max(A[a][a], 1e-9)
	}
	d := solve(A, g)
	next := slices.Clone(x)
	for a, j := range idx {
		step := max(min(d[a], 2), -2) // at most a factor e² per step
		next[j] = s.clamp(j, x[j]+step)
	}
	return next
}

func (s *search) clamp(j int, x float64) float64 {
	lo, hi := -math.Log(spread), math.Log(spread)
	if s.params[j].kind == kindTransient {
		lo, hi = math.Log(minTransient/s.start[j]), math.Log(maxTransient/s.start[j])
	}
	if s.params[j].integer() {
		lo = math.Log(1 / s.start[j])
	}
	return min(max(x, lo), hi)
}

// jacobian measures the figures with each active parameter moved by about
// 20% (a capacity by at least one permit) and returns the derivatives of
// the residuals by log parameter; ok[j] is false for a parameter no figure
// depends on.
func (s *search) jacobian(x, vals []float64, active []bool) ([][]float64, []bool, error) {
	var points [][]float64
	var cols []int
	var hs []float64
	q := s.quantized(x)
	for j, a := range active {
		if !a {
			continue
		}
		h := math.Log(1.2)
		next := slices.Clone(x)
		next[j] = x[j] + h
		if s.clamp(j, next[j]) < next[j] || s.params[j].quantize(s.start[j]*math.Exp(next[j])) == q[j] {
			h = -h // at the upper bound: step down
			next[j] = x[j] + h
		}
		if s.params[j].integer() && s.params[j].quantize(s.start[j]*math.Exp(next[j])) == q[j] {
			next[j] = math.Log((q[j] + math.Copysign(1, h)) / s.start[j])
		}
		nq := s.params[j].quantize(s.start[j] * math.Exp(next[j]))
		if nq <= 0 || q[j] <= 0 {
			h = next[j] - x[j]
		} else {
			h = math.Log(nq / q[j]) // the move as measured
		}
		points, cols, hs = append(points, next), append(cols, j), append(hs, h)
	}
	if len(points) == 0 {
		return nil, nil, errBudget
	}
	measured, err := s.measureAt(points)
	if err != nil {
		return nil, nil, err
	}
	r0 := s.residuals(x, vals)
	J := make([][]float64, len(r0))
	for i := range J {
		J[i] = make([]float64, len(s.params))
	}
	ok := make([]bool, len(s.params))
	nf := len(r0) - len(x) // the figures' rows; the prior's follow
	for j := range x {
		J[nf+j][j] = math.Sqrt(prior)
	}
	for k, j := range cols {
		r1 := s.residuals(x, measured[k])
		for i := range nf {
			if r1[i] != r0[i] {
				ok[j] = true
			}
			if hs[k] != 0 {
				J[i][j] = (r1[i] - r0[i]) / hs[k]
			}
		}
	}
	return J, ok, nil
}

// measureAt measures the table under the profiles at points, cells of all
// of them at once on cfg.Parallel workers. It returns each point's figure
// values flattened in table order.
func (s *search) measureAt(points [][]float64) ([][]float64, error) {
	if s.evals+len(points) > s.cfg.MaxEvals && s.evals > 0 {
		return nil, errBudget
	}
	s.evals += len(points)
	profiles := make([]*profile.Profile, len(points))
	for i, x := range points {
		profiles[i] = s.profileAt(x)
	}
	return measureAll(s.ctx, s.r, profiles, s.cfg.Parallel)
}

// measureAll measures every cell of r's table under each profile, on
// parallel workers, and returns each profile's figures flattened in table
// order.
func measureAll(ctx context.Context, r *runner, profiles []*profile.Profile, parallel int) ([][]float64, error) {
	type job struct{ p, c int }
	out := make([][][]float64, len(profiles))
	for i := range out {
		out[i] = make([][]float64, len(r.cells))
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range max(parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				v, err := r.measure(ctx, j.c, profiles[j.p])
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				out[j.p][j.c] = v
				mu.Unlock()
			}
		}()
	}
	// The costliest cells first, so the workers finish together.
	order := make([]int, len(r.cells))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return r.cells[b].cost() - r.cells[a].cost() })
	for p := range profiles {
		for _, c := range order {
			jobs <- job{p, c}
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	flat := make([][]float64, len(profiles))
	for p := range profiles {
		for _, v := range out[p] {
			flat[p] = append(flat[p], v...)
		}
	}
	return flat, nil
}

// splitFigures splits flattened figure values back into cells.
func splitFigures(r *runner, flat []float64) [][]float64 {
	out := make([][]float64, len(r.cells))
	k := 0
	for i, c := range r.cells {
		out[i] = flat[k : k+len(c.obs.Figures)]
		k += len(c.obs.Figures)
	}
	return out
}

// solve solves A·x = b by Gaussian elimination with partial pivoting (A is
// small and symmetric positive definite after damping).
func solve(A [][]float64, b []float64) []float64 {
	n := len(b)
	m := make([][]float64, n)
	for i := range A {
		m[i] = append(slices.Clone(A[i]), b[i])
	}
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		m[c], m[p] = m[p], m[c]
		if math.Abs(m[c][c]) < 1e-15 {
			continue
		}
		for r := c + 1; r < n; r++ {
			f := m[r][c] / m[c][c]
			for k := c; k <= n; k++ {
				m[r][k] -= f * m[c][k]
			}
		}
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		if math.Abs(m[i][i]) < 1e-15 {
			continue
		}
		s := m[i][n]
		for k := i + 1; k < n; k++ {
			s -= m[i][k] * x[k]
		}
		x[i] = s / m[i][i]
	}
	return x
}
