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
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/simlock/simlock/internal/atomicfile"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/homedir"
)

type kind int

const (
	kindInt kind = iota
	kindBool
	kindEnum
	kindList
	// kindString is free text (a path).
	kindString
	// kindModels is one model name or a non-empty list of them.
	kindModels
	// kindPlatformLists is an object of version lists by platform:
	// {"ios":["26.4"],"android":["37"]}.
	kindPlatformLists
	// kindTargets is the warm pool's list of {platform, model, osVersion?,
	// count} objects.
	kindTargets
)

// keySpec declares one setting.
type keySpec struct {
	key  string
	kind kind
	def  any // int64, bool, string, []string, or nil for "unset"
	doc  string
	// min is the smallest int allowed; max, when set, the largest.
	min int64
	max int64
	// allowed lists the values of an enum, or of each list item.
	allowed []string
	// live: a running worker reads the key from the file every 2 s
	// (the daemon's uplink), so a change needs no restart.
	live bool
	// secret: config set never prints the value.
	secret bool
}

// keys is read-only: the one declaration of every setting.
var keys = []keySpec{
	{key: "mode", kind: kindEnum, def: "worker", allowed: []string{"worker", "gateway"},
		doc: "worker serves this machine's devices; gateway owns none and fronts the workers that join it (needs http.enabled)"},
	{key: "gateway.url", kind: kindString, live: true,
		doc: "worker: the gateway to join (https://host:port, or http:// for this machine or with gateway.allowInsecure); unset, the worker joins none"},
	{key: "gateway.token", kind: kindString, live: true, secret: true,
		doc: "worker: the join token (simlock token create --role worker on the gateway)"},
	{key: "gateway.allowInsecure", kind: kindBool, def: false,
		doc: "worker: allow an http:// gateway.url to a host other than this machine (the join token and the gateway's admin session then cross the network in clear text)"},
	{key: "gateway.label", kind: kindString, live: true,
		doc: "worker: its name in the gateway's fleet (default: the host name)"},
	{key: "gateway.heartbeatMs", kind: kindInt, def: int64(10000), min: 100, max: 600000,
		doc: "both ends of an uplink ping this often and drop a peer that missed 3"},
	{key: "gateway.leaseRequestTimeoutMs", kind: kindInt, def: int64(5 * 60 * 1000), min: 1000,
		doc: "gateway: how long a worker may send nothing (no progress, no answer) on a forwarded lease request before it fails WORKER_UNREACHABLE"},
	{key: "gateway.execTimeoutMs", kind: kindInt, def: int64(11 * 60 * 1000), min: 1000,
		doc: "gateway: how long a worker may send nothing (no start, no output, no answer) on a forwarded device.exec before it ends EXEC_TIMEOUT (a backstop behind the worker's exec.timeoutMs)"},
	{key: "gateway.disconnectedRetentionMs", kind: kindInt, def: int64(24 * 60 * 60 * 1000), min: 60000,
		doc: "gateway: a disconnected worker that is not drained is forgotten after this long (checked every minute)"},
	{key: "gateway.maxWorkers", kind: kindInt, def: int64(1000), min: 1, max: 100000,
		doc: "gateway: the most workers it knows, connected or not; an uplink from a new worker id past it is refused TOO_MANY_WORKERS"},
	{key: "capacity.strategy", kind: kindEnum, def: "resource", allowed: []string{"resource", "fixed"},
		doc: "how running limits are set: from CPU and RAM, or fixed numbers"},
	{key: "capacity.config.maxRunning", kind: kindInt, def: int64(2), min: 1,
		doc: "fixed: devices running at once, all platforms"},
	{key: "capacity.config.ios.maxRunning", kind: kindInt, min: 1, doc: "fixed: iOS devices running at once (default: capacity.config.maxRunning)"},
	{key: "capacity.config.ios.maxDevices", kind: kindInt, min: 1, doc: "fixed: the most iOS devices, running or shut down (default: its maxRunning)"},
	{key: "capacity.config.android.maxRunning", kind: kindInt, min: 1, doc: "fixed: Android devices running at once (default: capacity.config.maxRunning)"},
	{key: "capacity.config.android.maxDevices", kind: kindInt, min: 1, doc: "fixed: the most Android devices, running or shut down (default: its maxRunning)"},
	{key: "capacity.config.limits.maxRunning", kind: kindInt, min: 1, doc: "resource: devices running at once (default: sum of the platforms' maxDevices)"},
	{key: "capacity.config.limits.ios.maxDevices", kind: kindInt, min: 1, doc: "resource: the most iOS devices, running or shut down (default: max(1, cpus/2))"},
	{key: "capacity.config.limits.ios.maxRunning", kind: kindInt, min: 1, doc: "resource: iOS devices running (default: its maxDevices)"},
	{key: "capacity.config.limits.android.maxDevices", kind: kindInt, min: 1, doc: "resource: the most Android devices, running or shut down (default: max(1, min(cpus/4, GiB/8)))"},
	{key: "capacity.config.limits.android.maxRunning", kind: kindInt, min: 1, doc: "resource: Android devices running (default: its maxDevices)"},
	{key: "capacity.config.ramBudget.iosBytesPerDevice", kind: kindInt, def: int64(3 << 29), min: 1,
		doc: "resource: RAM one iOS device is assumed to use"},
	{key: "capacity.config.ramBudget.androidBytesPerDevice", kind: kindInt, def: int64(4 << 30), min: 1,
		doc: "resource: RAM one Android device is assumed to use"},
	{key: "capacity.config.ramBudget.iosSlimBytesPerDevice", kind: kindInt, min: 1,
		doc: "resource: RAM one slim iOS device is assumed to use (default: capacity.config.ramBudget.iosBytesPerDevice)"},
	{key: "lease.defaultTtlMs", kind: kindInt, def: int64(15 * 60 * 1000), min: 1,
		doc: "lease lifetime between renewals when a request names none"},
	{key: "lease.minTtlMs", kind: kindInt, def: int64(10 * 1000), min: 1,
		doc: "shortest lease lifetime a request or renewal may ask for; less is refused, never raised"},
	{key: "lease.maxTtlMs", kind: kindInt, def: int64(4 * 60 * 60 * 1000), min: 1,
		doc: "longest lease lifetime a request may ask for; more is refused, never clamped"},
	{key: "lease.identity.ios", kind: kindEnum, def: "reusable", allowed: []string{"reusable", "fresh"},
		doc: "reusable: a lease end wipes the iOS device for the next lease; fresh: it deletes the device, so no two leases see the same device identity"},
	{key: "lease.identity.android", kind: kindEnum, def: "reusable", allowed: []string{"reusable", "fresh"},
		doc: "reusable: a lease end wipes the Android device for the next lease; fresh: it deletes the device, so no two leases see the same device identity"},
	{key: "lease.endWaitMs", kind: kindInt, def: int64(600000), min: 1, max: math.MaxInt32,
		doc: "longest the clean of a device waits, after its lease ends, for the modules acting on it (lease-end participants)"},
	{key: "health.enabled", kind: kindBool, def: true,
		doc: "watch leased devices and reboot one that stopped, under the same lease"},
	{key: "health.probeIntervalMs", kind: kindInt, def: int64(30000), min: 1,
		doc: "how often leased devices are checked"},
	{key: "health.stableObservations", kind: kindInt, def: int64(2), min: 1,
		doc: "consecutive stopped readings that count as a crash"},
	{key: "health.maxRecoveryAttempts", kind: kindInt, def: int64(3), min: 1,
		doc: "reboots tried before the lease ends as device-lost"},
	{key: "health.recoveryBackoffMs", kind: kindInt, def: int64(5000), min: 1,
		doc: "wait before the first reboot; doubled before each next one"},
	{key: "health.maxConcurrentRecoveries", kind: kindInt, def: int64(1), min: 1,
		doc: "reboots run at once"},
	{key: "warmPool.enabled", kind: kindBool, def: true,
		doc: "keep warmPool.targets booted and idle devices within budget; off, idle ready devices are shut down"},
	{key: "warmPool.reserveRunning.ios", kind: kindInt, def: int64(0), min: 0,
		doc: "iOS running slots idle devices must leave free for requests"},
	{key: "warmPool.reserveRunning.android", kind: kindInt, def: int64(0), min: 0,
		doc: "Android running slots idle devices must leave free for requests"},
	{key: "warmPool.maxConcurrentBoots", kind: kindInt, def: int64(1), min: 1,
		doc: "devices the warm pool boots at once"},
	{key: "warmPool.rewarmReleased", kind: kindBool, def: true,
		doc: "boot a device its clean left shut down again while it was used less than idle.shutdownAfterMs ago, in a free running slot no request waits for; a request that needs the slot takes it at once"},
	{key: "warmPool.targets", kind: kindTargets, def: []WarmTarget{},
		doc: `devices to keep booted: a JSON list of {"platform","model","osVersion"?,"imageTag"?,"mode"?,"count"}`},
	{key: "warmPool.quarantine.maxRetries", kind: kindInt, def: int64(3), min: 1,
		doc: "cleans retried on a quarantined device before it is deleted"},
	{key: "warmPool.quarantine.retryBackoffMs", kind: kindInt, def: int64(30000), min: 1,
		doc: "wait before the first retry of a quarantined device"},
	{key: "warmPool.quarantine.retryBackoffMultiplier", kind: kindInt, def: int64(2), min: 1,
		doc: "factor between one retry's wait and the next"},
	{key: "warmPool.quarantine.maxRetryBackoffMs", kind: kindInt, def: int64(300000), min: 1,
		doc: "longest wait between two retries"},
	{key: "stalledTransition.thresholdMultiplier", kind: kindInt, def: int64(3), min: 1,
		doc: "a provisioning or reclaiming device is stalled once it has taken this many times the driver's estimate (status flags it, device.stalled-transition-detected is recorded, doctor reports it)"},
	{key: "stalledTransition.minimumThresholdMs", kind: kindInt, def: int64(60000), min: 1,
		doc: "never stalled sooner than this, whatever the estimate"},
	{key: "idle.shutdownAfterMs", kind: kindInt, def: int64(600000), min: 1,
		doc: "an idle ready device is shut down after this long unused"},
	{key: "idle.deleteAfterMs", kind: kindInt, def: int64(3600000), min: 1,
		doc: "a shut-down idle device is deleted after this long unused"},
	{key: "diskPressure.freeBytesThreshold", kind: kindInt, def: int64(10 << 30), min: 0,
		doc: "below this much free disk, shut-down devices are deleted after idle.shutdownAfterMs instead"},
	{key: "lease.requestRetentionMs", kind: kindInt, def: int64(10 * 60 * 1000), min: 1,
		doc: "how long a settled lease request stays readable (GET /v1/lease-requests/{id})"},
	{key: "lease.maxRequestRecords", kind: kindInt, def: int64(10000), min: 1,
		doc: "most lease requests kept; the longest-settled go first"},
	{key: "exec.timeoutMs", kind: kindInt, def: int64(10 * 60 * 1000), min: 1,
		doc: "longest a command run through device.exec (POST /v1/leases/{id}/exec) may take before it is killed"},
	{key: "exec.maxConcurrent", kind: kindInt, def: int64(4), min: 1,
		doc: "most device.exec commands one lease may have running at once; past it a new one is TOO_MANY_STREAMS"},
	{key: "exec.maxUploadBytes", kind: kindInt, def: int64(2 << 30), min: 1,
		doc: "most bytes one file transfer (push, pull, app install) may carry; a declared length over it is refused before any byte is read"},
	{key: "exec.transferIdleMs", kind: kindInt, def: int64(30 * 1000), min: 100,
		doc: "a file transfer that goes this long without a byte (HTTP) or a call (socket, uplink) is cut and its staged bytes deleted"},
	{key: "http.enabled", kind: kindBool, def: false,
		doc: "serve the HTTP API (also: simlock daemon run --http)"},
	{key: "http.host", kind: kindString, def: "127.0.0.1",
		doc: "address the HTTP API listens on"},
	{key: "http.port", kind: kindInt, def: int64(4700), min: 0,
		doc: "port of the HTTP API; 0 picks a free port (status shows daemon.httpUrl)"},
	{key: "http.maxStreams", kind: kindInt, def: int64(256), min: 1,
		doc: "most event streams (text/event-stream) open at once; past it a new one is 503 TOO_MANY_STREAMS"},
	{key: "http.maxStreamsPerToken", kind: kindInt, def: int64(32), min: 1,
		doc: "most event streams one token may have open at once"},
	{key: "drivers.demo.enabled", kind: kindBool, def: false,
		doc: "serve both platforms with simulated devices (also SIMLOCK_DRIVERS=demo)"},
	{key: "drivers.demo.provisionMs", kind: kindInt, def: int64(1000), min: 0, doc: "demo: time to create a device"},
	{key: "drivers.demo.bootMs", kind: kindInt, def: int64(2000), min: 0, doc: "demo: time to boot a device"},
	{key: "drivers.demo.reclaimMs", kind: kindInt, def: int64(1000), min: 0, doc: "demo: time to clean a device after a lease"},
	{key: "drivers.demo.downloadableRuntimes", kind: kindPlatformLists, def: map[string][]string{"ios": {"26.4"}, "android": {"37"}},
		doc: "demo: runtimes listed as downloadable but not installed, by platform; a download installs one for good"},
	{key: "drivers.demo.downloadMs", kind: kindInt, def: int64(5000), min: 0,
		doc: "demo: time a simulated runtime download takes"},
	{key: "drivers.demo.downloadQuietMs", kind: kindInt, def: int64(0), min: 0,
		doc: "demo: time at a simulated download's start with no percentage known yet"},
	{key: "downloads.policy", kind: kindEnum, def: "on-request", allowed: []string{"never", "on-request", "always"},
		doc: "when a lease may download a missing runtime: never, on-request (--allow-download), always"},
	{key: "downloads.timeoutMs", kind: kindInt, def: int64(20 * 60 * 1000), min: 1,
		doc: "longest a caller waits for a runtime download, counted from its arrival (DOWNLOAD_TIMEOUT)"},
	{key: "downloads.acceptAndroidLicenses", kind: kindBool, def: false,
		doc: "let sdkmanager accept Android SDK licenses when an install needs it"},
	{key: "drivers.demo.fail", kind: kindList, def: []string{}, allowed: []string{"provision", "boot", "reclaim", "shutdown", "destroy", "install", "slim"},
		doc: "demo: operations that always fail, to try failure paths"},
	{key: "drivers.enabled", kind: kindList, allowed: []string{"ios", "android", "demo"},
		doc: "drivers to start (default: ios and android where their tools are found; demo only when named); SIMLOCK_DRIVERS overrides"},
	{key: "drivers.ios.deviceRoot", kind: kindString,
		doc: "absolute directory of the simulators simlock owns (default: $SIMLOCK_HOME/devices/ios)"},
	{key: "drivers.android.deviceRoot", kind: kindString,
		doc: "absolute directory of the emulators (AVDs) simlock owns (default: $SIMLOCK_HOME/devices/android)"},
	{key: "drivers.android.adbServerPort", kind: kindInt, def: int64(5038), min: 1024,
		doc: "port of simlock's own adb server (never 5037, the default server's)"},
	{key: "ios.defaultMode", kind: kindEnum, def: "full", allowed: []string{"full", "slim"},
		doc: "the mode of an iOS lease that names none: full, or slim (background services of ios.slim.categories disabled; iOS 18.5 and later, else served full)"},
	{key: "ios.slim.categories", kind: kindList, def: contract.SlimCategories(), allowed: contract.SlimCategories(),
		doc: "the groups of background services a slim iOS device runs without (default: all of them)"},
	{key: "ios.slim.bootTimeoutMs", kind: kindInt, def: int64(10 * 60 * 1000), min: 1000, max: math.MaxInt32,
		doc: "longest the boot after a slim pass may take before the device is given up as a boot timeout"},
	{key: "android.emulator.headless", kind: kindBool, def: true,
		doc: "run emulators without a window (-no-window); a change makes each device capture a new clean snapshot"},
	{key: "android.emulator.gpu", kind: kindEnum, def: "auto", allowed: contract.EmulatorGPUModes(),
		doc: "emulator GPU mode (-gpu); auto lets the emulator choose; a change makes each device capture a new clean snapshot"},
	{key: "android.emulator.audio", kind: kindBool, def: false,
		doc: "give emulators audio; off passes -no-audio"},
	{key: "android.emulator.bootAnimation", kind: kindBool, def: false,
		doc: "play the boot animation; off passes -no-boot-anim"},
	{key: "log.level", kind: kindEnum, def: "info", allowed: []string{"debug", "info", "warn", "error"},
		doc: "daemon log level"},
	{key: "eventLog.retentionDays", kind: kindInt, def: int64(7), min: 1, max: 3650,
		doc: "events older than this many days are deleted from the event log (checked at start and every 10 minutes)"},
	{key: "jobs.retentionDays", kind: kindInt, def: int64(30), min: 1, max: 3650,
		doc: "ended jobs (component installs) older than this many days are deleted (checked at start and every 10 minutes)"},
	{key: "gateway.installRetries", kind: kindInt, def: int64(3), min: 0, max: 20,
		doc: "gateway: how many times a fleet install asks a worker again after its uplink failed, with backoff"},
	{key: "eventLog.maxEvents", kind: kindInt, def: int64(100000), min: 1, max: 100000000,
		doc: "the event log keeps at most this many events; the oldest go first"},
	{key: "log.rotateBytes", kind: kindInt, def: int64(10 << 20), min: 0,
		doc: "daemon.log is moved to daemon.log.1 when a line would take it past this size, and 3 older files are kept; 0 never rotates"},
}

