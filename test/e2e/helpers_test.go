package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/internal/bintest"
)

// waitBound is the failure bound of every wait: generous, since a wait that
// succeeds returns as soon as its condition holds.
const waitBound = 20 * time.Second

// commandBound is how long a command run to completion may take.
const commandBound = 60 * time.Second

// pollEvery is the period of the few bounded polling loops (CLI state with no
// event to wait on, the daemon's lock at cleanup).
const pollEvery = 25 * time.Millisecond

// fastDemo makes the demo driver quick: the timings are real waits in the
// daemon, so they bound how long each test takes.
var fastDemo = []string{
	"drivers.demo.provisionMs", "60",
	"drivers.demo.bootMs", "60",
	"drivers.demo.reclaimMs", "60",
}

// home is one SIMLOCK_HOME (bintest.Home), with the daemon the CLI starts
// for it on demand.
type home struct {
	*bintest.Home
	// adbPort is the port of the daemon's own adb server, which withShims
	// takes from the OS for a home with the Android driver ("" without).
	adbPort string
}

// newHome makes a fresh, short SIMLOCK_HOME and writes the given settings
// (key, value pairs) with `simlock config set`, before any daemon starts.
// Its cleanup stops the daemon and removes the directory.
func newHome(t *testing.T, settings ...string) *home {
	t.Helper()
	consultSourcesOnce(t)
	return &home{Home: bintest.NewHome(t, simlockBin, bintest.HomeOptions{}, settings...)}
}

func (h *home) path(name string) string { return h.Path(name) }

// lockHeld reports whether a daemon runs for dir (see bintest.LockHeld).
func lockHeld(dir string) bool { return bintest.LockHeld(dir) }

// waitLockFree polls until nobody holds the daemon lock; false if the bound
// passed first.
func waitLockFree(dir string, bound time.Duration) bool { return bintest.WaitLockFree(dir, bound) }

// lockPID is the pid on daemon.lock's first line, or 0.
func lockPID(dir string) int { return bintest.LockPID(dir) }

// result is a command run to completion.
type result struct {
	args           []string
	stdout, stderr string
	code           int
	elapsed        time.Duration
	ended          time.Time
}

func (r result) String() string {
	return fmt.Sprintf("`simlock %s` exited %d after %s\nstdout: %s\nstderr: %s",
		strings.Join(r.args, " "), r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// exec runs simlock to completion; an error means it could not run or did
// not finish in time.
func (h *home) exec(ctx context.Context, args ...string) (result, error) {
	r, err := h.Exec(ctx, args...)
	return result{args: r.Args, stdout: r.Stdout, stderr: r.Stderr, code: r.Code, elapsed: r.Elapsed, ended: r.Ended}, err
}

// run runs simlock to completion from the test goroutine.
func (h *home) run(args ...string) result {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	r, err := h.exec(ctx, args...)
	if err != nil {
		h.T.Fatalf("%v\n%s", err, r)
	}
	return r
}

// runAsync runs simlock to completion in the background.
func (h *home) runAsync(args ...string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), commandBound)
		defer cancel()
		r, err := h.exec(ctx, args...)
		if err != nil {
			r.code = -1
			r.stderr += "\n(e2e: " + err.Error() + ")"
		}
		ch <- r
	}()
	return ch
}

// awaitResult waits for a runAsync command.
func awaitResult(t *testing.T, ch <-chan result) result {
	t.Helper()
	return waitResult(t, ch, commandBound+10*time.Second, "a background command")
}

// waitResult waits for a runAsync command at most within; what names what
// a command still running would mean.
func waitResult(t *testing.T, ch <-chan result, within time.Duration, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		if r.code == -1 {
			t.Fatalf("command failed to run: %s", r)
		}
		return r
	case <-time.After(within):
		t.Fatalf("%s: the command had not ended %s later", what, within)
	}
	return result{}
}

// line is one output line and when the test read it.
type line struct {
	text string
	at   time.Time
}

// stream is one output of a started process, line by line.
type stream struct {
	name string
	ch   chan line // closed at EOF

	mu   sync.Mutex
	seen []string
}

func (s *stream) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.seen, "\n")
}

func (s *stream) read(r io.Reader, wg *sync.WaitGroup) {
	defer wg.Done()
	defer close(s.ch)
	br := bufio.NewReader(r)
	for {
		text, err := br.ReadString('\n')
		if text != "" {
			text = strings.TrimRight(text, "\r\n")
			s.mu.Lock()
			s.seen = append(s.seen, text)
			s.mu.Unlock()
			s.ch <- line{text: text, at: time.Now()}
		}
		if err != nil {
			return
		}
	}
}

