// The Devices tab: a card per device, and before them a card per request
// on its way to a device, with the step strip.

import { h, reconcile } from '../dom.js';
import { clock, duration, spec as specWords } from '../format.js';
import { deviceKey, deviceTitle, errorWords } from '../store.js';
import { badge, barBlock, retryEl, setPager, slicePage, stateBadge, stripEl, workerLink } from './common.js';
import { stageWords } from './words.js';

const STATE_ORDER = ['quarantined', 'provisioning', 'reclaiming', 'leased', 'ready', 'shutdown', 'deleted'];

export function renderDevices(root, app) {
  const { store } = app;
  if (!root.built) {
    root.prepHead = h('h2', { class: 'sub', text: 'Requests on their way to a device' });
    root.prep = h('div', { class: 'cards', dataset: { list: 'journeys' } });
    root.devHead = h('h2', { class: 'sub' });
    root.list = h('div', { class: 'cards', dataset: { list: 'devices' } });
    root.pagerSlot = h('div');
    root.append(root.prepHead, root.prep, root.devHead, root.list, root.pagerSlot);
    root.built = true;
  }
  const now = Date.now();
  const daemonNow = app.api.clock.now();
  const devices = store.devices();
  const byKey = new Map(devices.map((d) => [deviceKey(d.workerId, d.id), d]));
  const leases = store.leaseIndex();

  const journeys = store.journeys.shown();
  // A device being readied for a request is drawn on the request's card;
  // once the request is settled its device has a card of its own again.
  const claimed = new Set();
  for (const j of journeys) if (j.deviceId && !j.outcome) claimed.add(deviceKey(workerOf(j), j.deviceId));
  const rest = devices.filter((d) => !claimed.has(deviceKey(d.workerId, d.id)))
    .sort((a, b) => rank(a) - rank(b) || (a.spec.model || '').localeCompare(b.spec.model || '') || a.id.localeCompare(b.id));
  // One list in pages: the requests' cards first, then the devices'.
  const all = [...journeys.map((j) => ({ j })), ...rest.map((d) => ({ d }))];
  const { rows, page, size } = slicePage(all, app.paging());
  const shownJourneys = rows.filter((r) => r.j).map((r) => r.j);
  const shownDevices = rows.filter((r) => r.d).map((r) => r.d);
  root.prepHead.hidden = shownJourneys.length === 0;
  reconcile(root.prep, shownJourneys, (j) => `req:${j.requestId}`,
    (j) => journeySig(app, j, now, byKey, daemonNow),
    (j) => journeyCard(app, j, now, byKey, daemonNow));
  // The count is of the cards under it: a device being readied is on its
  // request's card above.
  root.devHead.textContent = `Devices (${rest.length})`;
  root.devHead.hidden = shownDevices.length === 0 && shownJourneys.length > 0;
  reconcile(root.list, shownDevices, (d) => `dev:${deviceKey(d.workerId, d.id)}`,
    (d) => deviceSig(app, d, leases),
    (d) => deviceCard(app, d, leases));
  if (all.length === 0) root.list.replaceChildren(h('p', { class: 'empty', text: 'No devices yet.' }));
  setPager(root.pagerSlot, app, all.length, { page, size });
}

function workerOf(j) { return (j.entry && j.entry.workerId) || ''; }

function rank(d) {
  const i = STATE_ORDER.indexOf(d.state);
  return d.stalled ? -1 : i < 0 ? STATE_ORDER.length : i;
}

function holderOf(app, d, leases) {
  if (!d.leaseId) return '';
  const l = leases.get(deviceKey(d.workerId, d.leaseId));
  return l ? app.store.who(l.requesterId) : '';
}

function deviceSig(app, d, leases) {
  const key = deviceKey(d.workerId, d.id);
  const note = app.store.deviceNotes.get(key);
  const act = app.store.actions.get(key);
  return JSON.stringify([d.state, d.stalled, d.spec, d.leaseId, holderOf(app, d, leases), d.stateSince, note, act]);
}