// aliases are shorter spellings accepted for keys of the fixed strategy,
// read and written as the key they stand for.
var aliases = map[string]string{
	"capacity.maxRunning":         "capacity.config.maxRunning",
	"capacity.ios.maxRunning":     "capacity.config.ios.maxRunning",
	"capacity.ios.maxDevices":     "capacity.config.ios.maxDevices",
	"capacity.android.maxRunning": "capacity.config.android.maxRunning",
	"capacity.android.maxDevices": "capacity.config.android.maxDevices",
}

// canonical is the key an alias stands for, or key itself.
func canonical(key string) string {
	if k, ok := aliases[key]; ok {
		return k
	}
	return key
}

func init() {
	// ios.defaultModels.<class> and android.defaultModels.<class>: one
	// preference list per class, tried before the built-in one.
	for _, p := range []string{"ios", "android"} {
		for _, c := range []string{"phone", "tablet", "watch", "tv", "vision", "auto", "desktop"} {
			keys = append(keys, keySpec{key: p + ".defaultModels." + c, kind: kindModels,
				doc: p + ": models to try, in order, for a " + c + " request (a name or a list)"})
		}
	}
}

func lookup(key string) (keySpec, bool) {
	key = canonical(key)
	for _, k := range keys {
		if k.key == key {
			return k, true
		}
	}
	return keySpec{}, false
}

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

