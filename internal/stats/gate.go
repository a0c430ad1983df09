package stats

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// ErrRules marks a gate configuration error: a rule that does not parse, a
// rule that matches no cell, or a relative rule without a baseline. It
// matches results.ErrInvalid too, so the CLI exits 2 on it.
var ErrRules error = &inputError{"invalid gate rules"}

// inputError is a sentinel for input that is unusable although no results
// file is malformed; like a bad file, it is a usage or input error (exit 2),
// so it matches results.ErrInvalid.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

// Is makes errors.Is(err, results.ErrInvalid) hold.
func (e *inputError) Is(target error) bool { return target == results.ErrInvalid }

// Rule is one gate rule, e.g.
//
//	ttls{scenario=fanout,branches=256}.p90 < 1.10x baseline
//	ttfs.p75 < 200ms
//	critical_path.queue_wait{branches=256}.p50 < 1.10x baseline
//	stalls == 0
//
// A rule checks either a metric statistic (Metric and Stat set) or a cell
// count (Count set) of every cell its Selector matches.
type Rule struct {
	// Text is the rule as written, without its comment.
	Text string
	// Source is where the rule was written, "rules.txt:3".
	Source string
	// Metric is the metric name (ttfs, ttls, stso_inline, ...); empty for a
	// count rule.
	Metric string
	// Stat is min, p50, p75, p90, p99, max or mean (metric rules).
	Stat string
	// Count is stalls, errors or runs (count rules).
	Count string
	// Selector filters cells by key field; every match must hold.
	Selector []Match
	// Op is <, <=, >, >=, == or !=.
	Op string
	// Threshold is microseconds for an absolute metric rule, a number for a
	// count rule, and the ratio head/baseline for a relative rule.
	Threshold float64
	// Relative rules compare head against the baseline ("1.10x baseline").
	Relative bool
	// AllowEmpty makes a rule that matches no cell a no-op instead of a
	// configuration error; DefaultRules set it because not every scenario
	// has every metric.
	AllowEmpty bool
}

// Match is one selector term: the cell key field must equal one of Values.
type Match struct {
	Field  string
	Values []string
}

// Selector fields, stats, counts, units and operators of the rule language.
var (
	selectorFields = []string{"scenario", "branches", "steps", "target", "version", "switches", "world", "profile"}
	ruleStats      = []string{"min", "p50", "p75", "p90", "p99", "max", "mean"}
	ruleCounts     = []string{"stalls", "errors", "runs"}
	// ruleUnits maps a unit to its size in microseconds.
	ruleUnits = map[string]float64{"ns": 1e-3, "us": 1, "µs": 1, "μs": 1, "ms": 1e3, "s": 1e6}
)

const unitList = "ns, us, µs, ms, s, or x baseline"

// DefaultRulesText is the rule set used when no rules are given: the p50 and
// p90 of TTLS and TTFS may not grow by 10% or more (and significantly) in
// any cell, and no cell may stall or fail a run.
const DefaultRulesText = `# durabench default gate rules
ttls.p50 < 1.10x baseline
ttls.p90 < 1.10x baseline
ttfs.p50 < 1.10x baseline
ttfs.p90 < 1.10x baseline
stalls == 0
errors == 0
`

// DefaultRules returns the rules of DefaultRulesText. Their metric rules
// allow matching no cell, since sequential scenarios have no TTLS.
func DefaultRules() []Rule {
	rules, err := ParseRules("default rules", strings.NewReader(DefaultRulesText))
	if err != nil {
		panic(err) // DefaultRulesText is a constant; a test parses it
	}
	for i := range rules {
		if rules[i].Metric != "" {
			rules[i].AllowEmpty = true
		}
	}
	return rules
}

// RuleError is a rule that does not parse, with its position (1-based line
// and rune column). It matches ErrRules with errors.Is.
type RuleError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Unwrap makes errors.Is(err, ErrRules) hold.
func (e *RuleError) Unwrap() error { return ErrRules }

// ParseRules parses one rule per line from r; blank lines and text after '#'
// are ignored. A rule is
//
//	METRIC[{SELECTOR}].STAT OP NUMBER UNIT          absolute: ttfs.p75 < 200ms
//	METRIC[{SELECTOR}].STAT OP NUMBER x baseline    relative: ttls.p90 < 1.10x baseline
//	COUNT[{SELECTOR}] OP NUMBER                     count:    stalls == 0
//
// where METRIC is a metric key (ttfs, ttls, skew, stso_inline, ...) or a
// critical-path category (critical_path.queue_wait: metrics.Categories), STAT is
// min, p50, p75, p90, p99, max or mean, COUNT is stalls, errors or runs, OP
// is <, <=, >, >=, == or !=, and UNIT is ns, us, µs, ms or s. SELECTOR is a
// comma-separated list of FIELD=VALUE over scenario, branches, steps,
// version, switches, world and profile; VALUE may list alternatives with
// '|' (branches=64|256) and may be quoted ("guard=on,resilient-step-dispatch=0"). name labels errors and Rule.Source ("rules.txt"). Every
// malformed line is reported, joined into one error matching ErrRules; a
// source with no rules is an error too.
func ParseRules(name string, r io.Reader) ([]Rule, error) {
	var rules []Rule
	var errs []error
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		rule, ok, err := parseRuleLine(name, n, sc.Text())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			rules = append(rules, rule)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrRules, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s: %w: no rules", name, ErrRules)
	}
	return rules, nil
}

