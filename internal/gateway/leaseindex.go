package gateway

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/queue"
	"github.com/simlock/simlock/internal/store"
)

// Leases through a gateway are named <workerId>.<workerLeaseId>. A worker
// id may hold a '.' (ids are [A-Za-z0-9._:-]) and a worker's lease id
// ("lse_…") holds none, so the id is split at its last '.'.
const leaseIDSep = "."

// gatewayLeaseID names a worker's lease as the gateway hands it out.
func gatewayLeaseID(workerID, workerLeaseID string) string {
	return workerID + leaseIDSep + workerLeaseID
}

// splitLeaseID is gatewayLeaseID undone; false for an id that is not one.
func splitLeaseID(id string) (workerID, workerLeaseID string, ok bool) {
	i := strings.LastIndex(id, leaseIDSep)
	if i <= 0 || i == len(id)-1 {
		return "", "", false
	}
	return id[:i], id[i+1:], true
}

// requesterPrefix marks, in a worker's lease records, the requester ids of
// the leases a gateway asked for: gw:<gatewayInstanceId>:<requester>.
func requesterPrefix(instanceID string) string {
	return contract.GatewayRequesterPrefix + instanceID + ":"
}

// indexed is one lease the gateway granted, as its grant record says.
type indexed struct {
	// key is the gateway's unique name for the lease,
	// <workerId>.<workerLeaseId>, its grant record's key; id is the name
	// its owner knows it by: the id the requester chose, else key.
	key, id                           string
	workerID, workerLeaseID, deviceID string
	// requester is the fleet requester id (without the prefix); owner is
	// who the gateway authorized it for; chosen the id the requester
	// chose, unique within owner only.
	requester, owner, chosen string
	// requestID is the gateway's request that made it.
	requestID string
	grantedAt int64
	// When a snapshot of its worker was read after its grant, and so ends
	// it by leaving it out (reconcile): grantSeq is the worker's event seq
	// of the grant (contract.LeaseGrant.EventSeq), which a snapshot read
	// after it reaches, and grantLink the worker's link it was granted
	// over, before every read over a later one (both 0 for a lease loaded
	// at start: every snapshot is read after). From a worker that says no
	// seq, missed counts the consecutive snapshots it was not in, of those
	// read past grantGen, the generation of the worker's view when the
	// gateway granted it (a snapshot read at that generation or before
	// may have been read before the worker granted it).
	grantSeq  int64
	grantLink int
	missed    int
	grantGen  uint64
	// ending is why the gateway is ending the lease, while its release is
	// in flight: the worker's relayed end then carries the gateway's
	// reason (killed for release --all), not the worker's.
	ending string
	// granted is the worker's record of the lease as its grant answered
	// it (empty for one loaded at start): what a list shows of the lease
	// until a snapshot of the worker does.
	granted contract.LeaseRecord
	// told tells its holders once that it ended, whoever learns it first
	// (the worker's relayed end, or the release that ended it); a second
	// teller waits until the first is done.
	told *sync.Once
}

// keyIfChosen is e's key when its id was chosen ("" when its id is its
// key): what a lease record carries as its Key.
func (e *indexed) keyIfChosen() string {
	if e.id != e.key {
		return e.key
	}
	return ""
}

// record is e as the lease record its holders are told of: every field
// from the grant record, the device included, never from a worker's word.
func (e *indexed) record() contract.LeaseRecord {
	return contract.LeaseRecord{ID: e.id, Key: e.keyIfChosen(), DeviceID: e.deviceID, RequesterID: e.requester, OwnerID: e.owner, WorkerID: e.workerID}
}

