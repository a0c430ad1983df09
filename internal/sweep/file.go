package sweep

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/durabench/durabench/engine"
)

// kind is the YAML type a setting expects; a value of another type is an
// error naming the field, not a silent conversion.
type kind int

const (
	kString kind = iota
	kInt
	kFloat
	kBool
	kDuration
	// kBoolOrWord is true, false or a word (interleave: abba); its flag
	// alone means true (--interleave).
	kBoolOrWord
)

var fieldKinds = map[string]kind{
	"branches": kInt, "reps": kInt, "warmup": kInt, "concurrency": kInt, "rate": kFloat,
	"seed": kInt, "nats-replicas": kInt, "guard": kBool, "keep": kBool,
	"cell-timeout": kDuration, "stall-threshold": kDuration, "grace": kDuration, "visibility-timeout": kDuration,
}

// fileKeys maps a sweep-file key to its field (flag) name. Nested keys are
// written with a dot: a world's settings ("nats.url"; see worldFlags).
var fileKeys = map[string]string{
	"scenarios": "scenario", "worlds": "world", "profiles": "profile",
}

// Special keys the file decodes itself.
const (
	keyOptions    = "options"
	keyCustom     = "custom_versions"
	keyObjectives = "objectives"
)

func fieldForKey(key string) (string, bool) {
	if f, ok := fileKeys[key]; ok {
		return f, true
	}
	name := strings.ReplaceAll(key, "_", "-")
	_, world := worldFlags[name]
	if _, ok := lookupField(name); !ok || world || name == "scenario" || name == "world" || name == "profile" {
		return "", false
	}
	return name, true
}

