// The operator console: sign-in, the tabs and their URLs, and the loop
// that draws what the store holds.

import { Api, ApiError, Unreachable } from './api.js';
import { h } from './dom.js';
import { shortDuration } from './format.js';
import { Live } from './live.js';
import { KINDS, Store } from './store.js';
import { renderAttention } from './views/attention.js';
import { renderDevices } from './views/devices.js';
import { renderEvents } from './views/events.js';
import { renderJob, tick as tickJob } from './views/job.js';
import { renderLeases, tick as tickLeases } from './views/leases.js';
import { renderWaiting, tick as tickWaiting } from './views/waiting.js';
import { renderWorker, renderWorkers } from './views/workers.js';

// The token lives in the tab's session storage: closing the tab forgets it.
const TOKEN_KEY = 'simlock.console.token';

const TABS = [
  { id: 'workers', label: 'Workers' },
  { id: 'devices', label: 'Devices' },
  { id: 'leases', label: 'Leases' },
  { id: 'waiting', label: 'Waiting' },
  { id: 'attention', label: 'Attention' },
  { id: 'events', label: 'Events' },
];

const SIZES = [25, 50, 100];
const DEFAULT_SIZE = 50;

// How many events the page reads at sign-in; the stream adds the rest.
const FIRST_EVENTS = 1000;

const OPERATOR_HINT = 'Make one with: simlock token create --role operator --label console';

class App {
  constructor(el) {
    this.el = el;
    this.api = null;
    this.store = null;
    this.live = null;
    this.roots = new Map();
    this.renderQueued = false;
    this.stripTimer = 0;
    this.ticker = 0;
    this.signInRun = 0;
    this.notices = [];
    window.addEventListener('popstate', () => this.scheduleRender(true));
  }

  boot() {
    const secret = sessionStorage.getItem(TOKEN_KEY);
    if (secret) this.signIn(secret);
    else this.showSignIn();
  }

  // --- signing in and out ---

  showSignIn(message, kind = 'err') {
    const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', spellcheck: 'false', placeholder: 'slk_…', required: true });
    this.signInMsg = h('p', { class: ['signin-msg', message && kind], role: 'alert', id: 'signin-msg', text: message || '' });
    const form = h('form', {
      class: 'signin-form',
      on: {
        submit: (e) => {
          e.preventDefault();
          const secret = input.value.trim();
          if (secret) this.signIn(secret);
        },
      },
    },
    h('label', { for: 'token', text: 'Operator token' }),
    input,
    h('button', { type: 'submit', class: 'btn btn-primary', id: 'signin' }, 'Sign in'),
    this.signInMsg,
    h('p', { class: 'hint', text: `The secret is kept in this tab only, and sent to this daemon only. ${OPERATOR_HINT}` }));
    this.el.replaceChildren(h('main', { class: 'signin' }, h('h1', { text: 'simlock console' }), form));
    input.focus();
  }

  signInSays(text, kind) {
    if (!this.signInMsg) return;
    this.signInMsg.textContent = text;
    this.signInMsg.className = `signin-msg ${kind}`;
  }

  // signIn checks the secret against the daemon, then opens the console:
  // the status says whether the token is known and the daemon up; an
  // operator route says whether it is an operator's.
  async signIn(secret) {
    const run = ++this.signInRun;
    if (!this.signInMsg) this.showSignIn();
    this.signInSays('Checking the token…', 'info');
    const api = new Api(secret, { onUnauthorized: () => { if (this.api === api) this.signOut('Signed out: the token was revoked or is no longer known.'); } });
    let st;
    for (;;) {
      if (run !== this.signInRun) return;
      try {
        st = await api.get('/v1/status');
      } catch (e) {
        if (e instanceof ApiError && e.code === 'DAEMON_STOPPING') {
          this.signInSays('The daemon is stopping; trying again until one answers…', 'info');
          await sleep(2000);
          continue;
        }
        this.failSignIn(e, secret);
        return;
      }
      if (st.daemon && st.daemon.health === 'starting') {
        this.signInSays('The daemon is still starting; the console opens as soon as it is ready…', 'info');
        await sleep(1000);
        continue;
      }
      break;
    }
    let events;
    try {
      events = await api.get(`/v1/events?limit=${FIRST_EVENTS}`);
    } catch (e) {
      this.failSignIn(e, secret);
      return;
    }
    if (run !== this.signInRun) return;
    sessionStorage.setItem(TOKEN_KEY, secret);
    this.open(api, st, events.events || []);
  }

