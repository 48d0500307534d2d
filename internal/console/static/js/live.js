// The live layer: the event stream, read with fetch (an EventSource
// cannot send the Authorization header), and the refetch of the read
// routes each event touches, at most one request per route in flight;
// and the job page's job, followed on its own stream while it runs.

import { ApiError, Unreachable, readEvents } from './api.js';
import { JobWatch } from './jobs.js';

// backoffMs is the wait before reconnect attempt n (from 0): 1, 2, 4, 8 s,
// then every 10 s.
export function backoffMs(n) {
  const steps = [1, 2, 4, 8];
  return 1000 * (n < steps.length ? steps[n] : 10);
}

// routesFor lists the read routes an event changes the answer of.
export function routesFor(ev, gateway) {
  const name = ev.event || '';
  const p = ev.payload || {};
  const out = new Set();
  if (name === 'worker.rejected') return out; // a refused uplink changes no list
  if (name.startsWith('token.')) { out.add('tokens'); return out; }
  if (name.startsWith('worker.')) {
    out.add('workers');
    out.add('status');
    if (p.workerId) out.add(`worker:${p.workerId}`);
    return out;
  }
  out.add('status');
  if (name === 'lease.rejected' || name === 'lease.requested') out.add('failed');
  // A worker's relayed event changes the gateway's view of that worker.
  if (gateway && p.workerId) out.add(`worker:${p.workerId}`);
  return out;
}

// jobRoutesFor lists the job lists an event changes: an install that
// starts or ends changes the running list, one that fails the failed list
// too (on a gateway the events are its workers', relayed). The job's own
// record may be written an instant after its event, so the running list
// is read until the job has left it (see Live.read).
export function jobRoutesFor(ev) {
  switch (ev.event) {
    case 'component.install-started':
    case 'component.installed':
      return ['jobs:running'];
    case 'component.install-failed':
      return ['jobs:running', 'jobs:failed'];
    default:
      return [];
  }
}

// usagePath reads the usage figures of the last hour at one-minute
// buckets, up to now on the daemon's clock (daemonNow, epoch ms): from the
// start of the minute USAGE_MINUTES - 1 before the current one, so each
// bucket is a minute of the clock and the last is the one running.
const USAGE_MINUTES = 60;
function usagePath(daemonNow) {
  const from = (Math.floor(daemonNow / 60000) - (USAGE_MINUTES - 1)) * 60000;
  return `/v1/usage?from=${from}&bucket=1m`;
}

// USAGE_GAP_MS is the least time between two reads of the usage figures
// that lease events ask for: each read counts the hour's events again, so
// a burst of leases costs one read every few seconds, not one each.
const USAGE_GAP_MS = 5000;

// How often the status is read again while something moves that no event
// tells of (a download's percentage, a place in the queue, a daemon
// starting), and how often in any case.
const PROGRESS_POLL_MS = 1000;
const SAFETY_POLL_MS = 30000;
// A stream silent for this long (keepalives come every 15 s) is dead.
const STREAM_SILENCE_MS = 45000;

export class Live {
  // api and store are the page's; onChange is called after the store
  // changed, onState when the connection state did, onSignOut(message)
  // when the token no longer works for the console.
  constructor(api, store, { onChange, onState, onSignOut, wanted }) {
    this.api = api;
    this.store = store;
    this.onChange = onChange || (() => {});
    this.onState = onState || (() => {});
    this.onSignOut = onSignOut || (() => {});
    // wanted says which routes the page shows now besides the ones it
    // always keeps (the worker views of a gateway, the catalog).
    this.wanted = wanted || (() => []);
    this.state = 'connecting';
    this.lastDataAt = Date.now();
    this.fetchers = new Map(); // route -> {inflight, again, startedAt, later}
    this.errors = new Map(); // route -> the last error reading it
    this.running = false;
    this.streamCtrl = null;
    this.connects = 0;
    this.streamOpen = false;
    this.pollTimer = 0;
    this.safetyTimer = 0;
    this.loop = null;
    this.jobPollTimer = 0;
    this.runningIds = new Set(); // the jobs the running list last held
    this.jobEnding = false; // an install ended since the running list was read
    this.jobId = ''; // the job the job page follows
    this.jobCtrl = null;
    this.onVisibility = () => this.visibilityChanged();
  }

