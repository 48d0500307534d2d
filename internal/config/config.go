// Package config reads, validates and writes simlock's configuration: the file
// $SIMLOCK_HOME/config.json merged over built-in defaults.
//
// The file is a nested JSON object; each setting has a dotted key
// ("capacity.config.maxRunning") declared once in the keys table below, with
// its kind, default and rule. Loading reports unknown keys as warnings and
// refuses an invalid value with a message naming its key. Values are plain
// data: a loaded *Config is never mutated and is safe to share.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/homedir"
)

// Error is an invalid setting; Key names it.
type Error struct {
	Key string
	Msg string
}

func (e *Error) Error() string { return "config " + e.Key + ": " + e.Msg }

// Config is an effective configuration: defaults with the file's values over
// them. Unset optional values are absent from Values.
type Config struct {
	values map[string]any
	// Warnings lists what loading ignored (unknown keys).
	Warnings []string
}

// Default is the configuration with no file.
func Default() *Config {
	c := &Config{values: map[string]any{}}
	for _, k := range keys {
		if k.def != nil {
			c.values[k.key] = k.def
		}
	}
	return c
}

// Path is the config file under home.
func Path(home string) string { return filepath.Join(home, "config.json") }

// Load reads home's config file over the defaults. A missing file is the
// defaults.
func Load(home string) (*Config, error) {
	b, err := homedir.ReadFile(Path(home))
	if errors.Is(err, os.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(b)
}

// Parse reads a config document over the defaults.
func Parse(b []byte) (*Config, error) {
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("config.json is not a JSON object: %w", err)
	}
	flat := map[string]any{}
	flatten("", doc, flat)
	c := Default()
	names := make([]string, 0, len(flat))
	for k := range flat {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, key := range names {
		spec, ok := lookup(key)
		if !ok {
			c.Warnings = append(c.Warnings, fmt.Sprintf("unknown config key %q ignored", key))
			continue
		}
		v, err := spec.fromJSON(flat[key])
		if err != nil {
			return nil, err
		}
		if _, both := flat[spec.key]; both && spec.key != key {
			return nil, &Error{Key: key, Msg: "is another spelling of " + spec.key + "; give one of them"}
		}
		c.values[spec.key] = v
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

// flatten turns nested objects into dotted keys; arrays and scalars are leaves.
func flatten(prefix string, v map[string]any, out map[string]any) {
	for k, val := range v {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if m, ok := val.(map[string]any); ok && !isLeafObject(key) {
			flatten(key, m, out)
			continue
		}
		out[key] = val
	}
}

func isLeafObject(key string) bool {
	_, ok := lookup(key)
	return ok
}

// Int is an int setting; unset optional ones are 0.
func (c *Config) Int(key string) int64 {
	v, _ := c.values[key].(int64)
	return v
}

// IntSet reports an int setting and whether it has a value.
func (c *Config) IntSet(key string) (int64, bool) {
	v, ok := c.values[key].(int64)
	return v, ok
}

// Bool is a bool setting.
func (c *Config) Bool(key string) bool {
	v, _ := c.values[key].(bool)
	return v
}

// String is an enum setting.
func (c *Config) String(key string) string {
	v, _ := c.values[key].(string)
	return v
}

// WarmTarget is one warm-pool target as configured.
type WarmTarget struct {
	Platform  string `json:"platform"`
	Model     string `json:"model"`
	OSVersion string `json:"osVersion,omitempty"`
	// ImageTag is the Android system image tag; "" is the default image.
	ImageTag string `json:"imageTag,omitempty"`
	// Mode is slim or full; "" is ios.defaultMode.
	Mode  string `json:"mode,omitempty"`
	Count int    `json:"count"`
}

// Targets is the warm pool's target list.
func (c *Config) Targets(key string) []WarmTarget {
	v, _ := c.values[key].([]WarmTarget)
	return slices.Clone(v)
}

// PlatformLists is a setting of version lists by platform.
func (c *Config) PlatformLists(key string) map[string][]string {
	v, _ := c.values[key].(map[string][]string)
	out := make(map[string][]string, len(v))
	for p, l := range v {
		out[p] = slices.Clone(l)
	}
	return out
}

// List is a list setting.
func (c *Config) List(key string) []string {
	v, _ := c.values[key].([]string)
	return slices.Clone(v)
}

// Get is the value of one key for display, and whether the key exists.
func (c *Config) Get(key string) (any, bool) {
	spec, ok := lookup(key)
	if !ok {
		return nil, false
	}
	return shown(spec, c.values[spec.key]), true
}

// Flat is every set value by dotted key.
func (c *Config) Flat() map[string]any {
	out := make(map[string]any, len(c.values))
	for k, v := range c.values {
		out[k] = v
	}
	return out
}

// Nested is the effective configuration as a nested object, as the file
// writes it, for display: a value that may hold a password (gateway.store)
// is redacted.
func (c *Config) Nested() map[string]any {
	out := make(map[string]any, len(c.values))
	for k, v := range c.values {
		if spec, ok := lookup(k); ok {
			v = shown(spec, v)
		}
		out[k] = v
	}
	return nest(out)
}

func nest(flat map[string]any) map[string]any {
	root := map[string]any{}
	for key, v := range flat {
		parts := strings.Split(key, ".")
		m := root
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
	}
	return root
}

// Set validates value (given as text, as on a command line) for key and
// writes it into home's config file, keeping the file's other settings. The
// file is written with mode 0600. The running daemon reads it at its next
// start, or as it runs for the LiveKeys. It returns the value written, as
// it may be shown (a password redacted).
func Set(home, key, value string) (any, error) {
	spec, ok := lookup(key)
	if !ok {
		return nil, &Error{Key: key, Msg: "unknown key"}
	}
	v, err := spec.fromText(value)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{}
	b, err := homedir.ReadFile(Path(home))
	switch {
	case err == nil:
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("config.json is not a JSON object: %w", err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read config: %w", err)
	}
	flat := map[string]any{}
	flatten("", doc, flat)
	for alias, k := range aliases {
		if k == spec.key {
			delete(flat, alias)
		}
	}
	flat[spec.key] = v
	out, err := json.MarshalIndent(nest(flat), "", "  ")
	if err != nil {
		return nil, err
	}
	// The whole file must still load: a value can be fine alone and wrong
	// beside the others (lease.defaultTtlMs above lease.maxTtlMs).
	if _, err := Parse(out); err != nil {
		return nil, err
	}
	if err := homedir.Prepare(home); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	if err := atomicfile.Write(Path(home), append(out, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	return shown(spec, v), nil
}

// Has reports whether key has a value (a default or a set one).
func (c *Config) Has(key string) bool {
	_, ok := c.values[canonical(key)]
	return ok
}

// Override returns a copy of c with key set to value (given as text, as
// `config set` takes it), for settings a command-line flag changes for one
// run without touching the file.
func (c *Config) Override(key, value string) (*Config, error) {
	spec, ok := lookup(key)
	if !ok {
		return nil, &Error{Key: key, Msg: "unknown key"}
	}
	v, err := spec.fromText(value)
	if err != nil {
		return nil, err
	}
	out := &Config{values: maps.Clone(c.values), Warnings: c.Warnings}
	out.values[spec.key] = v
	if err := out.check(); err != nil {
		return nil, err
	}
	return out, nil
}