// proc is a long-running simlock command.
type proc struct {
	t      *testing.T
	args   []string
	cmd    *exec.Cmd
	stdout *stream
	stderr *stream
	done   chan struct{} // closed once the process has exited and been reaped
	code   int
	ended  time.Time
}

// start runs simlock in the background; its cleanup kills it if it still
// runs.
func (h *home) start(args ...string) *proc {
	t := h.T
	t.Helper()
	cmd := exec.Command(simlockBin, args...)
	cmd.Env = h.Env
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{
		t: t, args: args, cmd: cmd, done: make(chan struct{}),
		stdout: &stream{name: "stdout", ch: make(chan line, 8192)},
		stderr: &stream{name: "stderr", ch: make(chan line, 8192)},
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start simlock %s: %v", strings.Join(args, " "), err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go p.stdout.read(outR, &wg)
	go p.stderr.read(errR, &wg)
	go func() {
		wg.Wait() // all reads are done before Wait closes the pipes
		_ = cmd.Wait()
		p.code, p.ended = cmd.ProcessState.ExitCode(), time.Now()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) String() string {
	return fmt.Sprintf("`simlock %s`", strings.Join(p.args, " "))
}

func (p *proc) dump() string {
	return fmt.Sprintf("%s\nstdout:\n%s\nstderr:\n%s", p, p.stdout.text(), p.stderr.text())
}

// kill ends the process with SIGKILL if it still runs.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(waitBound):
		p.t.Errorf("%s did not exit after SIGKILL", p)
	}
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, p, err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(waitBound):
		p.t.Fatalf("%s did not exit within %s\n%s", p, waitBound, p.dump())
	}
	return 0
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// waitLine reads s until a line satisfies pred, and returns it. Lines read
// on the way are consumed.
func (p *proc) waitLine(s *stream, what string, pred func(string) bool) line {
	p.t.Helper()
	timer := time.NewTimer(waitBound)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-s.ch:
			if !ok {
				p.wait()
				p.t.Fatalf("%s exited (code %d) before its %s showed %s\n%s", p, p.code, s.name, what, p.dump())
			}
			if pred(l.text) {
				return l
			}
		case <-timer.C:
			p.t.Fatalf("%s: no %s line showed %s within %s\n%s", p, s.name, what, waitBound, p.dump())
		}
	}
}

// --- what the CLI prints ---

type spec struct {
	Platform  string `json:"platform"`
	Model     string `json:"model"`
	OSVersion string `json:"osVersion"`
	ImageTag  string `json:"imageTag"`
	Mode      string `json:"mode"`
}

type leaseRec struct {
	ID            string `json:"id"`
	DeviceID      string `json:"deviceId"`
	RequesterID   string `json:"requesterId"`
	OwnerID       string `json:"ownerId"`
	GrantedAt     int64  `json:"grantedAt"`
	TTLMs         int64  `json:"ttlMs"`
	LastRenewedAt int64  `json:"lastRenewedAt"`
	TTLDeadline   int64  `json:"ttlDeadline"`
	// IDChosenByRequester: the request chose the id.
	IDChosenByRequester bool   `json:"idChosenByRequester"`
	BoundPID            int    `json:"boundPid"`
	WorkerID            string `json:"workerId"`
	// Worker and Unreachable are a gateway's: the lease's worker, and
	// whether it is away.
	Worker *struct {
		ID    string `json:"id"`
		Label string `json:"label"`
	} `json:"worker"`
	Unreachable bool `json:"unreachable"`
}

type grant struct {
	Device struct {
		ID             string `json:"id"`
		DriverDeviceID string `json:"driverDeviceId"`
		Spec           spec   `json:"spec"`
		Address        string `json:"address"`
		Mode           string `json:"mode"`
	} `json:"device"`
	Environment map[string]string `json:"environment"`
	Lease       leaseRec          `json:"lease"`
	Timing      *struct {
		EstimatedProvisionMs *int64 `json:"estimatedProvisionMs"`
		EstimatedBootMs      *int64 `json:"estimatedBootMs"`
		EstimatedReclaimMs   *int64 `json:"estimatedReclaimMs"`
		EstimatedReadyMs     *int64 `json:"estimatedReadyMs"`
	} `json:"timing"`
	RequestID string `json:"requestId"`
	Source    string `json:"source"`
	Role      string `json:"role"`
}

type event struct {
	ID        string         `json:"id"`
	Seq       int64          `json:"seq"`
	Timestamp int64          `json:"timestamp"`
	Event     string         `json:"event"`
	Payload   map[string]any `json:"payload"`
}

func (e event) str(key string) string {
	s, _ := e.Payload[key].(string)
	return s
}

