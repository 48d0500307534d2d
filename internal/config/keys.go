package config

// The key table: every setting with its kind, default, bounds and doc,
// and what the docs and help read of it.

import (
	"math"

	"github.com/simlock/simlock/internal/contract"
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
	// kindStore is a gateway's database: sqlite or a postgres:// URL,
	// shown with its password redacted.
	kindStore
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
	{key: "gateway.urls", kind: kindList, def: []string{}, live: true,
		doc: "worker: the gateway replicas to join, tried in order (each as gateway.url); a replica that is not the leader names the leader, which is dialled next when it is in this list; set, it is used instead of gateway.url"},
	{key: "gateway.token", kind: kindString, live: true, secret: true,
		doc: "worker: the join token (simlock token create --role worker on the gateway)"},
	{key: "gateway.store", kind: kindStore, def: StoreSQLite,
		doc: "gateway: where it keeps its state: sqlite (the file in the home) or a postgres:// URL (the password in the URL, PGPASSWORD or a password file; shown redacted); a worker refuses anything but sqlite"},
	{key: "gateway.advertiseUrl", kind: kindString,
		doc: "gateway on PostgreSQL: the URL this replica is reached at (http(s)://host:port), named to workers and clients when it leads and proxied to by the followers; default: http://<host name>:<http.port>"},
	{key: "gateway.leaderTimeoutMs", kind: kindInt, def: int64(5000), min: 1000, max: 60000,
		doc: "gateway on PostgreSQL: how long leadership stays with a leader whose database session went silent; a follower takes over within it"},
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
	{key: "http.maxMcpSessions", kind: kindInt, def: int64(256), min: 1,
		doc: "most MCP sessions open at once on /mcp; past it a new one is 503 TOO_MANY_STREAMS"},
	{key: "http.maxMcpSessionsPerToken", kind: kindInt, def: int64(16), min: 1,
		doc: "most MCP sessions one token may have open at once on /mcp"},
	{key: "http.mcpSessionIdleMs", kind: kindInt, def: int64(1800000), min: 1000,
		doc: "an MCP session on /mcp that no request names for this long ends (its leases stay the token's)"},
	{key: "metrics.public", kind: kindBool, def: false,
		doc: "serve GET /metrics on the HTTP API without a token (otherwise an operator token); for a Prometheus on a trusted network"},
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
