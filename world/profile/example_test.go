package profile_test

import (
	"context"
	"fmt"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/profile"
)

// A named profile with a fault override, applied to the mem world.
func ExampleWrap() {
	p, err := profile.Load("cloud")
	if err != nil {
		panic(err)
	}
	p, err = profile.ApplyOverrides(p, "step_created.transient=100%")
	if err != nil {
		panic(err)
	}
	m := mem.New(world.Options{})
	defer m.Close()
	w := profile.Wrap(m, p, 1)

	ctx := context.Background()
	fmt.Println(w.Name(), p.Label())
	fmt.Println(w.CreateRun(ctx, world.Run{ID: "r"}))
	_, err = w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.Precondition{})
	fmt.Println(err, world.IsTransient(err))
	// Output:
	// mem cloud[step_created.transient=100%]
	// <nil>
	// step_created: transient failure (injected by profile cloud) true
}

func ExampleParse() {
	_, err := profile.Parse("my-backend.yaml", []byte(`name: my-backend
ops:
  default: {latency: {dist: lognormal, median: 20ms, p99: 80ms}}
  step_created: {latency: {dist: fixed, value: 25ms}, transient: 120%}
  log_lod: {latency: 20ms, per_event: 50us}
`))
	fmt.Println(err)
	// Output:
	// my-backend.yaml:4: ops.step_created.transient: 120% is not in 0–100%
	// my-backend.yaml:5: ops.log_lod: unknown op (did you mean "log_load"?)
}
