package scenarios

import (
	"errors"
	"testing"
)

func TestBuild(t *testing.T) {
	cases := []struct {
		scenario string
		opts     Values
		steps    int
		err      error
	}{
		{"fanout", nil, 20, nil},
		{"fanout", Values{"branches": "256"}, 256, nil},
		{"fanout", Values{"branches": "0"}, 0, ErrInvalid},
		{"fanout", Values{"branches": "x"}, 0, ErrInvalid},
		{"fanout", Values{"steps": "3"}, 0, ErrUnknown},
		{"sequential", nil, 50, nil},
		{"sequential", Values{"steps": "1020", "body": "1ms"}, 1020, nil},
		{"sequential", Values{"body": "-1s"}, 0, ErrInvalid},
	}
	for _, c := range cases {
		s, err := Get(c.scenario)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := s.Build(c.opts)
		if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s %v: err %v, want %v", c.scenario, c.opts, err, c.err)
			continue
		}
		if err == nil && p.StepCount() != c.steps {
			t.Errorf("%s %v: %d steps, want %d", c.scenario, c.opts, p.StepCount(), c.steps)
		}
	}
	if _, err := Get("nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Get(nope) = %v", err)
	}
}

func TestCanonical(t *testing.T) {
	s, _ := Get("fanout")
	v := Values{"branches": "020", "body": "1000ms"}
	if err := s.Validate(v); err != nil {
		t.Fatal(err)
	}
	if v["branches"] != "20" || v["body"] != "1s" {
		t.Errorf("canonical values %v", v)
	}
}