  start() {
    this.running = true;
    document.addEventListener('visibilitychange', this.onVisibility);
    if (document.visibilityState === 'hidden') { this.setState('paused'); return; }
    this.resume();
  }

  stop() {
    this.running = false;
    document.removeEventListener('visibilitychange', this.onVisibility);
    this.pause();
  }

  resume() {
    this.refetchAll();
    this.safetyTimer = setInterval(() => this.refetchAll(), SAFETY_POLL_MS);
    if (!this.loop) this.loop = this.streamLoop().finally(() => { this.loop = null; });
    if (this.jobId) this.startJob(this.jobId);
  }

  pause() {
    if (this.streamCtrl) this.streamCtrl.abort();
    if (this.jobCtrl) this.jobCtrl.abort();
    clearTimeout(this.pollTimer);
    clearTimeout(this.jobPollTimer);
    this.jobPollTimer = 0;
    for (const f of this.fetchers.values()) { clearTimeout(f.later); f.later = 0; }
    clearInterval(this.safetyTimer);
    this.pollTimer = 0;
    this.safetyTimer = 0;
  }

  visibilityChanged() {
    if (!this.running) return;
    if (document.visibilityState === 'hidden') {
      this.pause();
      this.setState('paused');
    } else {
      this.setState('reconnecting');
      this.resume();
    }
  }

  setState(s) {
    if (this.state === s) return;
    this.state = s;
    this.onState(s);
  }

  get paused() { return !this.running || document.visibilityState === 'hidden'; }

  // refetchAll reads every route the page keeps.
  refetchAll() {
    this.touch('status');
    this.touch('failed');
    this.touch('workers');
    this.touch('jobs:running');
    this.touch('jobs:failed');
    this.touch('tokens');
    for (const r of this.wanted()) this.touch(r);
  }

  // touch reads a route again: now if no read of it is in flight, else
  // once more when that one ends.
  touch(route) {
    if (this.paused) return;
    let f = this.fetchers.get(route);
    if (!f) { f = { inflight: null, again: false, startedAt: 0, later: 0 }; this.fetchers.set(route, f); }
    if (f.inflight) { f.again = true; return; }
    clearTimeout(f.later);
    f.later = 0;
    f.startedAt = Date.now();
    f.inflight = this.read(route).finally(() => {
      f.inflight = null;
      if (f.again) { f.again = false; this.touch(route); }
    });
  }

  // touchSpaced reads a route again as touch does, but no sooner than gap
  // after its last read began: what asks for it in between makes one read
  // at the end of the gap.
  touchSpaced(route, gap) {
    if (this.paused) return;
    const f = this.fetchers.get(route);
    const wait = f ? f.startedAt + gap - Date.now() : 0;
    if (wait <= 0) { this.touch(route); return; }
    if (!f.later) f.later = setTimeout(() => { f.later = 0; this.touch(route); }, wait);
  }

  async read(route) {
    const { api, store } = this;
    try {
      if (route === 'status') {
        const st = await api.get('/v1/status');
        store.setStatus(st, Date.now());
        this.afterStatus(st);
      } else if (route === 'workers') {
        const doc = await api.get('/v1/workers');
        store.setWorkers(doc);
        // A worker the page has no view of yet is read once.
        for (const w of doc.workers || []) if (!store.workerViews.has(w.id) && store.gateway) this.touch(`worker:${w.id}`);
      } else if (route === 'failed') {
        store.setFailed(await api.get('/v1/lease-requests?state=failed'));
      } else if (route === 'jobs:running' || route === 'jobs:failed') {
        const state = route.slice('jobs:'.length);
        const doc = await api.get(state === 'failed' ? '/v1/jobs?state=failed&limit=20' : '/v1/jobs?state=running');
        // A failure a later install made good leaves Attention: the
        // succeeded ones say which.
        if (state === 'failed') store.setJobs('succeeded', await api.get('/v1/jobs?state=succeeded&limit=20'));
        store.setJobs(state, doc);
        if (state === 'running') this.afterRunningJobs(doc.jobs || []);
      } else if (route === 'usage') {
        store.setUsage(await api.get(usagePath(api.clock.now())));
      } else if (route === 'tokens') {
        store.setTokens(await api.get('/v1/tokens'));
      } else if (route === 'catalog') {
        store.setCatalog(await api.get('/v1/catalog'));
      } else if (route.startsWith('worker:')) {
        const id = route.slice('worker:'.length);
        store.setWorkerView(id, await api.get(`/v1/workers/${encodeURIComponent(id)}`));
      }
      this.lastDataAt = Date.now();
      this.errors.delete(route);
    } catch (e) {
      if (e && e.name === 'AbortError') return;
      this.failed(route, e);
    }
    this.onChange();
  }

