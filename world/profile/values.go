package profile

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// parseDuration reads a non-negative Go duration ("25ms", "1.5s", "50us").
// A bare number other than 0 is refused: "25" could mean 25 ms or 25 s.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return 0, fmt.Errorf("%q needs a unit (ns, us, ms, s), e.g. %sms", s, s)
		}
		return 0, fmt.Errorf("%q is not a duration (e.g. 25ms, 500us, 1.5s)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s is negative", s)
	}
	return d, nil
}

// parsePercent reads "2%" or "0.5%" as a probability (0.02, 0.005). The %
// sign is required: a bare 0.02 could mean 2% or 0.02%.
func parsePercent(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q needs a %% sign, e.g. 2%%", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage (e.g. 2%%, 0.5%%)", s)
	}
	if v < 0 || v > 100 {
		return 0, fmt.Errorf("%s is not in 0–100%%", s)
	}
	return v / 100, nil
}

// parseCapacity reads a positive whole number of permits.
// parseConcurrency reads deliver's concurrency: a whole number of at least 1.
func parseConcurrency(s string) (int, error) {
	n, err := parseCapacity(s)
	if err != nil && strings.Contains(err.Error(), "leave capacity out") {
		return 0, fmt.Errorf("%s must be at least 1 (leave concurrency out for the consumer's own)", strings.TrimSpace(s))
	}
	return n, err
}

func parseCapacity(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	if n < 1 {
		return 0, fmt.Errorf("%d must be at least 1 (leave capacity out for no limit)", n)
	}
	return n, nil
}

// fmtPercent prints a probability as a percentage ("2%", "0.5%").
func fmtPercent(p float64) string {
	return strconv.FormatFloat(p*100, 'g', 4, 64) + "%"
}

// resolve makes a relative path relative to dir (a profile file's folder).
func resolve(dir, path string) string {
	path = strings.TrimSpace(path)
	if dir == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}