// progress is one JSON progress line of `simlock lease` on stderr.
type progress struct {
	Push          string `json:"push"`
	Stage         string `json:"stage"`
	QueuePosition int    `json:"queuePosition"`
	EtaMs         *int64 `json:"etaMs"`
	Component     string `json:"component"`
	Waiting       *bool  `json:"waiting"`
	Percent       *int   `json:"percent"`
	Wait          *struct {
		Limit   string `json:"limit"`
		InUse   int    `json:"inUse"`
		Max     int    `json:"max"`
		LeaseID string `json:"leaseId"`
		Holder  string `json:"holder"`
		EndsAt  int64  `json:"endsAt"`
	} `json:"wait"`
}

func parseProgress(s string) (progress, bool) {
	var p progress
	if json.Unmarshal([]byte(s), &p) != nil || p.Push != "progress" {
		return progress{}, false
	}
	return p, true
}

// parseGrant decodes a grant line; it fails the test if it is not one.
func parseGrant(t *testing.T, s string) grant {
	t.Helper()
	var g grant
	if err := json.Unmarshal([]byte(s), &g); err != nil {
		t.Fatalf("grant is not JSON: %v\n%s", err, s)
	}
	// A worker's lease is lse_…; a gateway's <workerId>.lse_…; one whose
	// requester chose its id, that id.
	_, workerLease, _ := strings.Cut(g.Lease.ID, ".")
	made := strings.HasPrefix(g.Lease.ID, "lse_") || strings.HasPrefix(workerLease, "lse_")
	if (!made && !g.Lease.IDChosenByRequester) || g.Device.ID == "" {
		t.Fatalf("not a lease grant (lease.id %q, device.id %q): %s", g.Lease.ID, g.Device.ID, s)
	}
	return g
}

// cliError decodes the one error line a failed command writes to stderr:
// {"error":{"code":...,"message":...,<details>}}.
func cliError(t *testing.T, r result) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(last), &doc); err != nil || len(doc) != 1 || doc["error"] == nil {
		t.Fatalf("stderr does not end with one {\"error\":{...}} line\n%s", r)
	}
	var e map[string]any
	if err := json.Unmarshal(doc["error"], &e); err != nil {
		t.Fatalf("error is not an object: %v\n%s", err, r)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error has no message\n%s", r)
	}
	return e
}

// message is an error object's message ("" if it has none).
func message(e map[string]any) string {
	s, _ := e["message"].(string)
	return s
}

// expectFailure checks a command's exit code and error code, and returns the
// error object.
func expectFailure(t *testing.T, r result, exit int, code string) map[string]any {
	t.Helper()
	if r.code != exit {
		t.Fatalf("want exit %d (%s)\n%s", exit, code, r)
	}
	e := cliError(t, r)
	if e["code"] != code {
		t.Fatalf("want error code %s, got %v\n%s", code, e["code"], r)
	}
	return e
}

// leaseDetached leases a device for agent with --detach and returns the
// grant.
func (h *home) leaseDetached(agent, platform string, extra ...string) grant {
	h.T.Helper()
	args := append([]string{"lease", "--platform", platform, "--agent-id", agent, "--detach"}, extra...)
	r := h.run(args...)
	if r.code != 0 {
		h.T.Fatalf("lease failed\n%s", r)
	}
	return parseGrant(h.T, strings.TrimSpace(r.stdout))
}

// hold starts a lease holder (no --detach) and waits for its grant.
func (h *home) hold(agent, platform string, extra ...string) (*proc, grant) {
	h.T.Helper()
	args := append([]string{"lease", "--platform", platform, "--agent-id", agent}, extra...)
	p := h.start(args...)
	l := p.waitLine(p.stdout, "a grant", func(string) bool { return true })
	return p, parseGrant(h.T, l.text)
}