function deviceCard(app, d, leases) {
  const key = deviceKey(d.workerId, d.id);
  const holder = holderOf(app, d, leases);
  const note = app.store.deviceNotes.get(key);
  const s = d.spec || {};
  return h('article', { class: ['card', `card-${d.state}`], dataset: { deviceId: d.id, state: d.state, workerId: d.workerId } },
    h('header', { class: 'card-head' }, h('h3', { text: deviceTitle(d) }), stateBadge(d.state), d.stalled ? badge('stalled', 'warn') : null),
    h('dl', { class: 'facts' },
      fact('Model', s.model), fact('OS', [s.platform, s.osVersion].filter(Boolean).join(' ')),
      fact('Holder', holder || (d.state === 'leased' ? 'an agent' : '—'), { holder: holder }),
      d.workerId ? fact('Worker', workerLink(app, d.workerId)) : null,
      fact('Since', d.stateSince ? clock(d.stateSince) : ''),
      fact('Id', d.id)),
    d.state === 'quarantined'
      ? h('div', { class: 'failure' },
        h('p', { class: 'reason', text: note ? [cap(note.reason), note.error].filter(Boolean).join(': ') : 'Quarantined: it serves nobody until a clean works.' }),
        retryEl(app, { kind: 'device', key, id: d.id, workerId: d.workerId }))
      : null,
    d.stalled ? h('p', { class: 'warn-line', text: `${d.state} for ${duration(d.transitionAgeMs)}, longer than expected` }) : null);
}

function journeySig(app, j, now, byKey, daemonNow) {
  const dev = j.deviceId ? byKey.get(deviceKey(workerOf(j), j.deviceId)) : null;
  return JSON.stringify([j.stage, j.outcome, j.goneAt > 0, j.deviceId, dev && dev.state, j.strip(now), j.progressBar(),
    stageWords(j, daemonNow), stageDetail(j), failureWords(app, j), app.store.actions.get(j.requestId), app.store.who((j.entry || {}).requesterId)]);
}

function journeyCard(app, j, now, byKey, daemonNow) {
  const e = j.entry || {};
  const dev = j.deviceId ? byKey.get(deviceKey(workerOf(j), j.deviceId)) : null;
  const title = dev ? deviceTitle(dev) : specWords(e.requestSpec) || 'A device';
  const strip = j.strip(now);
  const bar = j.progressBar();
  const stageBadge = j.outcome === 'failed' ? stateBadge('failed') : j.outcome === 'ready' ? stateBadge('ready') : stateBadge(j.stage || 'queued');
  return h('article', {
    class: ['card', 'card-journey', j.outcome === 'failed' && 'card-failed'],
    dataset: { requestId: j.requestId, requester: e.requesterId || '', deviceId: j.deviceId, outcome: j.outcome || '', stage: j.stage },
  },
  h('header', { class: 'card-head' }, h('h3', { text: title }), stageBadge),
  h('p', { class: 'meta' }, `for ${app.store.who(e.requesterId) || 'a requester'} · ${j.requestId}`, dev ? ` · ${dev.id}` : '',
    e.workerId ? ' · ' : '', e.workerId ? workerLink(app, e.workerId) : ''),
  strip ? stripEl(strip) : null,
  h('p', { class: 'stage-line', text: stageWords(j, daemonNow) }),
  stageDetail(j) ? h('p', { class: 'stage-detail', text: stageDetail(j) }) : null,
  bar ? barBlock(bar) : null,
  j.outcome === 'failed'
    ? h('div', { class: 'failure' },
      h('p', { class: 'reason', text: failureWords(app, j) }),
      h('div', { class: 'actions' },
        retryEl(app, { kind: 'request', key: j.requestId, id: j.requestId }),
        h('button', { type: 'button', class: 'btn btn-quiet', on: { click: () => app.dismiss(j.requestId) } }, 'Dismiss')))
    : null);
}

// failureWords says why a request failed: what the event said of it,
// and the daemon's own error once the failed list has it.
function failureWords(app, j) {
  if (j.outcome !== 'failed') return '';
  const listed = app.store.failedList.find((r) => r.id === j.requestId);
  const e = (listed && listed.error) || {};
  const why = j.error && j.error.message ? j.error.message : '';
  const said = errorWords(e);
  if (why && said) return `${why[0].toUpperCase()}${why.slice(1)}: ${said}`;
  return said || errorWords(j.error);
}

// stageDetail is what the driver says of where the current step is (the
// boot's progress); it belongs to its stage and goes with it.
function stageDetail(j) {
  if (j.outcome) return '';
  const p = j.entry && j.entry.progress;
  return p && p.stage === j.stage && typeof p.detail === 'string' ? p.detail : '';
}

function fact(label, value, dataset) {
  return [h('dt', { text: label }), h('dd', { dataset }, value === undefined || value === null || value === '' ? '—' : value)];
}

function cap(s) { return s ? s[0].toUpperCase() + s.slice(1) : s; }
