// The Workers tab: the leases of the last hour (and on a gateway the
// busiest workers), then a card per worker of a gateway's fleet, or on a
// worker one card for the daemon itself; and a worker's own page.

import { h, reconcile } from '../dom.js';
import { bytes, clock, duration, spec as specWords } from '../format.js';
import { deviceKey, deviceTitle, jobWhat } from '../store.js';
import { badge, keyedTable, section, stateBadge } from './common.js';
import { jobBadge, rowSummary } from './job.js';
import { renderUsage } from './usage.js';

export function renderWorkers(root, app) {
  const { store } = app;
  if (!root.built) {
    root.usage = h('div', { class: 'usage-slot' });
    root.head = h('h2', { class: 'sub' });
    root.list = h('div', { class: 'cards', dataset: { list: 'workers' } });
    root.append(root.usage, root.head, root.list);
    root.built = true;
  }
  const st = store.status;
  if (!st) return;
  renderUsage(root.usage, app);
  if (store.gateway) {
    const lines = store.workerLines().slice().sort((a, b) => (a.label || a.id).localeCompare(b.label || b.id) || a.id.localeCompare(b.id));
    const f = st.fleet || {};
    root.head.textContent = `Workers (${lines.length}): ${f.connected || 0} connected, ${f.disconnected || 0} disconnected, ${f.incompatible || 0} incompatible, ${f.drained || 0} drained`;
    reconcile(root.list, lines, (w) => w.id, (w) => JSON.stringify([w, cardView(store.workerViews.get(w.id)), installing(store, w.id)]),
      (w) => workerCard(app, w, store.workerViews.get(w.id), installing(store, w.id)));
    if (lines.length === 0) root.list.replaceChildren(h('p', { class: 'empty', text: 'No worker has joined this gateway yet.' }));
    return;
  }
  root.head.textContent = 'This daemon';
  const self = ((store.workers && store.workers.workers) || [])[0] || {};
  const item = { st, self };
  reconcile(root.list, [item], () => 'self', () => JSON.stringify([selfView(st), self, installing(store, '')]),
    () => selfCard(app, st, self, installing(store, '')));
}

// installing lists the installs running on a worker (any worker's for
// '', a single worker's own), each as a card says it: ios 26.4 · 41%.
function installing(store, workerId) {
  const out = [];
  for (const j of store.jobLists.running) {
    for (const r of j.workers || []) {
      if (r.outcome || (workerId && r.workerId !== workerId)) continue;
      out.push({ id: j.id, text: `installing ${jobWhat(j)} · ${rowSummary(r).replace(/^downloading /, '')}` });
      break;
    }
  }
  return out;
}

function installLines(app, list) {
  return list.map((i) => h('p', { class: 'card-install', dataset: { jobId: i.id } }, app.link(`/jobs/${encodeURIComponent(i.id)}`, i.text)));
}

// cardView is what a card shows of a worker's view.
function cardView(v) {
  if (!v) return null;
  const g = (v.capacity && v.capacity.global) || {};
  return { health: v.health, warm: g.warm, ram: v.capacity && v.capacity.ramBudget };
}

function selfView(st) {
  return { d: st.daemon, c: st.capacity, counts: st.counts, q: st.queueDepth, wp: st.warmPool && st.warmPool.enabled };
}

function workerCard(app, w, v, installs) {
  const cv = cardView(v) || {};
  return h('article', { class: ['card', 'card-worker', `card-${w.connection}`], dataset: { workerId: w.id, connection: w.connection, drained: String(!!w.drained) } },
    h('header', { class: 'card-head' }, h('h3', null, app.link(`/workers/${encodeURIComponent(w.id)}`, w.label || w.id)),
      stateBadge(w.connection), w.drained ? stateBadge('drained') : null),
    h('dl', { class: 'facts' },
      fact('Health', cv.health || (w.connection === 'connected' ? '…' : '—')),
      fact('Version', w.version),
      fact('Running', `${w.running}/${w.maxRunning}`),
      fact('Leases', String(w.leases)),
      fact('Queue', String(w.queueDepth)),
      fact('Warm pool', cv.warm === undefined ? '—' : `${cv.warm} ready`),
      fact('Last seen', w.lastSeenAt ? clock(w.lastSeenAt) : '—'),
      fact('Id', w.id)),
    installLines(app, installs),
    w.reason ? h('p', { class: 'warn-line', text: w.reason }) : null);
}

