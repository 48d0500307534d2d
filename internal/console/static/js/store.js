// What the page knows of the daemon: the answers of the read routes, the
// events it has seen, the journeys of waiting requests, the job the job
// page shows, and what is derived from them (what needs attention). Views
// read it; the live layer writes it.

import { failedRows } from './jobs.js';
import { Journeys } from './progress.js';

// MAX_EVENTS is how many events the page keeps, the newest.
export const MAX_EVENTS = 10000;

// REQUEST_KEEP_MS is how long the daemon keeps a settled request
// (lease.requestRetentionMs by default): a failed request older than that
// can no longer be retried, so the page stops offering it.
export const REQUEST_KEEP_MS = 10 * 60 * 1000;

// FAILED_INSTALL_MS is how long a failed install stays under Attention,
// counted from its end on the daemon's clock.
export const FAILED_INSTALL_MS = 24 * 60 * 60 * 1000;

// The lease.rejected reasons that are no failure to look into: the
// requester gave up or was told no at once, or an operator ended it.
const NOT_FAILURES = new Set(['cancelled', 'killed', 'no-wait', 'unresolvable-spec']);

// EventLog keeps the newest events, each once (by id), in seq order.
export class EventLog {
  constructor(max = MAX_EVENTS) {
    this.max = max;
    this.byId = new Map();
    this.list = []; // oldest first
    this.lastSeq = 0;
    this.version = 0;
  }

  // add takes events in any order and returns those not seen before, in
  // seq order.
  add(events) {
    const fresh = [];
    for (const ev of events) {
      if (!ev || !ev.id || this.byId.has(ev.id)) continue;
      this.byId.set(ev.id, ev);
      fresh.push(ev);
    }
    if (fresh.length === 0) return fresh;
    fresh.sort((a, b) => a.seq - b.seq);
    const last = this.list[this.list.length - 1];
    this.list.push(...fresh);
    if (last && fresh[0].seq < last.seq) this.list.sort((a, b) => a.seq - b.seq);
    if (this.list.length > this.max) {
      const gone = this.list.splice(0, this.list.length - this.max);
      for (const ev of gone) this.byId.delete(ev.id);
    }
    this.lastSeq = Math.max(this.lastSeq, fresh[fresh.length - 1].seq);
    this.version++;
    return fresh;
  }

  get size() { return this.list.length; }
}

// kindOf puts an event in one of the Events tab's filters.
export function kindOf(name) {
  if (name.startsWith('lease.')) return 'leases';
  if (name.startsWith('device.')) return 'devices';
  if (name.startsWith('worker.') || name === 'request.dispatched') return 'workers';
  if (name.startsWith('component.')) return 'components';
  return 'other';
}

export const KINDS = ['leases', 'devices', 'workers', 'components', 'other'];

export class Store {
  // daemonNow is the daemon's time now (epoch ms), as the page can tell.
  constructor({ daemonNow } = {}) {
    this.daemonNow = daemonNow || (() => Date.now());
    this.status = null; // GET /v1/status
    this.statusAt = 0; // when it was read (browser ms)
    this.workers = null; // GET /v1/workers
    this.workerViews = new Map(); // id -> GET /v1/workers/{id}
    this.failedList = []; // GET /v1/lease-requests?state=failed
    this.catalog = null; // GET /v1/catalog
    this.jobLists = { running: [], failed: [], succeeded: [] }; // GET /v1/jobs?state=running, ?state=failed, ?state=succeeded
    this.job = null; // the job page's JobWatch
    this.usage = null; // GET /v1/usage of the last hour, while the Workers tab shows
    this.usageError = null; // why the last read of it failed (an ApiError or Unreachable)
    this.events = new EventLog();
    this.journeys = new Journeys();
    this.deviceNotes = new Map(); // device key -> why it was quarantined, from events
    this.failed = new Map(); // request id -> a failed request heard of in events
    this.retried = new Set(); // request and device keys retried from this page
    this.actions = new Map(); // key -> {busy, message, ok}: a Retry's outcome
    this.tokenLabels = new Map(); // token id -> its label: an HTTP requester's name
    this.version = 0;
  }

