// The Leases tab: who holds what, and for how long yet on the daemon's
// clock.

import { h } from '../dom.js';
import { clock, duration } from '../format.js';
import { deviceKey, deviceTitle } from '../store.js';
import { keyedTable, setPager, slicePage, workerLink } from './common.js';

export function renderLeases(root, app) {
  const { store } = app;
  if (!root.built) {
    root.head = h('h2', { class: 'sub' });
    root.tableSlot = h('div');
    root.pagerSlot = h('div');
    root.append(root.head, root.tableSlot, root.pagerSlot);
    root.built = true;
  }
  const devices = new Map(store.devices().map((d) => [deviceKey(d.workerId, d.id), d]));
  const leases = store.leases().slice().sort((a, b) => a.grantedAt - b.grantedAt || a.id.localeCompare(b.id));
  const { rows, page, size } = slicePage(leases, app.paging());
  const gateway = store.gateway;
  const daemonNow = app.api.clock.now();
  root.head.textContent = `Leases (${leases.length})`;
  const heads = ['Holder', 'Device', ...(gateway ? ['Worker'] : []), 'Granted', 'Expires in', 'Last renewed', 'Lease'];
  keyedTable(root.tableSlot, 'leases', heads, rows, (l) => l.id,
    (l) => {
      const d = devices.get(deviceKey(l.workerId, l.deviceId));
      return JSON.stringify([store.who(l.requesterId), l.ttlDeadline, l.lastRenewedAt, l.grantedAt, d && d.spec, gateway]);
    },
    (l) => {
      const d = devices.get(deviceKey(l.workerId, l.deviceId));
      return h('tr', { dataset: { leaseId: l.id, deviceId: l.deviceId } },
        h('td', { class: 'holder', title: l.requesterId, text: store.who(l.requesterId) }),
        h('td', null, d ? deviceTitle(d) : '', h('span', { class: 'id', text: ` ${l.deviceId}` })),
        gateway ? h('td', null, workerLink(app, l.workerId)) : null,
        h('td', { text: clock(l.grantedAt) }),
        h('td', { class: 'countdown', dataset: { expiresAt: l.ttlDeadline }, text: expiresIn(l.ttlDeadline, daemonNow) }),
        h('td', { class: 'ago', dataset: { since: l.lastRenewedAt }, text: ago(l.lastRenewedAt, daemonNow) }),
        h('td', { class: 'id', text: l.id }));
    },
    'No leases.');
  setPager(root.pagerSlot, app, leases.length, { page, size });
}

// expiresIn counts down to a deadline on the daemon's clock.
export function expiresIn(deadline, daemonNow) {
  return deadline > daemonNow ? duration(deadline - daemonNow) : 'expiring';
}

export function ago(t, daemonNow) {
  if (!t) return '—';
  return `${duration(Math.max(0, daemonNow - t))} ago`;
}

// tick updates the countdowns and ages in place, once a second, without
// drawing the table again.
export function tick(root, daemonNow) {
  for (const el of root.querySelectorAll('[data-expires-at]')) el.textContent = expiresIn(Number(el.dataset.expiresAt), daemonNow);
  for (const el of root.querySelectorAll('td[data-since]')) el.textContent = ago(Number(el.dataset.since), daemonNow);
}