function selfCard(app, st, self, installs) {
  const d = st.daemon || {};
  const c = st.capacity || {};
  const g = c.global || {};
  const counts = st.counts || {};
  const host = st.host || {};
  const id = self.id || 'self';
  return h('article', { class: ['card', 'card-worker'], dataset: { workerId: id, connection: 'self' } },
    h('header', { class: 'card-head' }, h('h3', null, app.link(`/workers/${encodeURIComponent(id)}`, self.label || host.osVersion || 'This daemon')),
      stateBadge(d.health || 'running')),
    h('dl', { class: 'facts' },
      fact('Health', d.health),
      fact('Version', d.version),
      fact('Running', `${g.running || 0}/${g.maxRunning || 0}`),
      fact('Leases', String(counts.leases || 0)),
      fact('Queue', String(st.queueDepth || 0)),
      fact('Warm pool', `${g.warm || 0} ready${st.warmPool && !st.warmPool.enabled ? ' (pool off)' : ''}`),
      fact('Host', [host.os, host.arch, host.cpus ? `${host.cpus} CPUs` : '', host.ramBytes ? bytes(host.ramBytes) : ''].filter(Boolean).join(' · ')),
      fact('Started', d.startedAt ? clock(d.startedAt) : '')),
    installLines(app, installs));
}