// fileKeyNames lists every top-level key the file accepts.
func fileKeyNames() []string {
	keys := append([]string{keyOptions, keyCustom, keyObjectives}, worldNames()...)
	for _, f := range fields {
		if _, world := worldFlags[f.name]; world {
			continue // under its world's key
		}
		k := strings.ReplaceAll(f.name, "-", "_")
		switch f.name {
		case "scenario", "world", "profile":
			k += "s"
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// fileError is one mistake in a sweep file: where and which field.
func fileError(file string, n *yaml.Node, field, format string, args ...any) error {
	return &UsageError{File: file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// LoadFile reads a sweep file onto p (settings not in the file keep their
// values). Decoding is strict: an unknown key, a value of the wrong type or
// an impossible value is one error naming the file, the line and the field.
func (p *Plan) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &UsageError{Flag: "-f", Err: err}
	}
	return p.parseFile(path, data)
}

func (p *Plan) parseFile(file string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return &UsageError{File: file, Err: err}
	}
	if len(doc.Content) == 0 {
		return &UsageError{File: file, Msg: "the file is empty"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fileError(file, root, "(top level)", "want a mapping of settings (reps: 10, versions: [...])")
	}
	// Custom versions first: the versions list may name them.
	if err := p.eachKey(file, root, "", func(key string, k, v *yaml.Node) error {
		if key == keyCustom {
			return p.decodeCustom(file, v)
		}
		return nil
	}); err != nil {
		return err
	}
	return p.eachKey(file, root, "", func(key string, k, v *yaml.Node) error {
		switch key {
		case keyCustom:
			return nil
		case keyOptions:
			if p.Options == nil {
				p.Options = map[string][]string{}
			}
			at := map[string]UsageError{}
			if err := decodeOptions(file, key, v, p.Options, at); err != nil {
				return err
			}
			for name, o := range at {
				p.setOrigin("option "+name, o)
			}
			return nil
		case keyObjectives:
			return p.decodeObjectives(file, keyObjectives, v)
		case "targets":
			if v.Kind == yaml.MappingNode {
				// The latency objectives' old name: a mapping cannot be a
				// list of engines.
				return p.decodeObjectives(file, "targets", v)
			}
			if v.Kind == yaml.SequenceNode && slices.ContainsFunc(v.Content, func(n *yaml.Node) bool { return n.Kind == yaml.MappingNode }) {
				specs, err := expandTargets(file, v)
				if err != nil {
					return err
				}
				if err := setTargets(p, specs); err != nil {
					return fileError(file, v, "targets", "%v", err)
				}
				return nil
			}
		case "scenarios":
			return p.decodeScenarios(file, v)
		}
		if slices.Contains(worldNames(), key) {
			if v.Kind != yaml.MappingNode {
				return fileError(file, v, key, "want a mapping")
			}
			return p.eachKey(file, v, key+".", func(sub string, sk, sv *yaml.Node) error {
				return p.setFromNode(file, key+"."+sub, sv)
			})
		}
		return p.setFromNode(file, key, v)
	})
}

// eachKey calls fn for every key of mapping m, rejecting unknown and
// duplicate keys. prefix qualifies nested keys ("nats.").
func (p *Plan) eachKey(file string, m *yaml.Node, prefix string, fn func(key string, k, v *yaml.Node) error) error {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		full := prefix + key
		known := false
		if prefix == "" {
			known = slices.Contains(fileKeyNames(), key)
		} else {
			_, known = fileKeys[full]
		}
		if !known {
			return fileError(file, k, full, "unknown field (known: %s)", strings.Join(p.knownKeys(prefix), ", "))
		}
		if seen[key] {
			return fileError(file, k, full, "given twice")
		}
		seen[key] = true
		if err := fn(key, k, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *Plan) knownKeys(prefix string) []string {
	if prefix == "" {
		return fileKeyNames()
	}
	var out []string
	for k := range fileKeys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, strings.TrimPrefix(k, prefix))
		}
	}
	slices.Sort(out)
	return out
}

// setFromNode sets the field of file key key from node v.
func (p *Plan) setFromNode(file, key string, v *yaml.Node) error {
	name, ok := fieldForKey(key)
	if !ok {
		return fileError(file, v, key, "unknown field")
	}
	f, _ := lookupField(name)
	vals, err := scalars(v, f.list, fieldKinds[name])
	if err != nil {
		if worldFlags[name].Secret {
			// The message would quote the value: a password or token.
			return fileError(file, v, key, "want a single string (quote it)")
		}
		return fileError(file, v, key, "%s", err)
	}
	if err := p.set(name, vals, UsageError{File: file, Line: v.Line, Field: key}); err != nil {
		return fileError(file, v, key, "%s", err)
	}
	return nil
}

// scalars returns the values of a scalar or (when list) a sequence of
// scalars, checking each against k.
func scalars(v *yaml.Node, list bool, k kind) ([]string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if err := checkKind(v, k); err != nil {
			return nil, err
		}
		return []string{v.Value}, nil
	case yaml.SequenceNode:
		if !list {
			return nil, fmt.Errorf("want a single value, got a list")
		}
		if len(v.Content) == 0 {
			return nil, fmt.Errorf("the list is empty")
		}
		out := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: want a value, got a %s", item.Line, nodeKind(item))
			}
			if err := checkKind(item, k); err != nil {
				return nil, err
			}
			out = append(out, item.Value)
		}
		return out, nil
	}
	if list {
		return nil, fmt.Errorf("want a value or a list of values, got a %s", nodeKind(v))
	}
	return nil, fmt.Errorf("want a single value, got a %s", nodeKind(v))
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "value"
}

func checkKind(n *yaml.Node, k kind) error {
	tag := n.ShortTag()
	if tag == "!!null" {
		return fmt.Errorf("no value")
	}
	want := map[kind]string{kString: "a string", kInt: "an integer", kFloat: "a number", kBool: "true or false",
		kDuration: "a duration such as 30s", kBoolOrWord: "true, false or a word"}[k]
	ok := true
	switch k {
	case kInt:
		ok = tag == "!!int"
	case kFloat:
		ok = tag == "!!int" || tag == "!!float"
	case kBool:
		ok = tag == "!!bool"
	case kBoolOrWord:
		ok = tag == "!!bool" || tag == "!!str"
	case kDuration:
		ok = tag == "!!str" || tag == "!!int" && n.Value == "0"
	case kString:
		ok = tag == "!!str" || tag == "!!int" || tag == "!!float"
	}
	if !ok {
		return fmt.Errorf("want %s, got %s %q", want, strings.TrimPrefix(tag, "!!"), n.Value)
	}
	return nil
}

