// Pieces every tab uses: badges, the step strip, bars, the pager, Retry.

import { h, reconcile } from '../dom.js';

export function badge(text, kind) {
  return h('span', { class: ['badge', kind && `badge-${kind}`], text });
}

// stateBadge colours a device, worker or install state.
export function stateBadge(state) {
  const kinds = {
    ready: 'ok', connected: 'ok', running: 'ok', leased: 'busy',
    provisioning: 'work', reclaiming: 'work', booting: 'work', starting: 'work', downloading: 'work', queued: 'work',
    shutdown: 'idle', deleted: 'idle', drained: 'warn', stopping: 'warn',
    quarantined: 'bad', disconnected: 'bad', incompatible: 'bad', failed: 'bad', stalled: 'warn',
    // an install's job and its rows
    succeeded: 'ok', installed: 'ok', waiting: 'work', verifying: 'work', recording: 'work',
    retrying: 'warn', stale: 'warn', unknown: 'warn',
  };
  return badge(state, kinds[state] || 'idle');
}

// stripEl draws a step strip ({step, state} per step).
export function stripEl(strip) {
  const lit = strip.find((s) => s.state === 'active');
  return h('ol', { class: 'strip', dataset: { lit: lit ? lit.step : '' }, 'aria-label': 'steps' },
    strip.map((s) => h('li', {
      class: ['seg', `seg-${s.state}`], dataset: { step: s.step, state: s.state },
      'aria-current': s.state === 'active' ? 'step' : null,
    }, h('span', { class: 'seg-label', text: s.step }))));
}

// barEl draws a progress bar: determinate only with a value; the fill is
// scaled with a transform (a CSS variable set through CSSOM), never by
// its width.
export function barEl(bar) {
  const el = h('div', {
    class: ['bar', bar.determinate ? 'bar-determinate' : 'bar-indeterminate'],
    role: 'progressbar',
    'aria-valuemin': bar.determinate ? 0 : null,
    'aria-valuemax': bar.determinate ? 100 : null,
    'aria-valuenow': bar.determinate ? bar.value : null,
    'aria-label': bar.component ? `download of ${bar.component}` : 'progress',
    dataset: { determinate: String(bar.determinate), value: bar.determinate ? bar.value : '' },
  }, h('div', { class: 'bar-fill' }));
  if (bar.determinate) el.style.setProperty('--fill', String(bar.value / 100));
  return el;
}

// barBlock is a bar with its percentage and detail line.
export function barBlock(bar) {
  let label;
  if (bar.waiting) label = 'waiting for another install to finish';
  else if (bar.determinate) label = bar.percentText;
  else label = 'downloading, size not known yet';
  return h('div', { class: 'bar-block' },
    h('div', { class: 'bar-head' },
      h('span', { class: 'bar-what', text: bar.component ? `runtime ${bar.component}` : 'download' }),
      h('span', { class: bar.determinate ? 'pct' : 'bar-note', text: label })),
    barEl(bar),
    bar.detail ? h('div', { class: 'bar-detail', text: bar.detail }) : null);
}

// retryEl is a Retry button with what the last press said.
export function retryEl(app, target) {
  const act = app.store.actions.get(target.key) || {};
  return h('div', { class: 'retry' },
    h('button', {
      type: 'button', class: 'btn btn-retry', disabled: act.busy ? true : null,
      dataset: { retry: target.kind, id: target.id },
      on: { click: () => app.retry(target) },
    }, act.busy ? 'Retrying…' : 'Retry'),
    act.message ? h('span', { class: ['retry-msg', act.ok ? 'ok' : 'err'], role: 'status', text: act.message }) : null);
}

// pager draws "1–50 of 500" with previous and next, and the page size;
// the page and size live in the URL (?page=2&size=50).
export function pager(app, total, { page, size }) {
  const pages = Math.max(1, Math.ceil(total / size));
  const from = total === 0 ? 0 : (page - 1) * size + 1;
  const to = Math.min(total, page * size);
  const go = (p, s) => app.setPage(p, s);
  const sizeSel = h('select', { 'aria-label': 'rows per page', on: { change: (e) => go(1, Number(e.target.value)) } },
    [25, 50, 100].map((n) => h('option', { value: n, selected: n === size ? true : null, text: `${n} a page` })));
  return h('nav', { class: 'pager', 'aria-label': 'pages' },
    h('button', { type: 'button', class: 'btn', disabled: page <= 1 ? true : null, on: { click: () => go(page - 1, size) } }, 'Previous'),
    h('span', { class: 'pager-where', text: total === 0 ? 'none' : `${from}–${to} of ${total}` }),
    h('button', { type: 'button', class: 'btn', disabled: page >= pages ? true : null, on: { click: () => go(page + 1, size) } }, 'Next'),
    sizeSel);
}

// setPager puts the pager for total items in slot (nothing when one page
// holds them all), drawing it again only when what it says changes, so a
// button is never swapped under a pointer.
export function setPager(slot, app, total, paging) {
  const sig = total > paging.size ? `${total}:${paging.page}:${paging.size}` : '';
  if (slot.dataset.sig === sig) return;
  slot.dataset.sig = sig;
  slot.replaceChildren(sig ? pager(app, total, paging) : '');
}

// slicePage is the page's part of a list, the page kept within range.
export function slicePage(list, paging) {
  const pages = Math.max(1, Math.ceil(list.length / paging.size));
  const page = Math.min(Math.max(1, paging.page), pages);
  return { rows: list.slice((page - 1) * paging.size, page * paging.size), page, size: paging.size };
}

export function section(title, ...children) {
  return h('section', { class: 'block' }, h('h2', { text: title }), ...children);
}

// workerLink names a worker, linking to its page.
export function workerLink(app, id) {
  if (!id) return '';
  const w = app.store.workerLines().find((x) => x.id === id);
  return app.link(`/workers/${encodeURIComponent(id)}`, w && w.label ? w.label : id);
}

// keyedTable keeps one table in slot and makes its body the rows of
// items, reusing the row of an item whose signature is unchanged (so a
// bar in it keeps animating).
export function keyedTable(slot, cls, heads, items, key, sig, render, empty) {
  const headSig = heads.join('|');
  if (!slot.tableEl || slot.headSig !== headSig) {
    slot.tbody = h('tbody');
    slot.tableEl = h('table', { class: ['grid', cls] },
      h('thead', null, h('tr', null, heads.map((t) => h('th', { scope: 'col', text: t })))), slot.tbody);
    slot.emptyEl = h('p', { class: 'empty', text: empty });
    slot.headSig = headSig;
  }
  reconcile(slot.tbody, items, key, sig, render);
  const want = items.length === 0 ? slot.emptyEl : slot.tableEl;
  if (slot.firstChild !== want || slot.childNodes.length !== 1) slot.replaceChildren(want);
}