// ParseRule parses a single rule given inline (the CLI's --rule); errors
// are labelled "--rule:1:col".
func ParseRule(text string) (Rule, error) {
	rule, ok, err := parseRuleLine("--rule", 1, text)
	if err != nil {
		return Rule{}, err
	}
	if !ok {
		return Rule{}, &RuleError{File: "--rule", Line: 1, Col: 1, Msg: "empty rule"}
	}
	return rule, nil
}

// ruleParser reads one line. pos indexes runes; columns are pos+1.
type ruleParser struct {
	file string
	line int
	src  []rune
	pos  int
}

func (p *ruleParser) errAt(pos int, format string, args ...any) error {
	return &RuleError{File: p.file, Line: p.line, Col: pos + 1, Msg: fmt.Sprintf(format, args...)}
}

func (p *ruleParser) skipSpace() {
	for p.pos < len(p.src) && unicode.IsSpace(p.src[p.pos]) {
		p.pos++
	}
}

func (p *ruleParser) eol() bool { return p.pos >= len(p.src) }

func (p *ruleParser) peek() rune {
	if p.eol() {
		return 0
	}
	return p.src[p.pos]
}

// word reads [A-Za-z_][A-Za-z0-9_-]*.
func (p *ruleParser) word() string {
	start := p.pos
	for p.pos < len(p.src) {
		r := p.src[p.pos]
		if r == '_' || unicode.IsLetter(r) || (p.pos > start && (unicode.IsDigit(r) || r == '-')) {
			p.pos++
			continue
		}
		break
	}
	return string(p.src[start:p.pos])
}

func parseRuleLine(file string, line int, text string) (Rule, bool, error) {
	src := []rune(text)
	if i := indexRune(src, '#'); i >= 0 {
		src = src[:i]
	}
	if strings.TrimSpace(string(src)) == "" {
		return Rule{}, false, nil
	}
	p := &ruleParser{file: file, line: line, src: src}
	rule, err := p.rule()
	if err != nil {
		return Rule{}, false, err
	}
	rule.Text = strings.TrimSpace(string(src))
	rule.Source = fmt.Sprintf("%s:%d", file, line)
	return rule, true, nil
}

func indexRune(rs []rune, r rune) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