// decodeOptions reads a mapping of scenario options (name: value or list)
// into into, and where each one is into at.
func decodeOptions(file, field string, v *yaml.Node, into map[string][]string, at map[string]UsageError) error {
	if v.Kind != yaml.MappingNode {
		return fileError(file, v, field, "want a mapping of option: value")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		vals, err := scalars(val, true, kString)
		if err != nil {
			return fileError(file, val, field+"."+k.Value, "%s", err)
		}
		if err := setOption(into, k.Value, vals); err != nil {
			return fileError(file, val, field+"."+k.Value, "%s", err)
		}
		at[k.Value] = UsageError{File: file, Line: val.Line, Field: field + "." + k.Value}
	}
	return nil
}

// decodeScenarios reads a list of scenario names or {name, options}.
func (p *Plan) decodeScenarios(file string, v *yaml.Node) error {
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	if len(items) == 0 {
		return fileError(file, v, "scenarios", "the list is empty")
	}
	var out []ScenarioPlan
	for _, it := range items {
		sp := ScenarioPlan{}
		at := map[string]UsageError{}
		switch it.Kind {
		case yaml.ScalarNode:
			sp.Name = it.Value
		case yaml.MappingNode:
			for i := 0; i+1 < len(it.Content); i += 2 {
				k, val := it.Content[i], it.Content[i+1]
				switch k.Value {
				case "name":
					if val.Kind != yaml.ScalarNode {
						return fileError(file, val, "scenarios.name", "want a name")
					}
					sp.Name = val.Value
				case keyOptions:
					sp.Options = map[string][]string{}
					if err := decodeOptions(file, "scenarios.options", val, sp.Options, at); err != nil {
						return err
					}
				default:
					return fileError(file, k, "scenarios."+k.Value, "unknown field (known: name, options)")
				}
			}
		default:
			return fileError(file, it, "scenarios", "want a name or {name, options}, got a %s", nodeKind(it))
		}
		if err := setScenarios(&Plan{}, []string{sp.Name}); err != nil {
			return fileError(file, it, "scenarios", "%s", err)
		}
		for _, prev := range out {
			if prev.Name == sp.Name {
				return fileError(file, it, "scenarios", "scenario %s given twice", sp.Name)
			}
		}
		for name, o := range at {
			p.setOrigin("option "+sp.Name+"."+name, o)
		}
		out = append(out, sp)
	}
	p.Scenarios = out
	p.setOrigin("scenario", UsageError{File: file, Line: v.Line, Field: "scenarios"})
	return nil
}

// decodeObjectives reads `metric: [p75, p90, p99]` in milliseconds (under
// key: objectives, or targets as a mapping, their old name).
func (p *Plan) decodeObjectives(file, key string, v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return fileError(file, v, key, "want a mapping of metric: [p75, p90, p99] (ms)")
	}
	p.Objectives = map[string][3]float64{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		field := key + "." + k.Value
		vals, err := scalars(val, true, kFloat)
		if err != nil {
			return fileError(file, val, field, "%s", err)
		}
		if len(vals) != 3 {
			return fileError(file, val, field, "want [p75, p90, p99] in ms, got %d values", len(vals))
		}
		var t [3]float64
		for j, s := range vals {
			t[j], _ = strconv.ParseFloat(s, 64)
			if t[j] <= 0 {
				return fileError(file, val, field, "target %s must be > 0", s)
			}
		}
		p.Objectives[k.Value] = t
	}
	return nil
}

// featureKinds maps each engine.Features YAML key to its Go kind, so that a
// custom version's features are checked by type and new features need no
// change here.
func featureKinds() map[string]reflect.Kind {
	out := map[string]reflect.Kind{}
	t := reflect.TypeFor[engine.Features]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type.Kind()
	}
	return out
}