  failSignIn(e, secret) {
    // A token the daemon refused is forgotten; one it could not be asked
    // about is kept, so a reload once the daemon is back signs in again.
    if (e instanceof ApiError && (e.status === 401 || e.status === 403)) sessionStorage.removeItem(TOKEN_KEY);
    else if (secret) sessionStorage.setItem(TOKEN_KEY, secret);
    let text;
    if (e instanceof Unreachable) text = `The daemon at ${location.origin} did not answer: is it running, with its HTTP API on?`;
    else if (e instanceof ApiError && e.status === 401) text = 'This token is unknown or was revoked.';
    else if (e instanceof ApiError && e.status === 403) text = `This token is not an operator token: the console needs one. ${OPERATOR_HINT}`;
    else if (e instanceof ApiError && e.code === 'DAEMON_STARTUP_FAILED') text = `The daemon could not finish starting: ${e.message}`;
    else if (e instanceof ApiError) text = `The daemon answered ${e.status}${e.code ? ` ${e.code}` : ''}: ${e.message}`;
    else text = `Sign-in failed: ${e && e.message ? e.message : e}`;
    this.signInSays(text, 'err');
    // The secret stays in the field, so Sign in tries it again.
    const input = document.getElementById('token');
    if (input && secret && !(e instanceof ApiError && (e.status === 401 || e.status === 403))) input.value = secret;
  }

  signOut(message) {
    if (this.live) this.live.stop();
    clearInterval(this.ticker);
    clearTimeout(this.stripTimer);
    this.live = null;
    this.api = null;
    this.store = null;
    this.roots.clear();
    sessionStorage.removeItem(TOKEN_KEY);
    this.signInRun++;
    this.showSignIn(message || 'Signed out.', message ? 'err' : 'info');
  }

  // --- the console ---

  open(api, st, events) {
    this.api = api;
    this.signInMsg = null;
    const store = new Store({ daemonNow: () => api.clock.now() });
    this.store = store;
    store.setStatus(st, Date.now());
    store.ingest(events, { now: Date.now(), live: false, clockOffset: api.clock.offset() });
    this.live = new Live(api, store, {
      onChange: () => this.scheduleRender(),
      onState: () => this.drawStatusBox(),
      onSignOut: (m) => this.signOut(m),
      wanted: () => this.wantedRoutes(),
    });
    this.buildShell();
    if (location.pathname === '/' || location.pathname === '/index.html') history.replaceState(null, '', `/workers${location.search}`);
    this.live.start();
    this.ticker = setInterval(() => this.tick(), 1000);
    this.scheduleRender(true);
  }

  buildShell() {
    this.tabLinks = new Map();
    const nav = h('nav', { class: 'tabs', 'aria-label': 'tabs' },
      TABS.map((t) => {
        const count = h('span', { class: 'tab-count', dataset: { countFor: t.id } });
        const a = h('a', { href: `/${t.id}`, class: 'tab', dataset: { tab: t.id, internal: '' } }, t.label, count);
        a.addEventListener('click', (e) => this.follow(e, `/${t.id}`));
        this.tabLinks.set(t.id, { a, count });
        return a;
      }));
    this.statusBox = h('div', { class: 'status-box', id: 'status-box', role: 'status', 'aria-live': 'polite' });
    this.modeEl = h('span', { class: 'mode' });
    this.errorsEl = h('div', { class: 'route-errors', role: 'alert' });
    this.noticeEl = h('div', { class: 'notices', role: 'status', 'aria-live': 'polite', id: 'notices' });
    this.main = h('main', { class: 'content', id: 'content' });
    const header = h('header', { class: 'top' },
      h('span', { class: 'brand', text: 'simlock' }), this.modeEl, this.statusBox,
      h('button', { type: 'button', class: 'btn btn-quiet', id: 'signout', on: { click: () => this.signOut() } }, 'Sign out'));
    this.el.replaceChildren(header, nav, this.errorsEl, this.noticeEl, this.main);
    this.drawStatusBox();
  }

  follow(e, href) {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    this.navigate(href);
  }

  navigate(href) {
    if (href !== location.pathname + location.search) history.pushState(null, '', href);
    this.scheduleRender(true);
  }

  // link makes a link within the console.
  link(href, text) {
    const a = h('a', { href, dataset: { internal: '' } }, text);
    a.addEventListener('click', (e) => this.follow(e, href));
    return a;
  }