// check applies rules that span keys.
func (c *Config) check() error {
	if port := c.Int("drivers.android.adbServerPort"); port == 5037 || port > 65535 {
		return &Error{Key: "drivers.android.adbServerPort", Msg: fmt.Sprintf("must be a port from 1024 to 65535 other than 5037 (the default adb server's), got %d", port)}
	}
	if port := c.Int("http.port"); port > 65535 {
		return &Error{Key: "http.port", Msg: fmt.Sprintf("must be a port from 0 to 65535, got %d", port)}
	}
	if c.Int("lease.minTtlMs") > c.Int("lease.defaultTtlMs") {
		return &Error{Key: "lease.minTtlMs", Msg: fmt.Sprintf("must not exceed lease.defaultTtlMs (%d), got %d",
			c.Int("lease.defaultTtlMs"), c.Int("lease.minTtlMs"))}
	}
	if c.Int("lease.defaultTtlMs") > c.Int("lease.maxTtlMs") {
		return &Error{Key: "lease.defaultTtlMs", Msg: fmt.Sprintf("must not exceed lease.maxTtlMs (%d), got %d",
			c.Int("lease.maxTtlMs"), c.Int("lease.defaultTtlMs"))}
	}
	if raw := c.String("gateway.url"); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return &Error{Key: "gateway.url", Msg: fmt.Sprintf("must be the gateway's address, http://host:port or https://host:port, got %q", raw)}
		}
		if u.Scheme == "http" && !loopbackHost(u.Hostname()) && !c.Bool("gateway.allowInsecure") {
			return &Error{Key: "gateway.url", Msg: fmt.Sprintf("%q is plain http:// to another machine: the join token and the gateway's admin session on this worker "+
				"would cross the network in clear text; use https://, or set gateway.allowInsecure true on a network you trust", raw)}
		}
	}
	return nil
}