// leaseIndex is the gateway's record of the leases it granted: in memory,
// loaded at start from the grant records and changed only by the gateway's
// own decisions (a grant it forwarded, an end it learned of), each change
// staged for the commit of the decision that made it. A worker's report can
// confirm or end an entry of its own, never add one or change whose it is.
// One lease per fleet requester; a chosen id unique within its owner. The
// queue's decision lock guards it.
type leaseIndex struct {
	prefix string
	byKey  map[string]*indexed
	// byChosen finds a lease by the id its owner chose, then its owner.
	byChosen    map[string]map[string]*indexed
	byRequester map[string]*indexed
	// byDevice finds the lease of a worker's device: a second grant of a
	// device the gateway holds a lease of is refused.
	byDevice map[workerThing]*indexed
	// withdrawn are the requests the gateway gave up waiting for on a
	// worker (its lease.request timed out or the uplink failed under it),
	// by worker and requester, with when: a lease the worker grants for
	// one later is nobody's, and is given back rather than indexed.
	withdrawn map[withdrawal]time.Time
	// loadedAt is when this run loaded the grant records (load): a lease
	// under the gateway's prefix that no record names, listed in a
	// worker's first snapshot of this run and granted before then, is
	// nobody's (reconcile). Its request's record may never have been
	// saved: a forward leaves while the decision that placed it commits
	// (queue.Start.Early), and a run can end between. Both conditions
	// hold for no grant of this run's own in flight, whatever the worker's
	// clock: the run forwards nothing to a worker before its first
	// snapshot.
	loadedAt time.Time
	// claimed are, by worker, the leases its last snapshot reported under
	// the gateway's prefix that the gateway did not grant: each is a
	// finding once, when first seen, not at every snapshot.
	claimed map[string]map[string]bool
	// applied are, by worker, the link and event seq of the newest
	// snapshot reconciled: one read before it (an older seq, or an older
	// link) is not.
	applied map[string]appliedSnapshot
	// ended are, by worker and worker lease id, the leases the index
	// forgot (released, expired, lost), with the seq of their grant: a
	// snapshot read before the end still lists one, which neither brings
	// it back nor is a finding. Each goes at the first snapshot read after
	// its grant that leaves it out (no snapshot after that lists it).
	ended map[string]map[string]int64
	// untold are, by worker and worker lease id, the leases a snapshot
	// ended (endedBySnapshot) whose end the worker has not relayed yet:
	// the event comes on the relay's path, which a status read may pass.
	// Their holders are told when it comes, with its reason (takeUntold).
	untold map[string]map[string]*indexed
	// dispatching reports whether a request of requester is forwarded to
	// workerID and its answer not judged yet (nil: none ever is). A lease
	// of that requester a snapshot lists, that the index does not hold,
	// may be the grant on its way: it is judged with that grant, not
	// taken for one the gateway never granted.
	dispatching func(workerID, requester string) bool
	// puts and ends are the grant records the decision under way made
	// and ended, for its commit (take).
	puts []store.Grant
	ends []string
}

type withdrawal struct{ workerID, requester string }

// appliedSnapshot is how new the last reconciled snapshot of a worker was.
type appliedSnapshot struct {
	link int
	seq  int64
}

// maxEnded bounds the ended leases remembered per worker: a worker whose
// snapshots never leave out a lease it ended (a lie) grows them by one per
// lease the gateway granted there, and past the bound one is forgotten (a
// stale snapshot that lists it is then a finding).
const maxEnded = 10_000

// workerThing names a device or a lease of one worker.
type workerThing struct{ workerID, id string }

// withdrawnFor bounds how long a withdrawal is remembered: longer than any
// start (a download included) takes on a worker. maxWithdrawn bounds how
// many are: a worker that answers no request grows them by one per
// requester the fleet queue sends it, and past the bound the oldest is
// forgotten (its lease, should the worker grant it after all, is then a
// finding, and ends with its TTL on the worker instead of given back).
const (
	withdrawnFor = 24 * time.Hour
	maxWithdrawn = 10_000
)

func newLeaseIndex(instanceID string) *leaseIndex {
	return &leaseIndex{prefix: requesterPrefix(instanceID), byKey: map[string]*indexed{}, byChosen: map[string]map[string]*indexed{},
		byRequester: map[string]*indexed{}, byDevice: map[workerThing]*indexed{}, withdrawn: map[withdrawal]time.Time{},
		claimed: map[string]map[string]bool{}, applied: map[string]appliedSnapshot{}, ended: map[string]map[string]int64{}}
}