func (p *ruleParser) rule() (Rule, error) {
	var r Rule
	p.skipSpace()
	start := p.pos
	name := p.word()
	if name == "" {
		return r, p.errAt(start, "expected a metric (e.g. ttls) or a count (%s)", strings.Join(ruleCounts, ", "))
	}
	isCount := contains(ruleCounts, name)
	if isCount {
		r.Count = name
	} else {
		r.Metric = name
	}
	if name == pathAll || name == completionAll {
		cat, err := p.pathCategory(start, name)
		if err != nil {
			return r, err
		}
		r.Metric = name + "." + cat // the path's metric prefix
	}
	if p.peek() == '{' {
		sel, err := p.selector()
		if err != nil {
			return r, err
		}
		r.Selector = sel
	}
	if p.peek() == '.' {
		dot := p.pos
		p.pos++
		if isCount {
			return r, p.errAt(dot, "%s is a count and takes no statistic", name)
		}
		ss := p.pos
		stat := p.word()
		if stat == "" {
			return r, p.errAt(ss, "expected a statistic after '.' (%s)", strings.Join(ruleStats, ", "))
		}
		if !contains(ruleStats, stat) && stat != FastShareStat {
			return r, p.errAt(ss, "unknown statistic %q (want %s, or %s of a bimodal metric)", stat, strings.Join(ruleStats, ", "), FastShareStat)
		}
		if stat == FastShareStat && !metrics.Bimodal(name) {
			return r, p.errAt(ss, "%s is the fast-mode share of a bimodal metric (metrics/defs.go: %s); %s is not one", FastShareStat, metrics.TTFS, name)
		}
		r.Stat = stat
	} else if !isCount {
		if p.eol() || unicode.IsSpace(p.peek()) || strings.ContainsRune("<>=!", p.peek()) {
			return r, p.errAt(p.pos, "%s needs a statistic, e.g. %s.p90", r.Metric, r.Metric)
		}
		return r, p.errAt(p.pos, "unexpected %q after metric name", p.peek())
	}
	p.skipSpace()
	opPos := p.pos
	r.Op = p.op()
	if r.Op == "" {
		return r, p.errAt(opPos, "expected a comparison operator (<, <=, >, >=, ==, !=)")
	}
	p.skipSpace()
	if r.Stat == FastShareStat {
		return r, p.shareThreshold(&r)
	}
	numPos := p.pos
	num, ok := p.number()
	if !ok {
		if p.peek() == '-' {
			return r, p.errAt(numPos, "thresholds are not negative")
		}
		return r, p.errAt(numPos, "expected a number")
	}
	p.skipSpace()
	unitPos := p.pos
	unit := p.unit()
	switch {
	case unit == "" && isCount:
		r.Threshold = num
	case unit == "":
		if p.eol() {
			return r, p.errAt(unitPos, "expected unit after number (%s)", unitList)
		}
		return r, p.errAt(unitPos, "unknown unit %q (want %s)", p.restWord(), unitList)
	case unit == "x":
		if isCount {
			return r, p.errAt(numPos, "relative thresholds apply to metrics; compare %s with a number", name)
		}
		p.skipSpace()
		bp := p.pos
		if w := p.word(); w != "baseline" {
			return r, p.errAt(bp, "expected 'baseline' after '%gx'", num)
		}
		if num == 0 {
			return r, p.errAt(numPos, "a relative threshold must be above 0x baseline")
		}
		r.Relative, r.Threshold = true, num
	default:
		if isCount {
			return r, p.errAt(unitPos, "%s is a count; compare it with a plain number, not %s", name, unit)
		}
		r.Threshold = num * ruleUnits[unit]
	}
	p.skipSpace()
	if !p.eol() {
		return r, p.errAt(p.pos, "unexpected %q after the rule", string(p.src[p.pos:]))
	}
	return r, nil
}

// pathCategory reads ".CATEGORY" after critical_path or critical_path_ttc
// (name, at start).
func (p *ruleParser) pathCategory(start int, name string) (string, error) {
	if p.peek() != '.' {
		return "", p.errAt(start, "%s needs a category, e.g. %s.%s.p50 (%s)", name, name, metrics.CatQueueWait, categoryList())
	}
	p.pos++
	cs := p.pos
	cat := p.word()
	if cat == "" {
		return "", p.errAt(cs, "expected a category after '%s.' (%s)", name, categoryList())
	}
	if _, ok := metrics.CategoryIndex(cat); !ok {
		return "", p.errAt(cs, "unknown critical-path category %q (want %s)", cat, categoryList())
	}
	return cat, nil
}