// leases is `simlock list --leases`, by lease id.
func (h *home) leases() map[string]leaseRec {
	h.T.Helper()
	r := h.run("list", "--leases")
	if r.code != 0 {
		h.T.Fatalf("list --leases failed\n%s", r)
	}
	var out struct {
		Leases *[]leaseRec `json:"leases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Leases == nil {
		h.T.Fatalf("list --leases: not {\"leases\":[...]}: %v\n%s", err, r)
	}
	m := map[string]leaseRec{}
	for _, l := range *out.Leases {
		m[l.ID] = l
	}
	return m
}

// startDaemon starts the daemon (`simlock daemon start`) and returns its pid.
func (h *home) startDaemon() int {
	h.T.Helper()
	return h.StartDaemon()
}

// follower is a running `simlock events --follow`.
type follower struct {
	p *proc
	// events is everything read so far, in order.
	events []event
}

// follow starts `simlock events --follow` and waits for its first line (the
// replayed history), so it is subscribed when follow returns.
func (h *home) follow() *follower {
	h.T.Helper()
	f := &follower{p: h.start("events", "--follow")}
	f.next("its first event", func(event) bool { return true })
	return f
}

// next reads events until one satisfies pred.
func (f *follower) next(what string, pred func(event) bool) event {
	f.p.t.Helper()
	var found event
	f.p.waitLine(f.p.stdout, what, func(s string) bool {
		var ev event
		if err := json.Unmarshal([]byte(s), &ev); err != nil || ev.Event == "" || ev.Seq <= 0 || ev.ID == "" {
			f.p.t.Fatalf("events --follow printed a line that is not an event: %q", s)
		}
		f.events = append(f.events, ev)
		if pred(ev) {
			found = ev
			return true
		}
		return false
	})
	return found
}

// find returns the first event read so far that satisfies pred, or reads on
// until one does.
func (f *follower) find(what string, pred func(event) bool) event {
	f.p.t.Helper()
	for _, ev := range f.events {
		if pred(ev) {
			return ev
		}
	}
	return f.next(what, pred)
}

// isEvent matches an event by name and payload string fields.
func isEvent(name string, kv ...string) func(event) bool {
	return func(ev event) bool {
		if ev.Event != name {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if ev.str(kv[i]) != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// --- the raw socket protocol ---

// frame is one frame the daemon sends.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  map[string]any  `json:"error"`
	Push   string          `json:"push"`
	raw    string
}

func (f frame) code() string {
	c, _ := f.Error["code"].(string)
	return c
}

// rawConn is a hand-driven connection to the daemon socket.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func (h *home) dial() *rawConn {
	h.T.Helper()
	c, err := net.Dial("unix", h.path("daemon.sock"))
	if err != nil {
		h.T.Fatalf("dial the daemon: %v", err)
	}
	h.T.Cleanup(func() { c.Close() })
	return &rawConn{t: h.T, c: c, r: bufio.NewReaderSize(c, 1<<16)}
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(waitBound))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write to the daemon: %v", err)
	}
}

// await reads frames until the response whose id is the JSON literal id,
// skipping pushes.
func (rc *rawConn) await(id string) frame {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(waitBound))
	for {
		s, err := rc.r.ReadString('\n')
		if err != nil {
			rc.t.Fatalf("waiting for the response to id %s: %v (read %q)", id, err, s)
		}
		var f frame
		if err := json.Unmarshal([]byte(s), &f); err != nil {
			rc.t.Fatalf("the daemon sent a frame that is not JSON: %v: %q", err, s)
		}
		f.raw = strings.TrimSpace(s)
		if f.Push != "" {
			continue
		}
		if string(f.ID) != id {
			rc.t.Fatalf("want the response to id %s, got %s", id, f.raw)
		}
		if (f.Error == nil) == (f.Result == nil) {
			rc.t.Fatalf("a response needs exactly one of result and error: %s", f.raw)
		}
		return f
	}
}

// call sends one request and returns its response.
func (rc *rawConn) call(id, op string, input any) frame {
	rc.t.Helper()
	req := map[string]any{"id": id, "op": op}
	if input != nil {
		req["input"] = input
	}
	b, err := json.Marshal(req)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.write(append(b, '\n'))
	return rc.await(strconv.Quote(id))
}

// expectError checks that f is an error response with code.
func expectError(t *testing.T, f frame, code string) {
	t.Helper()
	if f.Error == nil || f.code() != code {
		t.Fatalf("want error %s, got %s", code, f.raw)
	}
	if msg, _ := f.Error["message"].(string); msg == "" {
		t.Errorf("error %s has no message: %s", code, f.raw)
	}
}

// expectResult checks that f is a result and decodes it into v.
func expectResult(t *testing.T, f frame, v any) {
	t.Helper()
	if f.Error != nil || f.Result == nil {
		t.Fatalf("want a result, got %s", f.raw)
	}
	if v != nil {
		if err := json.Unmarshal(f.Result, v); err != nil {
			t.Fatalf("decode result: %v: %s", err, f.raw)
		}
	}
}

// helloInput is a hello for protocol 1.
func helloInput(principal, token string) map[string]any {
	in := map[string]any{"protocol": map[string]int{"min": 1, "max": 1}}
	if principal != "" {
		in["principal"] = principal
	}
	if token != "" {
		in["adminToken"] = token
	}
	return in
}

func (h *home) adminToken() string {
	h.T.Helper()
	return h.AdminToken()
}