  afterStatus(st) {
    const health = st.daemon && st.daemon.health;
    if (health === 'starting') this.setState('starting');
    else if (this.state === 'starting') this.setState(this.streamOpen ? 'connected' : 'reconnecting');
    const moving = health === 'starting' || (st.waiting && st.waiting.length > 0) || (st.installs && st.installs.length > 0);
    clearTimeout(this.pollTimer);
    if (moving && !this.paused) this.pollTimer = setTimeout(() => this.touch('status'), PROGRESS_POLL_MS);
  }

  // afterRunningJobs reads the failed list again once a job has left the
  // running list (or an install ended, as an event said), and reads the
  // running list again each second while it holds a job, for its rows'
  // percentages, which no event of the log carries.
  afterRunningJobs(jobs) {
    const ids = new Set(jobs.map((j) => j.id));
    const left = [...this.runningIds].some((id) => !ids.has(id));
    this.runningIds = ids;
    if (left || this.jobEnding) this.touch('jobs:failed');
    this.jobEnding = false;
    clearTimeout(this.jobPollTimer);
    this.jobPollTimer = 0;
    if (ids.size > 0 && !this.paused) this.jobPollTimer = setTimeout(() => this.touch('jobs:running'), PROGRESS_POLL_MS);
  }

  failed(route, e) {
    if (e instanceof ApiError && e.status === 401) return; // the page signs out (Api.onUnauthorized)
    // The usage figures say what went wrong in place of their chart: a
    // token that may not read them (403) can still use the rest.
    if (route === 'usage') {
      this.store.setUsageError(e);
      return;
    }
    if (e instanceof ApiError) {
      if (e.status === 403 && e.code === 'FORBIDDEN') {
        this.onSignOut('This token may no longer use the console: it is not an operator token.');
        return;
      }
      if (e.code === 'DAEMON_STOPPING' || e.code === 'DAEMON_STARTUP_FAILED') this.setState('starting');
      // A worker removed from the fleet has no view any more.
      if (route.startsWith('worker:') && e.code === 'UNKNOWN_WORKER') {
        this.store.workerViews.delete(route.slice('worker:'.length));
        return;
      }
    }
    this.errors.set(route, e instanceof Unreachable ? 'the daemon did not answer' : (e && e.message) || String(e));
  }

  // streamLoop follows /v1/events/stream until the page pauses or signs
  // out, reconnecting after 1, 2, 4, 8, then every 10 s. Each connection
  // resumes after the last seq seen (Last-Event-ID), so the daemon replays
  // what was missed before going live: no gap, and the event log drops
  // what it already has by id.
  async streamLoop() {
    let attempt = 0;
    while (!this.paused) {
      const ctrl = new AbortController();
      this.streamCtrl = ctrl;
      let watchdog = 0;
      const alive = () => {
        this.lastDataAt = Date.now();
        clearTimeout(watchdog);
        watchdog = setTimeout(() => ctrl.abort(), STREAM_SILENCE_MS);
      };
      try {
        const resp = await this.api.stream('/v1/events/stream', { lastEventId: this.store.events.lastSeq, signal: ctrl.signal });
        attempt = 0;
        alive();
        this.streamOpen = true;
        if (this.state !== 'starting') this.setState('connected');
        if (this.connects++ > 0) this.refetchAll();
        await readEvents(resp.body, (e) => { alive(); this.onStreamEvent(e); }, alive);
      } catch (e) {
        if (e instanceof ApiError) {
          if (e.status === 401) return;
          if (e.status === 403) { this.onSignOut('This token may no longer use the console: it is not an operator token.'); return; }
          if (e.code === 'DAEMON_STOPPING' || e.code === 'DAEMON_STARTUP_FAILED') this.setState('starting');
        }
      } finally {
        clearTimeout(watchdog);
        this.streamOpen = false;
      }
      if (this.paused) return;
      if (this.state !== 'starting') this.setState('reconnecting');
      this.touch('status'); // tells a daemon starting from one that is gone
      await new Promise((resolve) => setTimeout(resolve, backoffMs(attempt++)));
    }
  }