// The ways a grant can contradict the index: the worker granted again a
// lease id or a device the gateway holds a lease of (a double grant), or
// the request's requester or chosen id is held already.
var (
	errDoubleLease  = errors.New("the worker granted a lease id the gateway already holds a lease under")
	errDoubleDevice = errors.New("the worker granted a device the gateway already holds a lease of")
	errRequesterHas = errors.New("the requester holds a lease already")
	errChosenTaken  = errors.New("the owner holds a lease with that id already")
)

// withdraw notes that the gateway gave up waiting for requester's request
// on workerID.
func (x *leaseIndex) withdraw(workerID, requester string, at time.Time) {
	k := withdrawal{workerID, requester}
	if _, ok := x.withdrawn[k]; !ok && len(x.withdrawn) >= maxWithdrawn {
		var oldest withdrawal
		var first time.Time
		for o, t := range x.withdrawn {
			if first.IsZero() || t.Before(first) {
				oldest, first = o, t
			}
		}
		delete(x.withdrawn, oldest)
	}
	x.withdrawn[k] = at
}

// load puts the grant records the store kept into the index, at start:
// they are already stored, so nothing is staged.
func (x *leaseIndex) load(gs []store.Grant, now time.Time) {
	x.loadedAt = now
	for _, g := range gs {
		if _, err := x.insert(g); err != nil {
			// Two records that contradict each other: the older wins
			// (records are loaded oldest first) and the other goes.
			x.ends = append(x.ends, g.Key)
		}
	}
}

// add indexes a lease the gateway was just granted, as its grant record g
// says, and stages g for the decision's commit. It refuses, changing
// nothing, a grant that repeats a lease id or a device the gateway holds a
// lease of on that worker, or whose requester or chosen id is held.
func (x *leaseIndex) add(g store.Grant) (*indexed, error) {
	e, err := x.insert(g)
	if err != nil {
		return nil, err
	}
	x.puts = append(x.puts, g)
	// Granted to the gateway's own call: whatever it withdrew from this
	// worker for the requester is settled (the worker holds one open
	// request or lease per requester).
	delete(x.withdrawn, withdrawal{g.WorkerID, g.RequesterID})
	return e, nil
}

func (x *leaseIndex) insert(g store.Grant) (*indexed, error) {
	e := &indexed{told: new(sync.Once), key: g.Key, id: g.Key, workerID: g.WorkerID, workerLeaseID: g.WorkerLeaseID, deviceID: g.DeviceID,
		requester: g.RequesterID, owner: g.OwnerID, chosen: g.ChosenID, requestID: g.RequestID, grantedAt: g.GrantedAt}
	if e.chosen != "" {
		e.id = e.chosen
	}
	switch {
	case x.byKey[e.key] != nil:
		return nil, errDoubleLease
	case x.byDevice[workerThing{e.workerID, e.deviceID}] != nil:
		return nil, errDoubleDevice
	case x.byRequester[e.requester] != nil:
		return nil, errRequesterHas
	case e.chosen != "" && x.byChosen[e.chosen][e.owner] != nil:
		return nil, errChosenTaken
	}
	x.byKey[e.key] = e
	x.byRequester[e.requester] = e
	x.byDevice[workerThing{e.workerID, e.deviceID}] = e
	if e.chosen != "" {
		if x.byChosen[e.chosen] == nil {
			x.byChosen[e.chosen] = map[string]*indexed{}
		}
		x.byChosen[e.chosen][e.owner] = e
	}
	return e, nil
}

// contradicted is the lease a grant the index refused as a double grant
// repeats: the one under its key, else the one of its device (nil when
// none).
func (x *leaseIndex) contradicted(g store.Grant) *indexed {
	if e := x.byKey[g.Key]; e != nil {
		return e
	}
	return x.byDevice[workerThing{g.WorkerID, g.DeviceID}]
}

// take hands the grant records staged since the last take to the
// decision's commit.
func (x *leaseIndex) take() (puts []store.Grant, ends []string) {
	puts, ends = x.puts, x.ends
	x.puts, x.ends = nil, nil
	return puts, ends
}

// ofKey finds a lease by its unique key.
func (x *leaseIndex) ofKey(key string) (*indexed, bool) {
	e, ok := x.byKey[key]
	return e, ok
}

