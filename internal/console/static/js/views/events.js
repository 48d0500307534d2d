// The Events tab: the events the page has seen, newest first, by kind.

import { h } from '../dom.js';
import { clock } from '../format.js';
import { KINDS, kindOf } from '../store.js';
import { keyedTable, setPager, slicePage, workerLink } from './common.js';

export function renderEvents(root, app) {
  const { store } = app;
  const only = app.eventKinds();
  if (!root.built) {
    root.filters = h('fieldset', { class: 'filters' }, h('legend', { text: 'Show' }),
      KINDS.map((k) => h('label', { class: 'filter' },
        h('input', { type: 'checkbox', value: k, dataset: { kind: k }, on: { change: () => app.setEventKinds(checked(root)) } }), ` ${k}`)));
    root.head = h('h2', { class: 'sub' });
    root.tableSlot = h('div');
    root.pagerSlot = h('div');
    root.append(root.filters, root.head, root.tableSlot, root.pagerSlot);
    root.built = true;
  }
  for (const box of root.filters.querySelectorAll('input')) box.checked = only.has(box.value);
  const list = store.events.list;
  const shown = [];
  for (let i = list.length - 1; i >= 0; i--) if (only.has(kindOf(list[i].event))) shown.push(list[i]);
  const { rows, page, size } = slicePage(shown, app.paging());
  root.head.textContent = `Events (${shown.length} shown of ${list.length} kept)`;
  const gateway = store.gateway;
  const heads = ['Seq', 'Time', 'Event', ...(gateway ? ['Worker'] : []), 'Details'];
  keyedTable(root.tableSlot, 'events', heads, rows, (ev) => ev.id, () => (gateway ? 'g' : 'w'),
    (ev) => h('tr', { dataset: { eventId: ev.id, event: ev.event, seq: ev.seq } },
      h('td', { class: 'num', text: String(ev.seq) }),
      h('td', { text: clock(ev.timestamp) }),
      h('td', null, h('code', { text: ev.event })),
      gateway ? h('td', null, workerLink(app, (ev.payload && ev.payload.workerId) || '')) : null,
      h('td', { class: 'details', text: details(ev.payload) })),
    'No events of these kinds.');
  setPager(root.pagerSlot, app, shown.length, { page, size });
}

function checked(root) {
  return new Set(Array.from(root.filters.querySelectorAll('input:checked')).map((b) => b.value));
}

// details says a payload's fields in one line: key=value for plain
// values, nested objects in JSON, cut at 240 characters.
function details(p) {
  if (!p || typeof p !== 'object') return '';
  const parts = [];
  for (const [k, v] of Object.entries(p)) {
    if (k === 'workerId') continue;
    parts.push(`${k}=${v !== null && typeof v === 'object' ? JSON.stringify(v) : v}`);
  }
  const s = parts.join(' ');
  return s.length > 240 ? `${s.slice(0, 239)}…` : s;
}