  // route is what the URL names: a tab, a worker's page, or a job's.
  route() {
    const parts = location.pathname.split('/').filter(Boolean);
    if (parts[0] === 'jobs' && parts.length > 1) return { tab: 'jobs', job: decodeURIComponent(parts.slice(1).join('/')) };
    const tab = TABS.find((t) => t.id === parts[0]) ? parts[0] : 'workers';
    if (tab === 'workers' && parts.length > 1) return { tab, worker: decodeURIComponent(parts.slice(1).join('/')) };
    return { tab };
  }

  wantedRoutes() {
    if (!this.store) return [];
    const r = this.route();
    if (r.worker) return this.store.gateway ? [`worker:${r.worker}`, 'jobs:running', 'jobs:failed'] : ['catalog', 'jobs:running', 'jobs:failed'];
    if (r.tab === 'workers') return ['jobs:running', 'usage'];
    return [];
  }

  paging() {
    const q = new URLSearchParams(location.search);
    const page = Math.max(1, parseInt(q.get('page') || '1', 10) || 1);
    const size = SIZES.includes(Number(q.get('size'))) ? Number(q.get('size')) : DEFAULT_SIZE;
    return { page, size };
  }

  setPage(page, size) {
    const q = new URLSearchParams(location.search);
    q.set('page', String(page));
    q.set('size', String(size));
    this.navigate(`${location.pathname}?${q}`);
  }

  eventKinds() {
    const raw = new URLSearchParams(location.search).get('only');
    if (!raw) return new Set(KINDS);
    return new Set(raw.split(',').filter((k) => KINDS.includes(k)));
  }

  setEventKinds(set) {
    const q = new URLSearchParams(location.search);
    q.delete('page');
    if (set.size === KINDS.length) q.delete('only');
    else q.set('only', KINDS.filter((k) => set.has(k)).join(',') || 'none');
    const s = q.toString();
    history.replaceState(null, '', `${location.pathname}${s ? `?${s}` : ''}`);
    this.scheduleRender();
  }

  // --- actions ---