// ofWorker finds a lease by its worker and the worker's id for it.
func (x *leaseIndex) ofWorker(workerID, workerLeaseID string) (*indexed, bool) {
	return x.ofKey(gatewayLeaseID(workerID, workerLeaseID))
}

// ofRequester finds the lease a fleet requester holds.
func (x *leaseIndex) ofRequester(requester string) (*indexed, bool) {
	e, ok := x.byRequester[requester]
	return e, ok
}

// heldBy reports whether owner holds a lease with the chosen id: the
// scope in which a chosen id is taken.
func (x *leaseIndex) heldBy(owner, id string) bool {
	return x.byChosen[id][owner] != nil
}

// resolve finds the lease the caller names id, and checks the caller may
// act on it, by the rule a worker's engine uses too
// (contract.ResolveLeaseName): a chosen id within the caller's own leases,
// then a key (<workerId>.<workerLeaseId>); for an admin, another owner's
// chosen id when only one lease has it.
func (x *leaseIndex) resolve(c queue.Caller, id string) (*indexed, error) {
	e, cerr := contract.ResolveLeaseName[*indexed](c.Principal, c.Admin, id, x)
	if cerr != nil {
		return nil, cerr
	}
	return e, nil
}

// ByKey, ChosenBy and Name are the index as contract.ResolveLeaseName
// reads it; the decision lock must be held.
func (x *leaseIndex) ByKey(key string) (*indexed, bool) {
	e, ok := x.byKey[key]
	return e, ok
}

func (x *leaseIndex) ChosenBy(id string) map[string]*indexed { return x.byChosen[id] }

func (x *leaseIndex) Name(e *indexed) contract.LeaseName {
	return contract.LeaseName{Key: e.key, Owner: e.owner, Chosen: e.chosen != ""}
}

// remove forgets a lease and stages the end of its grant record: it ended,
// or its worker answered UNKNOWN_LEASE, which proves the record wrong.
func (x *leaseIndex) remove(e *indexed) {
	if x.byKey[e.key] != e {
		return
	}
	delete(x.byKey, e.key)
	if x.byRequester[e.requester] == e {
		delete(x.byRequester, e.requester)
	}
	if k := (workerThing{e.workerID, e.deviceID}); x.byDevice[k] == e {
		delete(x.byDevice, k)
	}
	if of := x.byChosen[e.chosen]; e.chosen != "" && of[e.owner] == e {
		delete(of, e.owner)
		if len(of) == 0 {
			delete(x.byChosen, e.chosen)
		}
	}
	x.ends = append(x.ends, e.key)
	ended := x.ended[e.workerID]
	if ended == nil {
		ended = map[string]int64{}
		x.ended[e.workerID] = ended
	}
	if len(ended) >= maxEnded {
		for id := range ended {
			delete(ended, id)
			break
		}
	}
	ended[e.workerLeaseID] = e.grantSeq
}

// endedBySnapshot forgets e, which a snapshot read after its grant left
// out: the worker ended it. It is kept as untold until the worker's event
// of that end is relayed (takeUntold), so its holders hear why it ended.
func (x *leaseIndex) endedBySnapshot(e *indexed) {
	x.remove(e)
	if x.untold == nil {
		x.untold = map[string]map[string]*indexed{}
	}
	u := x.untold[e.workerID]
	if u == nil {
		u = map[string]*indexed{}
		x.untold[e.workerID] = u
	}
	if len(u) >= maxEnded {
		for id := range u {
			delete(u, id)
			break
		}
	}
	u[e.workerLeaseID] = e
}

// takeUntold is the lease of workerID's workerLeaseID that a snapshot
// ended before its end was relayed, if any, and forgets it: its holders
// are to be told now.
func (x *leaseIndex) takeUntold(workerID, workerLeaseID string) (*indexed, bool) {
	e, ok := x.untold[workerID][workerLeaseID]
	if !ok {
		return nil, false
	}
	delete(x.untold[workerID], workerLeaseID)
	if len(x.untold[workerID]) == 0 {
		delete(x.untold, workerID)
	}
	return e, true
}

