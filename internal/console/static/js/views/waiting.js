// The Waiting tab: every open request, where it is and what it waits
// for; a download shows its bar.

import { h } from '../dom.js';
import { duration, spec as specWords } from '../format.js';
import { barBlock, keyedTable, setPager, slicePage, stateBadge, workerLink } from './common.js';
import { waitWords } from './words.js';
import { stageOf } from '../progress.js';

export function renderWaiting(root, app) {
  const { store } = app;
  if (!root.built) {
    root.head = h('h2', { class: 'sub' });
    root.tableSlot = h('div');
    root.pagerSlot = h('div');
    root.append(root.head, root.tableSlot, root.pagerSlot);
    root.built = true;
  }
  const waiting = store.waiting();
  const { rows, page, size } = slicePage(waiting, app.paging());
  const daemonNow = app.api.clock.now();
  const gateway = store.gateway;
  const heads = ['Requester', 'Asked for', 'Stage', 'Place', 'Waiting for', ...(gateway ? ['Worker'] : []), 'Progress', 'Request'];
  root.head.textContent = `Waiting (${waiting.length})`;
  const view = (w) => {
    const j = store.journeys.byId.get(w.requestId);
    const p = w.progress || {};
    const stage = stageOf(w);
    return {
      w, stage, p,
      bar: j ? j.progressBar() : null,
      place: p.queuePosition || w.queuePosition || 0,
      why: stage === 'queued' ? waitWords(p.wait, daemonNow) : '',
      // When the request was made, on the browser's clock: the list's
      // waitingMs were as of its read.
      since: store.statusAt - w.waitingMs,
    };
  };
  const items = rows.map(view);
  keyedTable(root.tableSlot, 'waiting', heads, items, (v) => v.w.requestId,
    (v) => JSON.stringify([v.stage, v.place, v.why, v.bar, v.p.etaMs, v.p.detail, v.w.workerId, store.who(v.w.requesterId), gateway]),
    (v) => h('tr', { dataset: { requestId: v.w.requestId, requester: v.w.requesterId, stage: v.stage } },
      h('td', { title: v.w.requesterId, text: store.who(v.w.requesterId) }),
      h('td', { text: specWords(v.w.requestSpec) }),
      h('td', null, stateBadge(v.stage)),
      h('td', { class: 'place', text: v.place ? String(v.place) : '—' }),
      h('td', null, h('span', { class: 'waited', dataset: { waitedSince: v.since }, text: duration(Date.now() - v.since) }),
        v.why ? h('div', { class: 'why', text: v.why }) : null),
      gateway ? h('td', null, workerLink(app, v.w.workerId)) : null,
      h('td', { class: 'progress-cell' }, v.bar ? barBlock(v.bar) : [v.p.etaMs ? `estimate ${duration(v.p.etaMs)}` : '', v.p.detail ? h('div', { class: 'why', text: v.p.detail }) : null]),
      h('td', { class: 'id', text: v.w.requestId })),
    'Nobody is waiting.');
  setPager(root.pagerSlot, app, waiting.length, { page, size });
}

// tick counts the waits up in place.
export function tick(root) {
  for (const el of root.querySelectorAll('[data-waited-since]')) el.textContent = duration(Date.now() - Number(el.dataset.waitedSince));
}
