// Package leader elects one leader among the replicas of a group (the
// gateways sharing one PostgreSQL database) and fences the writes of a
// leader that has been deposed.
//
// Leadership is a session-level advisory lock, held by an [Elector] on a
// connection of its own (not a pool's). The lock is the lease: PostgreSQL
// releases it the moment the holder's session ends, whether its process
// was killed, its machine lost, or its session ended by the server because
// it stayed silent (the elector sets idle_session_timeout on its session,
// so a leader cut off from the database, or paused, loses its session
// within the leader timeout). Followers try the lock every tenth of the
// timeout and take over when it is free.
//
// Each takeover increments the group's term in the leaders table (one row
// per group: term, the leader's advertised URL, since when, and its
// session's pid). A leader's writes call [Fence] inside their transaction,
// last before COMMIT: it reads the row FOR SHARE and refuses with
// [ErrDeposed] unless the term is the writer's and the session that won
// it still holds the lock. The share lock orders the check against the
// next takeover, whose term update waits for it, so a write fenced with
// term n commits before term n+1 begins or not at all. A deposed leader
// that has not noticed yet therefore cannot commit.
//
// A leader steps down on its own (OnDeposed) when a heartbeat on its
// session fails or does not answer within half the timeout, which is
// before the server ends its silent session; the fence covers a leader
// that is paused past that point and resumes.
//
// Locks: the election's lock is the two-key advisory lock (0x736d6c03,
// crc32 of the group name masked to 31 bits), a key space apart from the
// single-key locks the store takes; the leaders table is created, if
// missing, under the single-key transaction lock 0x73696d6c6f636b03.
// Session advisory locks need a session: between an elector and the
// server there may be no pooler in transaction mode.
//
// An Elector's methods are safe for concurrent use; Run is called once.
package leader

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrDeposed is Fence's refusal: the writer's term is not the current
// one, or the session that won it has ended.
var ErrDeposed = errors.New("leader: deposed: a newer term leads or this term's session has ended")

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 5 * time.Second

const (
	// lockClass is the first key of every group's election lock.
	lockClass = 0x736d6c03
	// schemaLock serializes the creation of the leaders table.
	schemaLock = 0x73696d6c6f636b03 // "simlock" and 3
)

// schema is the leaders table, created by the first elector to connect.
const schema = `CREATE TABLE IF NOT EXISTS leaders (
	name  text PRIMARY KEY,
	term  bigint NOT NULL,
	url   text NOT NULL,
	since timestamptz NOT NULL,
	pid   integer NOT NULL
)`

