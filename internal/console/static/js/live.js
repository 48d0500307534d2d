// The live layer: the event stream, read with fetch (an EventSource
// cannot send the Authorization header), and the refetch of the read
// routes each event touches, at most one request per route in flight.

import { ApiError, Unreachable, readEvents } from './api.js';

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
    this.fetchers = new Map(); // route -> {inflight, again}
    this.errors = new Map(); // route -> the last error reading it
    this.running = false;
    this.streamCtrl = null;
    this.connects = 0;
    this.streamOpen = false;
    this.pollTimer = 0;
    this.safetyTimer = 0;
    this.loop = null;
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
  }

  pause() {
    if (this.streamCtrl) this.streamCtrl.abort();
    clearTimeout(this.pollTimer);
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
    for (const r of this.wanted()) this.touch(r);
  }

  // touch reads a route again: now if no read of it is in flight, else
  // once more when that one ends.
  touch(route) {
    if (this.paused) return;
    let f = this.fetchers.get(route);
    if (!f) { f = { inflight: null, again: false }; this.fetchers.set(route, f); }
    if (f.inflight) { f.again = true; return; }
    f.inflight = this.read(route).finally(() => {
      f.inflight = null;
      if (f.again) { f.again = false; this.touch(route); }
    });
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

  failed(route, e) {
    if (e instanceof ApiError) {
      if (e.status === 401) return; // the page signs out (Api.onUnauthorized)
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
    this.onChange();
  }
}