// finding is a lease a worker reported that the gateway does not
// believe: one it did not grant (grant nil), or one that contradicts its
// grant record. It is logged and counted on the worker's view, and
// otherwise ignored.
type finding struct {
	lease contract.LeaseRecord
	grant *indexed
}

// what says what the worker claimed. It is made only for the finding that
// is logged: a snapshot may hold tens of thousands of them.
func (fd finding) what() string {
	l := fd.lease
	if e := fd.grant; e != nil {
		return fmt.Sprintf("lease %s on device %s for requester %q owned by %q, granted on device %s for %q owned by %q",
			l.ID, l.DeviceID, clip(l.RequesterID), clip(l.OwnerID), e.deviceID, e.requester, e.owner)
	}
	return fmt.Sprintf("lease %s on device %s for requester %q owned by %q, which the gateway did not grant",
		l.ID, l.DeviceID, clip(l.RequesterID), clip(l.OwnerID))
}

// reconcile checks one snapshot of workerID's active leases, r, against
// the leases the gateway granted there. A snapshot older than the last one
// reconciled (newer) changes nothing: a snapshot waits for the decision
// lock and the database's, so one read before another, or before a grant
// or an end, may be reconciled after it. A lease of the gateway's it lists
// is confirmed; one it lacks is ended if the snapshot was read after its
// grant (readAfter: its event seq reaches the grant's, or it came over a
// later uplink). From a worker that says no seq, a lease is ended at its
// second miss in a row, counting only the snapshots read past its grantGen,
// and one miss of those is grace (a grant that lands between the read of a
// snapshot and its answer is not in it). A lease the index ended that the
// snapshot still lists was read before its end: neither back, nor a
// finding. A lease it lists under the gateway's requester prefix that the gateway
// did not grant, or that contradicts the grant record (another
// device, requester or owner), is a finding and nothing more: it never
// becomes the gateway's, and never routes a call. A lease granted for a
// request the gateway withdrew is returned, to be given back. The worker's
// own leases (any other requester) and other workers' entries are left
// alone.
func (x *leaseIndex) reconcile(workerID string, r statusRead, now time.Time) (giveBack []string, found []finding) {
	for k, at := range x.withdrawn {
		if now.Sub(at) > withdrawnFor {
			delete(x.withdrawn, k)
		}
	}
	_, again := x.applied[workerID]
	first := !again && !x.loadedAt.IsZero()
	if !x.newer(workerID, r) {
		return nil, nil
	}
	seen := map[*indexed]bool{}
	claimed := map[string]bool{}
	listed := map[string]bool{}
	for _, l := range r.leases {
		listed[l.ID] = true
		requester, ours := strings.CutPrefix(l.RequesterID, x.prefix)
		e, granted := x.ofWorker(workerID, l.ID)
		_, ended := x.ended[workerID][l.ID]
		switch {
		case ended && !granted:
			// Read before its end: neither back, nor a finding.
		case granted:
			seen[e] = true
			e.missed = 0
			if l.DeviceID != e.deviceID || l.OwnerID != e.owner || !ours || requester != e.requester {
				if !x.claimed[workerID][l.ID] {
					found = append(found, finding{lease: l, grant: e})
				}
				claimed[l.ID] = true
			}
		case !ours:
		case x.withdrawnFrom(workerID, requester):
			delete(x.withdrawn, withdrawal{workerID, requester})
			giveBack = append(giveBack, l.ID)
		case x.settledBefore(requester, l.GrantedAt):
			giveBack = append(giveBack, l.ID)
		case first && l.GrantedAt < x.loadedAt.UnixMilli():
			giveBack = append(giveBack, l.ID)
		case x.dispatching != nil && x.dispatching(workerID, requester):
			// Read between the worker's grant and the gateway's judging
			// it: a later snapshot says what came of it.
		default:
			if !x.claimed[workerID][l.ID] {
				found = append(found, finding{lease: l})
			}
			claimed[l.ID] = true
		}
	}
	if len(claimed) > 0 {
		x.claimed[workerID] = claimed
	} else {
		delete(x.claimed, workerID)
	}
	for id, grantSeq := range x.ended[workerID] {
		if !listed[id] && readAfter(r, grantSeq, 0) {
			delete(x.ended[workerID], id)
		}
	}
	if len(x.ended[workerID]) == 0 {
		delete(x.ended, workerID)
	}
	for _, e := range x.byKey {
		if e.workerID != workerID || seen[e] {
			continue
		}
		switch {
		case r.link > e.grantLink || (r.seq > 0 && e.grantSeq > 0):
			// The worker says which snapshots follow the grant.
			if readAfter(r, e.grantSeq, e.grantLink) {
				x.endedBySnapshot(e)
			}
		case r.gen <= e.grantGen:
		default:
			if e.missed++; e.missed >= 2 {
				x.endedBySnapshot(e)
			}
		}
	}
	return giveBack, found
}