// DecodeCustomVersions reads a custom_versions list as a sweep file holds
// it (name, base, description, features), for other files that take one;
// errors name file, line and field, as a sweep file's do.
func DecodeCustomVersions(file string, v *yaml.Node) ([]engine.Version, error) {
	var p Plan
	if err := p.decodeCustom(file, v); err != nil {
		return nil, err
	}
	return p.Custom, nil
}

// decodeCustom reads custom versions: a name, an optional built-in base
// whose features it starts from, a description and feature overrides.
func (p *Plan) decodeCustom(file string, v *yaml.Node) error {
	if v.Kind != yaml.SequenceNode {
		return fileError(file, v, keyCustom, "want a list of {name, base, description, features}")
	}
	kinds := featureKinds()
	for _, it := range v.Content {
		if it.Kind != yaml.MappingNode {
			return fileError(file, it, keyCustom, "want {name, base, description, features}, got a %s", nodeKind(it))
		}
		var ver engine.Version
		var feats *yaml.Node
		base := ""
		for i := 0; i+1 < len(it.Content); i += 2 {
			k, val := it.Content[i], it.Content[i+1]
			field := keyCustom + "." + k.Value
			switch k.Value {
			case "name", "base", "description":
				if val.Kind != yaml.ScalarNode || val.ShortTag() != "!!str" {
					return fileError(file, val, field, "want a string")
				}
				switch k.Value {
				case "name":
					ver.Name = val.Value
				case "base":
					base = val.Value
				default:
					ver.Description = val.Value
				}
			case "features":
				feats = val
			default:
				return fileError(file, k, field, "unknown field (known: name, base, description, features)")
			}
		}
		if ver.Name == "" || ver.Name == "all" || strings.ContainsAny(ver.Name, ", +=") {
			return fileError(file, it, keyCustom+".name", "want a name without spaces, commas, + or =")
		}
		if _, err := engine.LookupVersion(ver.Name); err == nil {
			return fileError(file, it, keyCustom+".name", "%q is a built-in version; pick another name", ver.Name)
		}
		for _, c := range p.Custom {
			if c.Name == ver.Name {
				return fileError(file, it, keyCustom+".name", "%q defined twice", ver.Name)
			}
		}
		if base != "" {
			b, err := engine.LookupVersion(base)
			if err != nil {
				return fileError(file, it, keyCustom+".base", "%s", err)
			}
			ver.Features = b.Features
		} else if feats == nil {
			return fileError(file, it, keyCustom, "version %s needs a base or features", ver.Name)
		}
		if feats != nil {
			if feats.Kind != yaml.MappingNode {
				return fileError(file, feats, keyCustom+".features", "want a mapping of feature: value")
			}
			set := map[string]any{}
			for i := 0; i+1 < len(feats.Content); i += 2 {
				k, val := feats.Content[i], feats.Content[i+1]
				field := keyCustom + ".features." + k.Value
				kd, ok := kinds[k.Value]
				if !ok {
					names := sortedKeys(kinds)
					return fileError(file, k, field, "unknown feature (known: %s)", strings.Join(names, ", "))
				}
				if val.Kind != yaml.ScalarNode {
					return fileError(file, val, field, "want a value, got a %s", nodeKind(val))
				}
				var x any
				var err error
				switch kd {
				case reflect.Bool:
					if err = checkKind(val, kBool); err == nil {
						x, err = strconv.ParseBool(val.Value)
					}
				case reflect.Int:
					if err = checkKind(val, kInt); err == nil {
						x, err = strconv.Atoi(val.Value)
					}
				default:
					err = checkKind(val, kString)
					x = val.Value
				}
				if err != nil {
					return fileError(file, val, field, "%s", err)
				}
				set[k.Value] = x
			}
			// JSON carries the overrides onto the base's features; the
			// json and yaml names of engine.Features agree.
			b, _ := json.Marshal(set)
			if err := json.Unmarshal(b, &ver.Features); err != nil {
				return fileError(file, feats, keyCustom+".features", "%s", err)
			}
		}
		if err := ver.Features.Validate(); err != nil {
			return fileError(file, it, keyCustom+".features", "%s", err)
		}
		p.Custom = append(p.Custom, ver)
	}
	return nil
}