  async retry(t) {
    const { store, api } = this;
    if (!store) return;
    store.actions.set(t.key, { busy: true });
    this.scheduleRender();
    try {
      if (t.kind === 'device') {
        const doc = await api.call('POST', `/v1/devices/${encodeURIComponent(t.id)}/retry`);
        const state = doc && doc.device ? doc.device.state : '';
        const words = !state || state === 'quarantined' ? 'Retry started: cleaning it now' : `Retried: the device is ${state}`;
        store.actions.set(t.key, { ok: true, message: words });
        this.notice(`Retrying device ${t.id}.`);
      } else {
        const doc = await api.call('POST', `/v1/lease-requests/${encodeURIComponent(t.id)}/retry`);
        const again = doc && doc.request ? doc.request.id : '';
        // A retry is the request as it was made, its wait bound too: one
        // that timed out after 1 s waits 1 s again, and the page says so.
        const bound = retryBound(doc && doc.request);
        store.actions.set(t.key, { ok: true, message: `${again ? `Retried as ${again}` : 'Retried'}${bound ? `, ${bound}` : ''}` });
        store.retried.add(t.id);
        store.journeys.dismiss(t.id);
        this.notice(`Request ${t.id} retried${again ? ` as ${again}` : ''}${bound ? `, ${bound}` : ''}.`);
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      const message = e instanceof Unreachable ? 'The daemon did not answer; try again.' : e.message;
      store.actions.set(t.key, { ok: false, message });
    }
    if (this.live) { this.live.touch('status'); this.live.touch('failed'); }
    this.scheduleRender();
  }

  dismiss(requestId) {
    if (!this.store) return;
    this.store.journeys.dismiss(requestId);
    this.scheduleRender();
  }

  notice(text) {
    this.notices.push({ text, at: Date.now() });
    this.notices = this.notices.slice(-3);
    this.drawNotices();
  }

  drawNotices() {
    if (!this.noticeEl) return;
    this.notices = this.notices.filter((n) => Date.now() - n.at < 15000);
    this.noticeEl.replaceChildren(...this.notices.map((n) => h('p', { class: 'notice', text: n.text })));
  }

  // --- drawing ---

  scheduleRender(routeChanged) {
    if (routeChanged) this.routeChanged = true;
    if (this.renderQueued) return;
    this.renderQueued = true;
    // A hidden tab draws nothing (requestAnimationFrame waits for it to
    // show again), which is what it should cost.
    requestAnimationFrame(() => { this.renderQueued = false; this.render(); });
  }

  render() {
    if (!this.store || !this.main) return;
    const r = this.route();
    if (this.routeChanged) {
      this.routeChanged = false;
      if (this.live) for (const route of this.wantedRoutes()) this.live.touch(route);
    }
    if (this.live) this.live.followJob(r.job || '');
    const now = Date.now();
    this.store.journeys.prune(now);
    const key = r.worker ? `worker:${r.worker}` : r.job ? `job:${r.job}` : r.tab;
    let root = this.roots.get(key);
    if (!root) {
      root = h('div', { class: 'view', dataset: { view: r.worker ? 'worker' : r.job ? 'job' : r.tab } });
      this.roots.set(key, root);
    }
    if (this.main.firstChild !== root) this.main.replaceChildren(root);
    switch (r.tab) {
      case 'workers': if (r.worker) renderWorker(root, this, r.worker); else renderWorkers(root, this); break;
      case 'devices': renderDevices(root, this); break;
      case 'leases': renderLeases(root, this); break;
      case 'waiting': renderWaiting(root, this); break;
      case 'attention': renderAttention(root, this); break;
      case 'events': renderEvents(root, this); break;
      case 'jobs': renderJob(root, this, r.job); break;
      default:
    }
    this.drawChrome(r);
    this.tickViews();
    document.title = `${r.job ? `Job ${r.job}` : TABS.find((t) => t.id === r.tab).label} · simlock console`;
    // A stage younger than a second lights its step when it turns one.
    clearTimeout(this.stripTimer);
    const next = this.store.journeys.nextChange(now);
    if (next) this.stripTimer = setTimeout(() => this.scheduleRender(), next - now + 20);
  }

  drawChrome(r) {
    const { store } = this;
    const st = store.status || {};
    const d = st.daemon || {};
    this.modeEl.textContent = `${store.gateway ? 'gateway' : 'worker'}${d.version ? ` · ${d.version}` : ''}`;
    const counts = {
      workers: store.gateway ? store.workerLines().length : '',
      devices: store.devices().length,
      leases: store.leases().length,
      waiting: store.waiting().length,
      attention: store.attention().length,
      events: '',
    };
    for (const [id, { a, count }] of this.tabLinks) {
      const on = id === r.tab;
      a.classList.toggle('tab-on', on);
      if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
      const n = counts[id];
      count.textContent = n === '' || n === undefined ? '' : String(n);
      count.classList.toggle('tab-alert', id === 'attention' && n > 0);
      count.hidden = n === '' || (id === 'attention' && n === 0);
    }
    const errs = Array.from(this.live ? this.live.errors.entries() : []);
    this.errorsEl.replaceChildren(...errs.map(([route, msg]) => h('p', { class: 'route-error', text: `Could not read ${routePath(route)}: ${msg}` })));
  }

  drawStatusBox() {
    if (!this.statusBox || !this.live) return;
    const s = this.live.state;
    let text;
    switch (s) {
      case 'connected': text = 'Connected'; break;
      case 'starting': text = 'Daemon starting'; break;
      case 'paused': text = 'Paused while the tab is hidden'; break;
      case 'reconnecting': text = `Reconnecting — data from ${Math.max(0, Math.round((Date.now() - this.live.lastDataAt) / 1000))} s ago`; break;
      default: text = 'Connecting…';
    }
    this.statusBox.textContent = text;
    this.statusBox.dataset.state = s;
  }

  tickViews() {
    if (!this.api) return;
    const daemonNow = this.api.clock.now();
    tickLeases(this.main, daemonNow);
    tickWaiting(this.main);
    tickJob(this.main, daemonNow);
  }

  tick() {
    this.drawStatusBox();
    this.tickViews();
    this.drawNotices();
    if (this.store && this.store.journeys.byId.size > 0) this.scheduleRender();
  }
}

function routePath(route) {
  if (route.startsWith('worker:')) return `/v1/workers/${route.slice(7)}`;
  if (route.startsWith('jobs:')) return `/v1/jobs?state=${route.slice(5)}`;
  return route === 'failed' ? '/v1/lease-requests?state=failed' : `/v1/${route}`;
}

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

const app = new App(document.getElementById('app'));
// The page's objects, for a person at the browser's developer tools (and
// the console's own browser test) to look at.
window.simlockConsole = app;
app.boot();

// retryBound says how long a retried request waits, which is what the
// failed one was made with (a retry does not change it): "waiting up to
// 1.0 s again, the timeout it was made with". "" when it waits as long as
// the daemon lets it.
function retryBound(req) {
  const p = (req && req.waitPolicy) || {};
  if (p.noWait) return 'without waiting, as it was made';
  if (p.timeoutMs > 0) return `waiting up to ${shortDuration(p.timeoutMs)} again, the timeout it was made with; for longer, make a new request`;
  return '';
}