  get mode() { return (this.status && this.status.daemon && this.status.daemon.mode) || 'worker'; }
  get gateway() { return this.mode === 'gateway'; }

  setStatus(st, now) {
    this.status = st;
    this.statusAt = now;
    this.journeys.update(st.waiting || [], now);
    this.version++;
  }

  setWorkers(doc) { this.workers = doc; this.version++; }
  setTokens(doc) {
    this.tokenLabels = new Map((doc && doc.tokens || []).filter((t) => t.label).map((t) => [t.id, t.label]));
    this.version++;
  }

  // who names a requester for people: an HTTP agent by its token's label
  // (its requester id is the token's id), anyone else by the id it gave.
  who(requesterId) { return this.tokenLabels.get(requesterId) || requesterId || ''; }
  setWorkerView(id, view) { this.workerViews.set(id, view); this.version++; }
  setFailed(doc) { this.failedList = (doc && doc.requests) || []; this.failedAt = Date.now(); this.version++; }
  setCatalog(doc) { this.catalog = doc; this.version++; }
  setJobs(state, doc) { this.jobLists[state] = (doc && doc.jobs) || []; this.version++; }
  setUsage(doc) { this.usage = doc; this.usageError = null; this.version++; }
  setUsageError(e) { this.usageError = e; this.version++; }

  // jobsOf lists the running and failed jobs, newest first, each once;
  // with a worker id, only those with a row for that worker.
  jobsOf(workerId) {
    const seen = new Set();
    const out = [];
    for (const j of [...this.jobLists.running, ...this.jobLists.failed]) {
      if (seen.has(j.id)) continue;
      seen.add(j.id);
      if (workerId && !(j.workers || []).some((w) => w.workerId === workerId)) continue;
      out.push(j);
    }
    return out.sort((a, b) => b.createdAt - a.createdAt);
  }

  // failedInstalls are the installs that failed in the last
  // FAILED_INSTALL_MS and that no later install of the same runtime made
  // good on every worker that failed, newest first.
  failedInstalls() {
    const now = this.daemonNow();
    const madeGood = (j) => (j.workers || []).filter((w) => w.outcome !== 'installed').every((w) =>
      this.jobLists.succeeded.concat(this.jobLists.failed).some((later) => later.createdAt > j.createdAt &&
        later.spec.platform === j.spec.platform && later.spec.version === j.spec.version &&
        (later.workers || []).some((r) => r.workerId === w.workerId && r.outcome === 'installed')));
    return this.jobLists.failed.filter((j) => now - (j.endedAt || j.createdAt) < FAILED_INSTALL_MS && !madeGood(j))
      .sort((a, b) => (b.endedAt || b.createdAt) - (a.endedAt || a.createdAt));
  }

  // ingest takes events (replayed or live) and learns from the new ones
  // what the lists do not say: how a request ended, why a device was
  // quarantined. live says they arrive as they happen (now is then the
  // moment the request ended, as far as the page can tell); clockOffset
  // turns an event's daemon time into the browser's.
  ingest(events, { now, live, clockOffset }) {
    const fresh = this.events.add(events);
    for (const ev of fresh) this.learn(ev, live ? now : ev.timestamp - clockOffset, now);
    if (fresh.length) this.version++;
    return fresh;
  }

