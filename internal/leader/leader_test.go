package leader

import (
	"context"
	"errors"
	"io"
	"net"
	neturl "net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/simlock/simlock/internal/store/pgtest"
)

// TestMain fails the package's tests if a goroutine they started outlives
// them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// timeout is the leader timeout of the tests' electors.
const timeout = 2 * time.Second

// change is one callback of an elector.
type change struct {
	who     string
	elected bool // false: deposed
	term    int64
	at      time.Time
}

// candidate is an elector running in the background for a test.
type candidate struct {
	name    string
	e       *Elector
	changes chan change
	stop    func()
}

// campaign starts an elector named name against url; it stops when the
// test ends (or at stop).
func campaign(t *testing.T, url, name string) *candidate {
	t.Helper()
	c := &candidate{name: name, changes: make(chan change, 64)}
	e, err := New(Options{
		URL: url, Group: "gateway", AdvertiseURL: "http://" + name + ".example:7420", Timeout: timeout,
		OnElected: func(term int64) { c.changes <- change{name, true, term, time.Now()} },
		OnDeposed: func(term int64) { c.changes <- change{name, false, term, time.Now()} },
	})
	if err != nil {
		t.Fatal(err)
	}
	c.e = e
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx)
	}()
	var once sync.Once
	c.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(c.stop)
	return c
}

// next is c's next callback, failing the test if none comes within d.
func (c *candidate) next(t *testing.T, d time.Duration, what string) change {
	t.Helper()
	select {
	case ch := <-c.changes:
		return ch
	case <-time.After(d):
		t.Fatalf("%s: %s: no callback within %v", c.name, what, d)
		return change{}
	}
}

// quiet fails the test if c has a callback pending.
func (c *candidate) quiet(t *testing.T, what string) {
	t.Helper()
	select {
	case ch := <-c.changes:
		t.Fatalf("%s: %s: unexpected callback %+v", c.name, what, ch)
	default:
	}
}

// eventually fails the test if cond does not hold within 10 s; it reads
// states that have no event to wait on.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// terminate ends the server session of pid, as an operator or a network
// failure would.
func terminate(t *testing.T, admin *pgx.Conn, pid uint32) {
	t.Helper()
	var ok bool
	if err := admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
	}
}