func categoryList() string {
	names := make([]string, len(metrics.Categories))
	for i, c := range metrics.Categories {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// FastShareStat is the rule statistic of a bimodal metric's fast-mode
// share: the percentage of a cell's runs under FastFactor × the fastest run
// (of the head and, when there is one, the baseline).
const FastShareStat = "fast_share"

// shareThreshold reads the threshold of a fast_share rule: "N%" (absolute)
// or "baseline", "baseline - N pp", "baseline + N pp" (relative: the
// baseline's share moved by N percentage points).
func (p *ruleParser) shareThreshold(r *Rule) error {
	at := p.pos
	if w := p.word(); w == "baseline" {
		r.Relative = true
		p.skipSpace()
		if !p.eol() {
			sign := p.peek()
			if sign != '-' && sign != '+' {
				return p.errAt(p.pos, "expected '- N pp' or '+ N pp' after baseline")
			}
			p.pos++
			p.skipSpace()
			np := p.pos
			num, ok := p.number()
			if !ok {
				return p.errAt(np, "expected a number of percentage points")
			}
			p.skipSpace()
			if up := p.pos; p.word() != "pp" {
				return p.errAt(up, "expected pp (percentage points) after %g", num)
			}
			r.Threshold = num
			if sign == '-' {
				r.Threshold = -num
			}
		}
	} else {
		p.pos = at
		num, ok := p.number()
		if !ok || p.peek() != '%' {
			return p.errAt(at, "%s is a percentage: expected N%% or baseline [- N pp]", FastShareStat)
		}
		p.pos++
		if num > 100 {
			return p.errAt(at, "a share is at most 100%%")
		}
		r.Threshold = num
	}
	p.skipSpace()
	if !p.eol() {
		return p.errAt(p.pos, "unexpected %q after the rule", string(p.src[p.pos:]))
	}
	return nil
}

// restWord returns the letters at the cursor, for error messages.
func (p *ruleParser) restWord() string {
	end := p.pos
	for end < len(p.src) && !unicode.IsSpace(p.src[end]) {
		end++
	}
	return string(p.src[p.pos:end])
}

func (p *ruleParser) selector() ([]Match, error) {
	open := p.pos
	p.pos++ // '{'
	var sel []Match
	seen := map[string]bool{}
	for {
		p.skipSpace()
		if p.eol() {
			return nil, p.errAt(open, "unterminated selector: missing '}'")
		}
		if p.peek() == '}' && len(sel) == 0 {
			return nil, p.errAt(p.pos, "empty selector")
		}
		fp := p.pos
		field := p.word()
		if field == "" {
			return nil, p.errAt(fp, "expected a selector field (%s)", strings.Join(selectorFields, ", "))
		}
		if !contains(selectorFields, field) {
			return nil, p.errAt(fp, "unknown selector field %q (want %s)", field, strings.Join(selectorFields, ", "))
		}
		if seen[field] {
			return nil, p.errAt(fp, "selector field %q given twice", field)
		}
		seen[field] = true
		p.skipSpace()
		if p.peek() != '=' {
			return nil, p.errAt(p.pos, "expected '=' after %s", field)
		}
		p.pos++
		p.skipSpace()
		vp := p.pos
		val, err := p.selectorValue()
		if err != nil {
			return nil, err
		}
		if val == "" {
			return nil, p.errAt(vp, "expected a value for %s", field)
		}
		m := Match{Field: field}
		for _, v := range strings.Split(val, "|") {
			v = strings.TrimSpace(v)
			if v == "" {
				return nil, p.errAt(vp, "empty alternative in %s=%s", field, val)
			}
			if field == "branches" || field == "steps" {
				if n, err := strconv.Atoi(v); err != nil || n < 0 {
					return nil, p.errAt(vp, "%s must be a whole number, not %q", field, v)
				}
			}
			if field == "switches" {
				v = switchesString([]string{v})
			}
			m.Values = append(m.Values, v)
		}
		sel = append(sel, m)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return sel, nil
		case 0:
			return nil, p.errAt(open, "unterminated selector: missing '}'")
		default:
			if indexRune(p.src[p.pos:], '}') < 0 {
				return nil, p.errAt(open, "unterminated selector: missing '}'")
			}
			return nil, p.errAt(p.pos, "expected ',' or '}' in selector")
		}
	}
}

// selectorValue reads a quoted string or a run of value runes.
func (p *ruleParser) selectorValue() (string, error) {
	if p.peek() == '"' {
		q := p.pos
		p.pos++
		start := p.pos
		for !p.eol() && p.peek() != '"' {
			p.pos++
		}
		if p.eol() {
			return "", p.errAt(q, "unterminated quoted value")
		}
		v := string(p.src[start:p.pos])
		p.pos++
		return v, nil
	}
	start := p.pos
	for !p.eol() && isValueRune(p.peek()) {
		p.pos++
	}
	return string(p.src[start:p.pos]), nil
}

// isValueRune reports whether r may appear in an unquoted selector value.
func isValueRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_.=+|:/@", r)
}

func (p *ruleParser) op() string {
	for _, op := range []string{"<=", ">=", "==", "!=", "<", ">"} {
		if p.pos+len(op) <= len(p.src) && string(p.src[p.pos:p.pos+len(op)]) == op {
			p.pos += len(op)
			return op
		}
	}
	return ""
}

// number reads a non-negative decimal: digits with an optional fraction.
func (p *ruleParser) number() (float64, bool) {
	start := p.pos
	for !p.eol() && (unicode.IsDigit(p.peek()) || p.peek() == '.') {
		p.pos++
	}
	if p.pos == start {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(p.src[start:p.pos]), 64)
	if err != nil {
		p.pos = start
		return 0, false
	}
	return v, true
}

// unit reads a known unit or "x"; it leaves the cursor in place otherwise.
func (p *ruleParser) unit() string {
	start := p.pos
	w := p.word()
	if w == "" && (p.peek() == 'µ' || p.peek() == 'μ') {
		p.pos++
		w = string(p.src[start:p.pos]) + p.word()
	}
	if _, ok := ruleUnits[w]; ok || w == "x" {
		return w
	}
	p.pos = start
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// matches reports whether the selector admits the cell key.
func (r Rule) matches(k CellKey) bool {
	for _, m := range r.Selector {
		v, _ := k.Get(m.Field)
		if !contains(m.Values, v) {
			return false
		}
	}
	return true
}

// holds evaluates "x op y".
func holds(x float64, op string, y float64) bool {
	switch op {
	case "<":
		return x < y
	case "<=":
		return x <= y
	case ">":
		return x > y
	case ">=":
		return x >= y
	case "==":
		return x == y
	case "!=":
		return x != y
	}
	return false
}