  learn(ev, at, now) {
    const p = ev.payload || {};
    const devKey = p.deviceId ? deviceKey(p.workerId, p.deviceId) : '';
    switch (ev.event) {
      case 'lease.granted':
        this.journeys.settle(p.requestId, 'ready', at, { deviceId: p.deviceId, leaseId: p.leaseId });
        this.failed.delete(p.requestId);
        break;
      case 'lease.rejected': {
        const failure = p.code !== 'CANCELLED' && !NOT_FAILURES.has(p.reason);
        const error = { code: p.code || '', reason: p.reason || '', message: reasonWords(p.reason, p.code) };
        if (failure && now - at < REQUEST_KEEP_MS) {
          this.journeys.settle(p.requestId, 'failed', at, { error, requesterId: p.requester, requestSpec: p.requestSpec });
          this.failed.set(p.requestId, {
            id: p.requestId, requesterId: p.requester || '', spec: p.requestSpec || null, error, at,
            workerId: p.workerId || '', heardAt: now,
          });
        } else {
          this.journeys.settle(p.requestId, failure ? 'failed' : 'cancelled', at, { error });
        }
        break;
      }
      case 'device.purge-failed':
        this.deviceNotes.set(devKey, { reason: 'its clean failed', error: p.error || '', at });
        break;
      case 'device.quarantined': {
        const prev = this.deviceNotes.get(devKey);
        this.deviceNotes.set(devKey, {
          reason: quarantineWords(p.reason),
          error: p.error || (prev && p.reason === 'purge-failed' ? prev.error : ''),
          at,
        });
        break;
      }
      case 'device.quarantine-retry-failed': {
        const prev = this.deviceNotes.get(devKey) || { reason: 'quarantined' };
        this.deviceNotes.set(devKey, { ...prev, error: p.error || prev.error, attempt: p.attempt, nextRetryAt: p.nextRetryAt, at });
        break;
      }
      case 'device.quarantine-recovered':
      case 'device.deleted':
        this.deviceNotes.delete(devKey);
        this.retried.delete(devKey);
        break;
      default:
    }
  }

  // leaseIndex maps the leases status lists by worker and lease id.
  leaseIndex() {
    const m = new Map();
    for (const l of (this.status && this.status.leases) || []) m.set(deviceKey(l.workerId, l.id), l);
    return m;
  }

  devices() { return (this.status && this.status.devices) || []; }
  leases() { return (this.status && this.status.leases) || []; }
  waiting() { return (this.status && this.status.waiting) || []; }

  // failedRequests are the requests that failed lately, as the daemon
  // lists them, and those the events told of since the list was read
  // (until the next read, which the event itself asks for), less those
  // retried from this page.
  failedRequests(now = Date.now()) {
    const out = new Map();
    for (const r of this.failedList) {
      out.set(r.id, {
        id: r.id, requesterId: r.requesterId, spec: r.spec || null, workerId: r.workerId || '',
        error: r.error || { message: 'the request failed' }, at: r.settledAt || 0,
      });
    }
    for (const f of this.failed.values()) {
      if (f.heardAt > (this.failedAt || 0) && now - f.at < REQUEST_KEEP_MS && !out.has(f.id)) out.set(f.id, f);
    }
    for (const id of this.retried) out.delete(id);
    return Array.from(out.values());
  }

  // workerLines are the workers as cards show them: a gateway's fleet, or
  // on a worker the daemon itself.
  workerLines() {
    if (this.gateway) {
      const list = (this.workers && this.workers.workers) || (this.status && this.status.fleet && this.status.fleet.workers) || [];
      return list;
    }
    return [];
  }

  // attention lists what an operator should look at, each with a key,
  // what it is and why.
  attention() {
    const out = [];
    for (const w of this.workerLines()) {
      const name = w.label || w.id;
      if (w.connection === 'disconnected' || w.connection === 'incompatible') {
        out.push({ key: `worker:${w.id}:${w.connection}`, kind: 'worker', what: w.connection, id: w.id, title: name, why: w.reason || '', workerId: w.id });
      }
      if (w.drained) {
        out.push({ key: `worker:${w.id}:drained`, kind: 'worker', what: 'drained', id: w.id, title: name, why: 'takes no new requests until undrained', workerId: w.id });
      }
      const view = this.workerViews.get(w.id);
      const ram = view && view.capacity && view.capacity.ramBudget;
      if (ram && ram.overLimit) {
        out.push({ key: `ram:${w.id}`, kind: 'capacity', what: 'over RAM budget', id: w.id, title: name, why: ramWords(ram), workerId: w.id });
      }
    }
    if (!this.gateway) {
      const ram = this.status && this.status.capacity && this.status.capacity.ramBudget;
      if (ram && ram.overLimit) out.push({ key: 'ram:self', kind: 'capacity', what: 'over RAM budget', id: 'this daemon', title: 'This daemon', why: ramWords(ram) });
    }
    for (const d of this.devices()) {
      const key = deviceKey(d.workerId, d.id);
      if (d.state === 'quarantined') {
        const note = this.deviceNotes.get(key);
        out.push({
          key: `device:${key}:quarantined`, kind: 'device', what: 'quarantined', id: d.id, device: d, workerId: d.workerId || '',
          title: deviceTitle(d), why: note ? [note.reason, note.error].filter(Boolean).join(': ') : 'serves nobody until a clean works',
          retry: { kind: 'device', key, id: d.id },
        });
      }
      if (d.stalled) {
        out.push({ key: `device:${key}:stalled`, kind: 'device', what: 'stalled', id: d.id, device: d, workerId: d.workerId || '', title: deviceTitle(d), why: `${d.state} for longer than expected` });
      }
    }
    for (const f of this.failedRequests()) {
      out.push({
        key: `request:${f.id}`, kind: 'request', what: 'failed', id: f.id, title: `Request ${f.id}`, workerId: f.workerId || '',
        why: errorWords(f.error), requesterId: f.requesterId, spec: f.spec, retry: { kind: 'request', key: f.id, id: f.id },
      });
    }
    for (const j of this.failedInstalls()) {
      const bad = failedRows(j);
      out.push({
        key: `install:${j.id}`, kind: 'install', what: 'failed', id: j.id, href: `/jobs/${encodeURIComponent(j.id)}`,
        title: `Install ${jobWhat(j)}`, why: installWhy(bad), workerId: bad.length > 0 ? bad[0].workerId : '',
      });
    }
    return out;
  }
}