// loopbackHost reports whether host (a URL's host, without port or
// brackets) names this machine: localhost or a loopback address. A name
// is not resolved: only localhost is taken on trust.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (k keySpec) fromJSON(v any) (any, error) {
	bad := func(format string, args ...any) error {
		return &Error{Key: k.key, Msg: fmt.Sprintf(format, args...)}
	}
	switch k.kind {
	case kindInt:
		n, ok := v.(json.Number)
		if !ok {
			return nil, bad("must be an integer, got %s", describe(v))
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return nil, bad("must be an integer, got %s", n)
		}
		return k.checkInt(i)
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return nil, bad("must be true or false, got %s", describe(v))
		}
		return b, nil
	case kindEnum:
		s, ok := v.(string)
		if !ok || !slices.Contains(k.allowed, s) {
			return nil, bad("must be one of %s, got %s", strings.Join(k.allowed, ", "), describe(v))
		}
		return s, nil
	case kindString:
		s, ok := v.(string)
		if !ok || s == "" || len(s) > 4096 {
			return nil, bad("must be a non-empty string, got %s", describe(v))
		}
		return s, nil
	case kindModels:
		if s, ok := v.(string); ok {
			v = []any{s}
		}
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			return nil, bad("must be a model name or a non-empty list of them, got %s", describe(v))
		}
		out := make([]string, 0, len(arr))
		for _, item := range arr {
			s, ok := item.(string)
			if !ok || s == "" || len(s) > 256 {
				return nil, bad("items must be model names, got %s", describe(item))
			}
			out = append(out, s)
		}
		return out, nil
	case kindTargets:
		arr, ok := v.([]any)
		if !ok {
			return nil, bad(`must be a list of {"platform","model","osVersion"?,"count"} objects, got %s`, describe(v))
		}
		if len(arr) > 256 {
			return nil, bad("at most 256 targets, got %d", len(arr))
		}
		out := make([]WarmTarget, 0, len(arr))
		for i, item := range arr {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, bad("target %d must be an object, got %s", i, describe(item))
			}
			var t WarmTarget
			for k, val := range m {
				switch k {
				case "mode":
					sv, _ := val.(string)
					if sv != "full" && sv != "slim" {
						return nil, bad("target %d: mode must be slim or full, got %s", i, describe(val))
					}
					t.Mode = sv
				case "imageTag":
					sv, _ := val.(string)
					if err := contract.CheckImageTag(contract.PlatformAndroid, sv); err != nil || sv == "" {
						return nil, bad("target %d: imageTag must be 1 to %d ASCII letters, digits, _ and -, got %s", i, contract.MaxImageTagLen, describe(val))
					}
					t.ImageTag = sv
				case "platform", "model", "osVersion":
					sv, ok := val.(string)
					if !ok || sv == "" || len(sv) > 256 {
						return nil, bad("target %d: %s must be a non-empty string of at most 256 characters", i, k)
					}
					switch k {
					case "platform":
						t.Platform = sv
					case "model":
						t.Model = sv
					default:
						t.OSVersion = sv
					}
				case "count":
					n, ok := val.(json.Number)
					c, err := n.Int64()
					if !ok || err != nil || c < 1 || c > 64 {
						return nil, bad("target %d: count must be a whole number from 1 to 64, got %s", i, describe(val))
					}
					t.Count = int(c)
				default:
					return nil, bad("target %d: unknown field %q (fields: platform, model, osVersion, imageTag, mode, count)", i, k)
				}
			}
			if t.Platform != "ios" && t.Platform != "android" {
				return nil, bad("target %d: platform must be ios or android, got %q", i, t.Platform)
			}
			if t.Model == "" || t.Count == 0 {
				return nil, bad("target %d: model and count are required", i)
			}
			if t.Mode == "slim" && t.Platform != "ios" {
				return nil, bad("target %d: mode slim is for ios only", i)
			}
			if t.ImageTag != "" && t.Platform != "android" {
				return nil, bad("target %d: imageTag is for android only", i)
			}
			out = append(out, t)
		}
		return out, nil
	case kindPlatformLists:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad(`must be an object of version lists by platform, like {"ios":["26.4"],"android":["37"]}, got %s`, describe(v))
		}
		out := map[string][]string{}
		for p, list := range m {
			if p != "ios" && p != "android" {
				return nil, bad("platforms are ios and android, got %q", p)
			}
			arr, ok := list.([]any)
			if !ok {
				return nil, bad("%s must be a list of versions, got %s", p, describe(list))
			}
			out[p] = []string{}
			for _, item := range arr {
				s, ok := item.(string)
				if !ok || s == "" || len(s) > 64 || strings.ContainsAny(s, " \t\n") {
					return nil, bad("%s: versions are short strings such as 26.4, got %s", p, describe(item))
				}
				out[p] = append(out[p], s)
			}
		}
		return out, nil
	case kindList:
		arr, ok := v.([]any)
		if !ok {
			return nil, bad("must be a list, got %s", describe(v))
		}
		out := make([]string, 0, len(arr))
		for _, item := range arr {
			s, ok := item.(string)
			if !ok || (len(k.allowed) > 0 && !slices.Contains(k.allowed, s)) {
				return nil, bad("items must be among %s, got %s", strings.Join(k.allowed, ", "), describe(item))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, bad("unsupported")
}

func (k keySpec) checkInt(i int64) (any, error) {
	if i < k.min {
		if k.min == 1 {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be a positive integer, got %d", i)}
		}
		return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be at least %d, got %d", k.min, i)}
	}
	if k.max > 0 && i > k.max {
		return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be at most %d, got %d", k.max, i)}
	}
	if i > math.MaxInt32*int64(1000) {
		return nil, &Error{Key: k.key, Msg: fmt.Sprintf("is too large: %d", i)}
	}
	return i, nil
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 64 {
		return fmt.Sprintf("a %T", v)
	}
	return string(b)
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
	return c.values[spec.key], true
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
// writes it.
func (c *Config) Nested() map[string]any { return nest(c.values) }

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

// KeyDoc describes one key for docs and help.
type KeyDoc struct {
	Key     string
	Default any
	Doc     string
}

// Keys lists every key with its default and description.
func Keys() []KeyDoc {
	out := make([]KeyDoc, 0, len(keys))
	for _, k := range keys {
		out = append(out, KeyDoc{Key: k.key, Default: k.def, Doc: k.doc})
	}
	return out
}

// LiveKeys are the keys a running worker reads from the file as it runs
// (every 2 s), not only at its start.
func LiveKeys() []string {
	var out []string
	for _, k := range keys {
		if k.live {
			out = append(out, k.key)
		}
	}
	return out
}

// Live reports whether a running worker picks up a change of key without a
// restart (LiveKeys).
func Live(key string) bool {
	k, ok := lookup(key)
	return ok && k.live
}

// Secret reports whether key holds a secret, which is never printed back.
func Secret(key string) bool {
	k, ok := lookup(key)
	return ok && k.secret
}

// Set validates value (given as text, as on a command line) for key and
// writes it into home's config file, keeping the file's other settings. The
// file is written with mode 0600. The running daemon reads it at its next
// start, or as it runs for the LiveKeys.
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
	return v, nil
}

func (k keySpec) fromText(s string) (any, error) {
	switch k.kind {
	case kindInt:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be an integer, got %q", s)}
		}
		return k.checkInt(i)
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be true or false, got %q", s)}
		}
		return b, nil
	case kindEnum, kindString:
		return k.fromJSON(strings.TrimSpace(s))
	case kindModels:
		if strings.HasPrefix(strings.TrimSpace(s), "[") {
			var items []any
			if err := json.Unmarshal([]byte(s), &items); err != nil {
				return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be a model name or a JSON list, got %q", s)}
			}
			return k.fromJSON(items)
		}
		return k.fromJSON(strings.TrimSpace(s))
	case kindTargets:
		var doc any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf(`must be a JSON list such as [{"platform":"ios","model":"iPhone 17","count":2}], got %q`, s)}
		}
		return k.fromJSON(doc)
	case kindPlatformLists:
		var doc any
		dec := json.NewDecoder(strings.NewReader(s))
		if err := dec.Decode(&doc); err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf(`must be a JSON object such as {"ios":["26.4"],"android":["37"]}, got %q`, s)}
		}
		return k.fromJSON(doc)
	case kindList:
		items := []any{}
		if strings.HasPrefix(strings.TrimSpace(s), "[") {
			if err := json.Unmarshal([]byte(s), &items); err != nil {
				return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be a JSON list or comma-separated words, got %q", s)}
			}
		} else {
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					items = append(items, p)
				}
			}
		}
		return k.fromJSON(items)
	}
	return nil, &Error{Key: k.key, Msg: "unsupported"}
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