// newer reports whether r, a snapshot of workerID, was read after the last
// one reconciled (by its link, then its seq; one of a worker that says no
// seq is taken in the order it comes, which is the order of the reads),
// and records it as the last if so.
func (x *leaseIndex) newer(workerID string, r statusRead) bool {
	last, ok := x.applied[workerID]
	if ok && (r.link < last.link || (r.link == last.link && r.seq > 0 && r.seq < last.seq)) {
		return false
	}
	x.applied[workerID] = appliedSnapshot{link: r.link, seq: r.seq}
	return true
}

// readAfter reports whether snapshot r is known to have been read after a
// grant of event seq grantSeq over link grantLink (0, 0: one loaded at
// start, before every snapshot): over a later link, or at a seq that
// reaches the grant's. A snapshot or grant without a seq says nothing,
// unless its link does.
func readAfter(r statusRead, grantSeq int64, grantLink int) bool {
	switch {
	case r.link > grantLink:
		return true
	case r.link < grantLink:
		// Over a link that ended before the grant's: before it. (Seqs
		// of two links may be of two logs.)
		return false
	}
	return r.seq > 0 && grantSeq > 0 && r.seq >= grantSeq
}

// settle notes that the gateway's previous run left requester's request
// open at at (the gateway put it back in line, Restore): a lease any worker
// granted for it before then, which the gateway never recorded, is
// nobody's, and is given back when a snapshot shows it (settledBefore).
// A lease the gateway grants the requester later is indexed, and so never
// taken for it; the time tells apart one a worker granted for a later
// request before the gateway's grant was recorded.
func (x *leaseIndex) settle(requester string, at time.Time) {
	x.withdraw("", requester, at)
}

// settledBefore reports whether requester had a request settled at a
// restart after grantedAt, a worker's grant time of a lease for it.
func (x *leaseIndex) settledBefore(requester string, grantedAt int64) bool {
	at, ok := x.withdrawn[withdrawal{"", requester}]
	return ok && requester != "" && grantedAt < at.UnixMilli()
}

func (x *leaseIndex) withdrawnFrom(workerID, requester string) bool {
	_, ok := x.withdrawn[withdrawal{workerID, requester}]
	return ok && requester != ""
}

// disconnected forgets what workerID's snapshots claimed: a new uplink
// starts over. (Which snapshot is newest it keeps: a read of the link that
// ended may still be on its way, and is older than any over the next.)
func (x *leaseIndex) disconnected(workerID string) { delete(x.claimed, workerID) }

// forget drops what the index keeps of workerID but its leases (which the
// caller ends): the gateway forgot the worker.
func (x *leaseIndex) forget(workerID string) {
	delete(x.claimed, workerID)
	delete(x.applied, workerID)
	delete(x.ended, workerID)
	delete(x.untold, workerID)
	for k := range x.withdrawn {
		if k.workerID == workerID {
			delete(x.withdrawn, k)
		}
	}
}

// ofWorkerAll lists the leases the gateway granted on workerID.
func (x *leaseIndex) ofWorkerAll(workerID string) []*indexed {
	var out []*indexed
	for _, e := range x.byKey {
		if e.workerID == workerID {
			out = append(out, e)
		}
	}
	return out
}

// named reports whether workerLeaseID is a lease the gateway granted on
// workerID: one it has a name of its own for.
func (x *leaseIndex) named(workerID, workerLeaseID string) bool {
	_, ok := x.ofWorker(workerID, workerLeaseID)
	return ok
}