  onStreamEvent(e) {
    if (e.event !== 'message') return; // an error event ends the stream
    let ev;
    try { ev = JSON.parse(e.data); } catch { return; }
    const fresh = this.store.ingest([ev], { now: Date.now(), live: true, clockOffset: this.api.clock.offset() });
    if (fresh.length === 0) return;
    for (const r of routesFor(ev, this.store.gateway)) this.touch(r);
    if ((ev.event || '').startsWith('lease.') && this.wanted().includes('usage')) this.touchSpaced('usage', USAGE_GAP_MS);
    if (ev.event === 'component.installed' || ev.event === 'component.install-failed') this.jobEnding = true;
    for (const r of jobRoutesFor(ev)) this.touch(r);
    this.onChange();
  }

  // --- the job page's job ---

  // followJob makes the job page show job id ('' for none): its record,
  // read once (GET /v1/jobs/{id}); a running job is then followed on its
  // own stream to its end, and read once more for the record's end. The
  // stream is read with fetch, as the event stream is, for the token.
  followJob(id) {
    if (id === this.jobId) return;
    if (this.jobCtrl) this.jobCtrl.abort();
    this.jobCtrl = null;
    this.jobId = id || '';
    this.store.job = id ? new JobWatch(id) : null;
    if (id && !this.paused) this.startJob(id);
  }

  startJob(id) {
    const watch = this.store.job;
    if (!watch || watch.id !== id || watch.ended || watch.missing || watch.following) return;
    watch.following = true;
    this.jobLoop(watch).finally(() => { watch.following = false; });
  }

  async jobLoop(watch) {
    const { api } = this;
    const path = `/v1/jobs/${encodeURIComponent(watch.id)}`;
    const current = () => this.jobId === watch.id && this.store.job === watch && !this.paused;
    let attempt = 0;
    while (current()) {
      const ctrl = new AbortController();
      this.jobCtrl = ctrl;
      let watchdog = 0;
      const alive = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => ctrl.abort(), STREAM_SILENCE_MS);
      };
      try {
        const job = await api.get(path, { signal: ctrl.signal });
        watch.take('job', job);
        watch.source = 'record';
        watch.error = '';
        this.onChange();
        if (watch.ended) return;
        const resp = await api.stream(`${path}/events`, { signal: ctrl.signal });
        attempt = 0;
        alive();
        watch.source = 'live';
        let done = false;
        await readEvents(resp.body, (e) => {
          alive();
          let data;
          try { data = JSON.parse(e.data); } catch { return; }
          // An error event with an error object is the stream's own end
          // (it fell behind), not a worker's failure.
          if (e.event === 'error' && data && data.error && !data.workerId) throw new Error(data.error.message || 'the stream ended');
          watch.take(e.event, data);
          if (e.event === 'done') done = true;
          this.onChange();
        }, alive);
        if (done) {
          // The done event has no end time; the record does.
          watch.take('job', await api.get(path, { signal: ctrl.signal }));
          watch.source = 'live';
          this.onChange();
          return;
        }
      } catch (e) {
        if (e instanceof ApiError && e.status === 404 && e.code === 'UNKNOWN_JOB') {
          watch.missing = e.message;
          this.onChange();
          return;
        }
        if (e instanceof ApiError && e.status === 401) return;
        if (!(e && e.name === 'AbortError')) {
          watch.error = e instanceof Unreachable ? 'the daemon did not answer' : (e && e.message) || String(e);
          this.onChange();
        }
      } finally {
        clearTimeout(watchdog);
        ctrl.abort(); // a stream left part read is closed
      }
      if (!current()) return;
      if (watch.source === 'live') watch.source = 'reconnecting';
      this.onChange();
      await new Promise((resolve) => setTimeout(resolve, backoffMs(attempt++)));
    }
  }
}