// Clock is the time source of an Elector; tests may replace it.
type Clock interface {
	Now() time.Time
	After(time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure an Elector. URL and Group are required.
type Options struct {
	// URL is the database's postgres:// URL.
	URL string
	// Group names what is led; electors of one group compete.
	Group string
	// AdvertiseURL is where followers and clients reach this replica
	// when it leads; it is written into the leaders row.
	AdvertiseURL string
	// Timeout bounds how long leadership stays with a leader whose
	// session went silent, and so how fast a follower takes over:
	// DefaultTimeout when 0.
	Timeout time.Duration
	// OnElected is called when this elector has won term; OnDeposed when
	// it has lost it (or Run is ending). Both are called from Run's
	// goroutine, in order, and should return promptly.
	OnElected func(term int64)
	OnDeposed func(term int64)
	// Clock is time.Now and time.After when nil.
	Clock Clock
}

// Info is who leads a group.
type Info struct {
	Term  int64
	URL   string
	Since time.Time
	// Live is whether the session that won Term still holds the lock;
	// false while the group waits for a successor.
	Live bool
}

// Elector campaigns for leadership of one group.
type Elector struct {
	opts Options
	key  int32

	mu sync.Mutex
	// mu guards the fields below.
	term int64 // the term this elector leads, 0 when it does not
	seen Info  // the group's leader as last read
	pid  uint32
}

// New is an Elector; it does nothing until Run.
func New(opts Options) (*Elector, error) {
	if opts.URL == "" || opts.Group == "" {
		return nil, errors.New("leader: a database URL and a group name are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Timeout < 100*time.Millisecond {
		return nil, fmt.Errorf("leader: timeout %v is below 100ms", opts.Timeout)
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.OnElected == nil {
		opts.OnElected = func(int64) {}
	}
	if opts.OnDeposed == nil {
		opts.OnDeposed = func(int64) {}
	}
	return &Elector{opts: opts, key: groupKey(opts.Group)}, nil
}

// groupKey is the second key of group's election lock.
func groupKey(group string) int32 {
	return int32(crc32.ChecksumIEEE([]byte(group)) & 0x7fffffff)
}

// Term is the term this elector leads, 0 when it is not the leader.
func (e *Elector) Term() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term
}

// Leader is the group's leader as this elector last read it (at most a
// tenth of the timeout ago while it follows); ok is false before the
// first read.
func (e *Elector) Leader() (Info, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen, e.seen.Term != 0
}

// PID is the backend pid of the elector's current session, 0 for none.
func (e *Elector) PID() uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid
}

// Fence is Fence for this elector's group.
func (e *Elector) Fence(ctx context.Context, tx Querier, term int64) error {
	return Fence(ctx, tx, e.opts.Group, term)
}

// Querier is what Fence and Current read through: a pgx.Tx, a pgx.Conn
// or a pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Fence refuses with ErrDeposed unless term leads group and the session
// that won it is alive. Call it in the write's transaction, last before
// COMMIT: the row stays share-locked until the transaction ends, which
// holds back the next takeover (so a transaction left open would delay
// it; sessions that write should set idle_in_transaction_session_timeout
// below the leader timeout).
func Fence(ctx context.Context, tx Querier, group string, term int64) error {
	var cur int64
	var live bool
	err := tx.QueryRow(ctx, `SELECT l.term, EXISTS (SELECT 1 FROM pg_locks k
		WHERE k.locktype = 'advisory' AND k.classid = $2::int8::oid AND k.objid = $3::int8::oid
		AND k.objsubid = 2 AND k.pid = l.pid AND k.granted)
		FROM leaders l WHERE l.name = $1 FOR SHARE OF l`, group, int64(lockClass), int64(groupKey(group))).Scan(&cur, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fence term %d: %w", term, ErrDeposed)
	}
	if err != nil {
		return fmt.Errorf("fence term %d: %w", term, err)
	}
	if cur != term || !live {
		return fmt.Errorf("fence term %d (current %d, live %t): %w", term, cur, live, ErrDeposed)
	}
	return nil
}

// Current reads who leads group; ok is false when no elector has won yet.
func Current(ctx context.Context, q Querier, group string) (info Info, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT l.term, l.url, l.since, EXISTS (SELECT 1 FROM pg_locks k
		WHERE k.locktype = 'advisory' AND k.classid = $2::int8::oid AND k.objid = $3::int8::oid
		AND k.objsubid = 2 AND k.pid = l.pid AND k.granted)
		FROM leaders l WHERE l.name = $1`, group, int64(lockClass), int64(groupKey(group))).Scan(&info.Term, &info.URL, &info.Since, &info.Live)
	if errors.Is(err, pgx.ErrNoRows) {
		return Info{}, false, nil
	}
	if err != nil {
		return Info{}, false, fmt.Errorf("leader: read %s: %w", group, err)
	}
	return info, true, nil
}

// poll is how often a follower tries the lock, and the pause before a
// lost connection is dialled again.
func (e *Elector) poll() time.Duration { return e.opts.Timeout / 10 }

// Run campaigns until ctx ends: it follows while another leads, calls
// OnElected when it wins and OnDeposed when it loses, and campaigns again.
// Leadership ends with ctx (the session is closed, so a follower takes
// over at once). It returns ctx's error.
func (e *Elector) Run(ctx context.Context) error {
	for {
		conn, term, err := e.campaign(ctx)
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.term = term
		e.mu.Unlock()
		e.opts.OnElected(term)
		e.hold(ctx, conn, term)
		e.mu.Lock()
		e.term, e.pid = 0, 0
		e.mu.Unlock()
		// Closing ends the session, which releases the lock now rather
		// than at the server's timeout.
		closeCtx, cancel := context.WithTimeout(context.Background(), e.poll())
		_ = conn.Close(closeCtx)
		cancel()
		e.opts.OnDeposed(term)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// campaign connects and tries the lock until it wins, then takes the next
// term. It fails only when ctx ends.
func (e *Elector) campaign(ctx context.Context) (*pgx.Conn, int64, error) {
	for {
		conn, err := e.connect(ctx)
		if err == nil {
			var term int64
			term, err = e.follow(ctx, conn)
			if err == nil {
				return conn, term, nil
			}
			closeCtx, cancel := context.WithTimeout(context.Background(), e.poll())
			_ = conn.Close(closeCtx)
			cancel()
			e.mu.Lock()
			e.pid = 0
			e.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-e.opts.Clock.After(e.poll()):
		}
	}
}

// connect opens the elector's own session: silent for longer than the
// server's idle_session_timeout, it is ended by the server, which frees
// the lock of a leader that cannot reach the database.
func (e *Elector) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(e.opts.URL)
	if err != nil {
		return nil, errors.New("leader: the connection URL cannot be parsed")
	}
	cfg.RuntimeParams["application_name"] = "simlock-leader"
	cfg.RuntimeParams["idle_session_timeout"] = strconv.FormatInt(e.idleTimeout().Milliseconds(), 10)
	dctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(dctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := ensureSchema(dctx, conn); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	e.mu.Lock()
	e.pid = conn.PgConn().PID()
	e.mu.Unlock()
	return conn, nil
}

// idleTimeout is when the server ends a silent elector's session: after
// the leader's own deadline (half the timeout) and early enough that a
// follower's next poll falls within the timeout.
func (e *Elector) idleTimeout() time.Duration { return e.opts.Timeout * 3 / 5 }

func ensureSchema(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, schema); err != nil {
		return fmt.Errorf("leader: create the leaders table: %w", err)
	}
	return tx.Commit(ctx)
}

// follow tries the lock every poll, reading the leaders row between
// tries, until it wins; then it takes the next term. An error means the
// session is unusable.
func (e *Elector) follow(ctx context.Context, conn *pgx.Conn) (int64, error) {
	for {
		qctx, cancel := context.WithTimeout(ctx, e.opts.Timeout/2)
		var won bool
		err := conn.QueryRow(qctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(lockClass), e.key).Scan(&won)
		if err == nil && !won {
			var info Info
			var ok bool
			if info, ok, err = Current(qctx, conn, e.opts.Group); err == nil && ok {
				e.mu.Lock()
				e.seen = info
				e.mu.Unlock()
			}
		}
		cancel()
		if err != nil {
			return 0, err
		}
		if won {
			return e.takeOver(ctx, conn)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-e.opts.Clock.After(e.poll()):
		}
	}
}

// takeOver writes the next term into the leaders row. The update waits
// for writes still fenced with the old term to finish.
func (e *Elector) takeOver(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var info Info
	err := conn.QueryRow(ctx, `INSERT INTO leaders (name, term, url, since, pid)
		VALUES ($1, 1, $2, now(), pg_backend_pid())
		ON CONFLICT (name) DO UPDATE SET term = leaders.term + 1, url = EXCLUDED.url,
			since = EXCLUDED.since, pid = EXCLUDED.pid
		RETURNING term, url, since`, e.opts.Group, e.opts.AdvertiseURL).Scan(&info.Term, &info.URL, &info.Since)
	if err != nil {
		return 0, fmt.Errorf("leader: take the next term: %w", err)
	}
	info.Live = true
	e.mu.Lock()
	e.seen = info
	e.mu.Unlock()
	return info.Term, nil
}

// hold keeps leadership until ctx ends or the session fails: a heartbeat
// every fifth of the timeout, each allowed until half the timeout after
// the last one that succeeded was sent. A leader that cannot confirm its
// session in that time steps down before the server would end it.
func (e *Elector) hold(ctx context.Context, conn *pgx.Conn, term int64) {
	lastOK := e.opts.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.opts.Clock.After(e.opts.Timeout / 5):
		}
		sent := e.opts.Clock.Now()
		deadline := lastOK.Add(e.opts.Timeout / 2)
		if !sent.Before(deadline) {
			return
		}
		hctx, cancel := context.WithTimeout(ctx, deadline.Sub(sent))
		var cur int64
		err := conn.QueryRow(hctx, `SELECT term FROM leaders WHERE name = $1 AND pid = pg_backend_pid()`, e.opts.Group).Scan(&cur)
		cancel()
		if err != nil || cur != term {
			return
		}
		// A reply that came back after the deadline does not extend it:
		// the server may already be ending the session.
		if e.opts.Clock.Now().After(deadline) {
			return
		}
		lastOK = sent
	}
}