// renderWorker is a worker's page: its devices, leases, waiting requests,
// installs (the running and recently failed jobs with a row for it; on a
// single worker, every job, the daemon's own), downloads and catalog.
export function renderWorker(root, app, id) {
  const { store } = app;
  const st = store.status;
  if (!st) return;
  let v;
  if (store.gateway) {
    v = store.workerViews.get(id);
    if (!v) {
      root.replaceChildren(h('p', { class: 'empty', text: `Reading worker ${id}…` }), app.link('/workers', 'All workers'));
      return;
    }
  } else {
    const self = ((store.workers && store.workers.workers) || [])[0] || {};
    v = {
      id: self.id || id, label: self.label || 'This daemon', connection: 'connected', health: st.daemon.health,
      version: st.daemon.version, host: st.host, capacity: st.capacity, queueDepth: st.queueDepth,
      devices: st.devices || [], leases: st.leases || [], waiting: st.waiting || [], installs: st.installs || [],
      catalog: store.catalog ? store.catalog.platforms : null,
    };
  }
  if (!root.built || root.workerId !== id) {
    root.replaceChildren();
    root.workerId = id;
    root.top = h('div');
    root.devs = h('div');
    root.leaseSlot = h('div');
    root.waitSlot = h('div');
    root.jobSlot = h('div');
    root.installSlot = h('div');
    root.catalogSlot = h('div');
    root.append(root.top,
      section('Devices', root.devs), section('Leases', root.leaseSlot), section('Waiting', root.waitSlot),
      section('Installs', root.jobSlot), section('Downloads', root.installSlot), section('Catalog', root.catalogSlot));
    root.built = true;
  }
  const g = (v.capacity && v.capacity.global) || {};
  const host = v.host || {};
  root.top.replaceChildren(
    h('p', null, app.link('/workers', '← All workers')),
    h('header', { class: 'page-head', dataset: { workerId: v.id } },
      h('h2', { text: v.label || v.id }), stateBadge(v.connection || 'connected'), v.drained ? stateBadge('drained') : null,
      v.health ? badge(`health: ${v.health}`, v.health === 'running' ? 'ok' : 'warn') : null),
    h('dl', { class: 'facts facts-wide' },
      fact('Id', v.id), fact('Version', v.version),
      fact('Running', `${g.running || 0}/${g.maxRunning || 0}${g.reserved ? ` (+${g.reserved} starting)` : ''}`),
      fact('Warm pool', `${g.warm || 0} ready`), fact('Queue', String(v.queueDepth || 0)),
      fact('Host', [host.os, host.arch, host.osVersion, host.cpus ? `${host.cpus} CPUs` : '', host.ramBytes ? bytes(host.ramBytes) : ''].filter(Boolean).join(' · ')),
      v.downloadPolicy ? fact('Downloads', v.downloadPolicy) : null,
      v.maxTtlMs ? fact('Longest lease', duration(v.maxTtlMs)) : null,
      v.reason ? fact('Reason', v.reason) : null,
      v.lastSeenAt ? fact('Last seen', clock(v.lastSeenAt)) : null));

  const leaseById = new Map((v.leases || []).map((l) => [l.id, l]));
  keyedTable(root.devs, 'devices', ['Device', 'State', 'OS', 'Holder', 'Id'], v.devices || [], (d) => deviceKey(d.workerId, d.id),
    (d) => JSON.stringify([d.state, d.spec, d.leaseId, d.stalled, leaseById.get(d.leaseId) && store.who(leaseById.get(d.leaseId).requesterId)]),
    (d) => h('tr', { dataset: { deviceId: d.id, state: d.state } },
      h('td', { text: deviceTitle(d) }), h('td', null, stateBadge(d.state), d.stalled ? badge('stalled', 'warn') : null),
      h('td', { text: `${(d.spec && d.spec.platform) || ''} ${(d.spec && d.spec.osVersion) || ''}` }),
      h('td', { text: d.leaseId && leaseById.get(d.leaseId) ? store.who(leaseById.get(d.leaseId).requesterId) : '—' }),
      h('td', { class: 'id', text: d.id })),
    'No devices.');
  keyedTable(root.leaseSlot, 'leases', ['Holder', 'Device', 'Granted', 'Expires in', 'Lease'], v.leases || [], (l) => l.id,
    (l) => JSON.stringify([store.who(l.requesterId), l.deviceId, l.grantedAt, l.ttlDeadline]),
    (l) => h('tr', { dataset: { leaseId: l.id } },
      h('td', { text: store.who(l.requesterId) }), h('td', { class: 'id', text: l.deviceId }), h('td', { text: clock(l.grantedAt) }),
      h('td', { class: 'countdown', dataset: { expiresAt: l.ttlDeadline }, text: '' }), h('td', { class: 'id', text: l.id })),
    'No leases.');
  keyedTable(root.waitSlot, 'waiting', ['Requester', 'Asked for', 'Stage', 'Request'], v.waiting || [], (w) => w.requestId,
    (w) => JSON.stringify([w.stage, store.who(w.requesterId), w.requestSpec, w.progress && w.progress.stage]),
    (w) => h('tr', { dataset: { requestId: w.requestId } },
      h('td', { text: store.who(w.requesterId) }), h('td', { text: specWords(w.requestSpec) }),
      h('td', null, stateBadge((w.progress && w.progress.stage) || w.stage)), h('td', { class: 'id', text: w.requestId })),
    'Nobody is waiting.');
  const jobs = store.jobsOf(store.gateway ? v.id : '').map((j) => ({ j, r: (j.workers || []).find((w) => w.workerId === v.id) || (j.workers || [])[0] || {} }));
  keyedTable(root.jobSlot, 'jobs', ['Job', 'Runtime', 'State', 'Here', 'Started', 'Ended'], jobs, (x) => x.j.id,
    (x) => JSON.stringify([x.j.state, x.j.spec, x.j.endedAt, x.r]),
    (x) => h('tr', { dataset: { jobId: x.j.id, state: x.j.state, here: x.r.outcome || 'running' } },
      h('td', null, app.link(`/jobs/${encodeURIComponent(x.j.id)}`, x.j.id)),
      h('td', { text: jobWhat(x.j) }),
      h('td', null, jobBadge(x.j.state)),
      h('td', { text: jobHere(x.r) }),
      h('td', { text: clock(x.j.createdAt) }),
      h('td', { text: x.j.endedAt ? clock(x.j.endedAt) : '—' })),
    'No install is running, and none failed lately.');
  keyedTable(root.installSlot, 'installs', ['Runtime', 'State', 'Done', 'Waiters', 'Since'], v.installs || [], (i) => `${i.platform}:${i.component}`,
    (i) => JSON.stringify(i),
    (i) => h('tr', null, h('td', { text: `${i.platform} ${i.component}` }), h('td', null, stateBadge(i.state)),
      h('td', { text: typeof i.percent === 'number' ? `${i.percent}%` : '—' }), h('td', { text: String(i.waiters) }), h('td', { text: clock(i.since) })),
    'No download is running.');
  const cat = v.catalog || [];
  keyedTable(root.catalogSlot, 'catalog', ['Platform', 'Models', 'Runtimes', 'Downloadable'], cat, (c) => c.platform,
    (c) => JSON.stringify([c.models, c.runtimes, c.downloadable]),
    (c) => h('tr', null, h('td', { text: c.platform }), h('td', { text: (c.models || []).join(', ') }),
      h('td', { text: (c.runtimes || []).join(', ') }), h('td', { text: (c.downloadable || []).join(', ') || '—' })),
    store.gateway ? 'The worker has not sent its catalog.' : 'Reading the catalog…');
}

// jobHere says how a job is going on the worker: downloading 41%, or how
// it failed there.
function jobHere(r) {
  if (r.outcome && r.outcome !== 'installed') {
    const e = r.error;
    return e ? `${r.outcome} in ${e.phase}: ${e.code}` : r.outcome;
  }
  return rowSummary(r);
}

function fact(label, value) {
  return [h('dt', { text: label }), h('dd', null, value === undefined || value === null || value === '' ? '—' : value)];
}