// deviceKey names a device across a fleet: device ids are each worker's.
export function deviceKey(workerId, id) { return workerId ? `${workerId}/${id}` : id; }

export function deviceTitle(d) {
  const s = d.spec || {};
  return [s.model || d.id, s.osVersion].filter(Boolean).join(' · ');
}

// jobWhat says what a job installs: ios 26.4.
export function jobWhat(j) {
  const s = (j && j.spec) || {};
  return [s.platform, s.version].filter(Boolean).join(' ');
}

// installWhy says why an install failed: the first worker's error, where
// it broke, and how many others failed too.
function installWhy(bad) {
  if (bad.length === 0) return 'the install failed';
  const w = bad[0];
  const where = `${(w.error && w.error.phase) || w.phase || 'install'} on ${w.label || w.workerId}`;
  const what = w.error ? errorWords(w.error) : `outcome ${w.outcome}`;
  const more = bad.length > 1 ? ` (and ${bad.length - 1} more worker${bad.length > 2 ? 's' : ''})` : '';
  return `${where}: ${what}${more}`;
}

export function errorWords(e) {
  if (!e) return '';
  return [e.code, e.message].filter(Boolean).join(': ');
}

function ramWords(ram) {
  const gib = (n) => (n / (1 << 30)).toFixed(1);
  return `${gib(ram.usedBytes)} of ${gib(ram.limitBytes)} GiB assumed in use`;
}

function quarantineWords(reason) {
  switch (reason) {
    case 'purge-failed': return 'its clean failed';
    case 'shutdown-failed': return 'shutting it down failed';
    case 'delete-failed': return 'deleting it failed';
    case 'stalled-transition': return 'it was stuck';
    case 'foreign-provenance': return 'it was changed outside simlock';
    case 'foreign-state-change': return 'it was started outside simlock';
    default: return reason ? `quarantined (${reason})` : 'quarantined';
  }
}

// reasonWords says why a request ended without a lease (lease.rejected).
function reasonWords(reason, code) {
  const words = {
    timeout: 'it waited longer than its timeout',
    'provision-failed': 'creating its device failed',
    'boot-failed': 'booting its device failed',
    'boot-timeout': 'its device did not become ready in time',
    'download-failed': 'the runtime it needs could not be installed',
    internal: 'the daemon could not save a step of it',
    'daemon-restarted': 'the daemon stopped while it was open',
    'gateway-restarted': 'the gateway stopped while it was open',
    'worker-unreachable': 'the worker it was sent to did not answer',
    'worker-answer-invalid': 'the worker answered with something invalid',
    'worker-refused': 'the worker refused it',
    cancelled: 'it was cancelled',
    killed: 'an operator ended every request',
    'no-wait': 'no device was free at once',
    'unresolvable-spec': 'nothing matches what it asked for',
  };
  return words[reason] || reason || (code ? code.toLowerCase() : 'it failed');
}