// fencedWrite inserts a row marked with term and who, fenced by term; it
// is the shape of every write a leader makes.
func fencedWrite(ctx context.Context, conn *pgx.Conn, term int64, who string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `INSERT INTO writes (term, who) VALUES ($1, $2)`, term, who); err != nil {
		return err
	}
	if err := Fence(ctx, tx, "gateway", term); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func writesTable(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	if _, err := admin.Exec(context.Background(), `CREATE TABLE writes (id bigserial PRIMARY KEY, term bigint NOT NULL, who text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

func TestTakeoverWhenTheLeadersSessionEnds(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	admin := connect(t, url)
	a := campaign(t, url, "a")
	first := a.next(t, 10*time.Second, "the only candidate is elected")
	if !first.elected || first.term != 1 {
		t.Fatalf("first callback %+v, want elected in term 1", first)
	}
	b := campaign(t, url, "b")
	// b follows: it reads a as the leader and is not elected.
	eventually(t, "b reads the leader", func() bool { _, ok := b.e.Leader(); return ok })
	if info, _ := b.e.Leader(); info.Term != 1 || info.URL != "http://a.example:7420" || !info.Live {
		t.Fatalf("b sees leader %+v, want a's live term 1", info)
	}
	b.quiet(t, "a follower while a leads")
	if err := fencedWrite(context.Background(), admin, 0, "x"); err == nil {
		t.Fatal("want a missing table error")
	}
	writesTable(t, admin)
	if err := fencedWrite(context.Background(), admin, 1, "a"); err != nil {
		t.Fatalf("a's write in its own term: %v", err)
	}

	cut := time.Now()
	terminate(t, admin, a.e.PID())
	won := b.next(t, timeout, "b takes over within the timeout")
	took := won.at.Sub(cut)
	t.Logf("takeover %v after the leader's session ended (timeout %v)", took, timeout)
	if !won.elected || won.term != 2 {
		t.Fatalf("b's callback %+v, want elected in term 2", won)
	}
	lost := a.next(t, timeout, "a steps down")
	if lost.elected || lost.term != 1 {
		t.Fatalf("a's callback %+v, want deposed from term 1", lost)
	}
	if err := fencedWrite(context.Background(), admin, 1, "a"); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a deposed leader's write: %v, want ErrDeposed", err)
	}
	if err := fencedWrite(context.Background(), admin, 2, "b"); err != nil {
		t.Fatalf("b's write in its own term: %v", err)
	}
	info, ok, err := Current(context.Background(), admin, "gateway")
	if err != nil || !ok || info.Term != 2 || info.URL != "http://b.example:7420" || !info.Live {
		t.Fatalf("Current = %+v %v %v, want b's live term 2", info, ok, err)
	}
	a.quiet(t, "a follows b")
}

// TestFenceRefusesAnEndedSessionWithoutSuccessor: a leader whose session
// ended cannot commit even while no follower has taken its place.
func TestFenceRefusesAnEndedSessionWithoutSuccessor(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	admin := connect(t, url)
	a := campaign(t, url, "a")
	if ch := a.next(t, 10*time.Second, "elected"); !ch.elected || ch.term != 1 {
		t.Fatalf("%+v, want elected in term 1", ch)
	}
	writesTable(t, admin)
	if err := fencedWrite(context.Background(), admin, 1, "a"); err != nil {
		t.Fatalf("the leader's write: %v", err)
	}
	a.stop()
	if err := fencedWrite(context.Background(), admin, 1, "a"); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a write of a term whose session ended: %v, want ErrDeposed", err)
	}
	if err := fencedWrite(context.Background(), admin, 7, "a"); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a write of a term never won: %v, want ErrDeposed", err)
	}
}

// TestPausedLeaderStepsDownAndCannotCommit cuts the leader off from the
// database (its connection goes through a proxy that stops forwarding):
// the leader steps down by itself, the server ends its silent session, a
// follower takes over within the timeout, and the old term's writes are
// refused before and after the cut heals.
func TestPausedLeaderStepsDownAndCannotCommit(t *testing.T) {
	cluster := pgtest.Start(t)
	url := cluster.Database(t)
	admin := connect(t, url)
	writesTable(t, admin)
	p := startProxy(t, "127.0.0.1", cluster.Port())
	a := campaign(t, p.rewrite(t, url), "a")
	if ch := a.next(t, 10*time.Second, "elected"); !ch.elected || ch.term != 1 {
		t.Fatalf("%+v, want a elected in term 1", ch)
	}
	b := campaign(t, url, "b")

	cut := time.Now()
	p.pause()
	lost := a.next(t, timeout, "a steps down when it cannot reach the database")
	if lost.elected || lost.term != 1 {
		t.Fatalf("a's callback %+v, want deposed from term 1", lost)
	}
	won := b.next(t, timeout+timeout/2, "b takes over")
	t.Logf("a stepped down %v after the cut, b took over %v after it (timeout %v)",
		lost.at.Sub(cut), won.at.Sub(cut), timeout)
	if !won.elected || won.term != 2 {
		t.Fatalf("b's callback %+v, want elected in term 2", won)
	}
	if !lost.at.Before(won.at) {
		t.Errorf("a stepped down at %v, after b was elected at %v", lost.at, won.at)
	}
	if d := won.at.Sub(cut); d > timeout {
		t.Errorf("takeover %v after the cut, over the %v timeout", d, timeout)
	}
	if err := fencedWrite(context.Background(), admin, 1, "a"); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a's write while cut off: %v, want ErrDeposed", err)
	}
	p.resume()
	// a reconnects through the healed proxy and follows b.
	eventually(t, "a reads b's term after the cut healed", func() bool {
		info, ok := a.e.Leader()
		return ok && info.Term == 2
	})
	if err := fencedWrite(context.Background(), admin, 1, "a"); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a's write after the cut healed: %v, want ErrDeposed", err)
	}
	a.quiet(t, "a follows after the cut healed")
}

// TestNoTwoLeaders has two electors write, each fenced by the term it
// believes it leads, while the leader's session is ended again and again:
// in commit order the terms never go back, and each term's rows are all
// from the elector that won it.
func TestNoTwoLeaders(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	admin := connect(t, url)
	writesTable(t, admin)
	a, b := campaign(t, url, "a"), campaign(t, url, "b")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, c := range []*candidate{a, b} {
		conn := connect(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if term := c.e.Term(); term != 0 {
					_ = fencedWrite(ctx, conn, term, c.name)
				}
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
	}
	winners := map[int64]string{}
	merged := make(chan change, 128)
	for _, c := range []*candidate{a, b} {
		go func() {
			for ch := range c.changes {
				merged <- ch
			}
		}()
	}
	const rounds = 4
	for term := int64(1); term <= rounds; term++ {
		var won change
		for {
			select {
			case ch := <-merged:
				if ch.elected {
					won = ch
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no election of term %d", term)
			}
			if won.elected {
				break
			}
		}
		if won.term != term {
			t.Fatalf("%s elected in term %d, want %d", won.who, won.term, term)
		}
		winners[term] = won.who
		// Let the leader write, then end its session.
		eventually(t, "the leader of term "+strconv.FormatInt(term, 10)+" writes", func() bool {
			var n int
			if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM writes WHERE term = $1`, term).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n >= 5
		})
		if term < rounds {
			leader := map[string]*candidate{"a": a, "b": b}[won.who]
			terminate(t, admin, leader.e.PID())
		}
	}
	cancel()
	wg.Wait()
	a.stop()
	b.stop()
	close(a.changes)
	close(b.changes)

	rows, err := admin.Query(context.Background(), `SELECT id, term, who FROM writes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	var total int
	for rows.Next() {
		var id, term int64
		var who string
		if err := rows.Scan(&id, &term, &who); err != nil {
			t.Fatal(err)
		}
		total++
		if term < last {
			t.Errorf("row %d of term %d committed after a row of term %d", id, term, last)
		}
		last = term
		if winners[term] != who {
			t.Errorf("row %d written by %s in term %d, which %q won", id, who, term, winners[term])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d fenced writes over %d terms", total, rounds)
}

// proxy forwards TCP connections to a server and can stop forwarding
// without closing them, as a network cut or a paused peer would.
type proxy struct {
	ln     net.Listener
	target string

	mu sync.Mutex
	// mu guards the fields below.
	paused bool
	cond   *sync.Cond
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, host string, port int) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: net.JoinHostPort(host, strconv.Itoa(port))}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// rewrite is url with its host and port replaced by the proxy's.
func (p *proxy) rewrite(t *testing.T, raw string) string {
	t.Helper()
	u, err := neturl.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies src to dst, holding each chunk while the proxy is paused.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}

func (p *proxy) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

func (p *proxy) resume() {
	p.mu.Lock()
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.resume()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestTakeoverWaitsForAFencedWrite: a write that passed its fence before
// the leader's session ended holds back the next term until it commits, so
// it is ordered before the new leader's first read.
func TestTakeoverWaitsForAFencedWrite(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	admin, writer := connect(t, url), connect(t, url)
	writesTable(t, admin)
	a := campaign(t, url, "a")
	if ch := a.next(t, 10*time.Second, "elected"); !ch.elected || ch.term != 1 {
		t.Fatalf("%+v, want a elected in term 1", ch)
	}
	b := campaign(t, url, "b")
	ctx := context.Background()
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO writes (term, who) VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	if err := Fence(ctx, tx, "gateway", 1); err != nil {
		t.Fatalf("fence in term 1: %v", err)
	}
	terminate(t, admin, a.e.PID())
	eventually(t, "b's takeover waits on the fenced write's row lock", func() bool {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'simlock-leader' AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if info, _, err := Current(ctx, admin, "gateway"); err != nil || info.Term != 1 {
		t.Fatalf("Current = %+v %v while the fenced write is open, want term 1", info, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the write fenced before the session ended: %v", err)
	}
	if won := b.next(t, timeout, "b takes over after the write"); !won.elected || won.term != 2 {
		t.Fatalf("b's callback %+v, want elected in term 2", won)
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no URL", Options{Group: "gateway"}},
		{"no group", Options{URL: "postgres://127.0.0.1/x"}},
		{"timeout too short", Options{URL: "postgres://127.0.0.1/x", Group: "gateway", Timeout: time.Millisecond}},
	} {
		if _, err := New(tc.opts); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
	e, err := New(Options{URL: "postgres://127.0.0.1/x", Group: "gateway"})
	if err != nil || e.opts.Timeout != DefaultTimeout {
		t.Fatalf("New with the defaults: %v, timeout %v, want %v", err, e.opts.Timeout, DefaultTimeout)
	}
}
