// The Workers tab's usage block: the leases of the last hour, a bar per
// minute from GET /v1/usage (see live.js, usagePath), with a summary in
// words; and on a gateway the busiest workers of that hour, from the same
// answer's byWorker.

import { ApiError, Unreachable } from '../api.js';
import { h, svg } from '../dom.js';
import { minute, shortDuration } from '../format.js';
import { workerLink } from './common.js';

// BUSIEST is how many workers the ranking lists.
export const BUSIEST = 5;

// outcomes counts what became of a slice's requests (UsageFigures):
// asked for, granted (from any source), refused (every rejection reason
// but cancelled, killed and timeout), timed out and cancelled.
export function outcomes(f) {
  const t = (f && f.totals) || {};
  const sum = (m) => Object.values(m || {}).reduce((a, n) => a + n, 0);
  return { asked: t.requests || 0, granted: sum(t.granted), refused: sum(t.rejected), timedOut: t.timedOut || 0, cancelled: t.cancelled || 0 };
}

function quiet(o) { return o.asked + o.granted + o.refused + o.timedOut + o.cancelled === 0; }

function count(n, one) { return `${n} ${one}${n === 1 ? '' : 's'}`; }

// summaryWords says the hour in a sentence: 4 leases granted in the last
// hour, 1 refused (5 asked for).
export function summaryWords(res) {
  const o = outcomes(res);
  if (quiet(o)) return 'No lease was asked for, granted or refused in the last hour.';
  const ended = [`${o.refused} refused`];
  if (o.timedOut) ended.push(`${o.timedOut} timed out`);
  if (o.cancelled) ended.push(`${o.cancelled} cancelled`);
  return `${count(o.granted, 'lease')} granted in the last hour, ${ended.join(', ')} (${o.asked} asked for).`;
}

// waitWords says how long the hour's grants waited, or '' for none.
function waitWords(res) {
  const w = res.percentiles && res.percentiles.wait;
  if (!w || !w.count) return '';
  return `Waited for a device: p50 ${shortDuration(w.p50)}, p90 ${shortDuration(w.p90)}, p99 ${shortDuration(w.p99)}.`;
}

// busiest ranks the workers of the hour (byWorker) by leases granted,
// then by requests, then by name (nameOf(id)); a worker asked for nothing
// is not listed. At most n.
export function busiest(res, nameOf, n = BUSIEST) {
  return Object.entries((res && res.byWorker) || {})
    .map(([id, f]) => ({ id, name: nameOf(id), ...outcomes(f), wait: (f.percentiles && f.percentiles.wait) || { count: 0 } }))
    .filter((w) => !quiet(w))
    .sort((a, b) => b.granted - a.granted || b.asked - a.asked || a.name.localeCompare(b.name) || a.id.localeCompare(b.id))
    .slice(0, n);
}

// problemWords says why there are no figures to draw.
export function problemWords(e) {
  if (e instanceof Unreachable) return 'The daemon did not answer, so there are no figures for the last hour; they are read again when it does.';
  if (e instanceof ApiError && e.status === 403) return `This token may not read the usage figures (403 ${e.code || 'FORBIDDEN'}).`;
  if (e instanceof ApiError && e.code === 'HISTORY_NOT_KEPT') return 'The daemon keeps no events of the last hour (410 HISTORY_NOT_KEPT), so there is nothing to draw.';
  if (e instanceof ApiError) return `The usage figures could not be read: ${e.status}${e.code ? ` ${e.code}` : ''}: ${e.message}`;
  return `The usage figures could not be read: ${e && e.message ? e.message : e}`;
}

// renderUsage draws the block into slot, again only when what it shows
// changed (each read answers a new window end, so the answer itself
// always differs).
export function renderUsage(slot, app) {
  const { store } = app;
  const res = store.usage;
  const err = store.usageError;
  const gateway = store.gateway;
  const names = gateway ? store.workerLines().map((w) => [w.id, w.label]) : [];
  const sig = JSON.stringify([gateway, names, err ? problemWords(err) : '',
    res && [res.series, res.totals, res.percentiles, res.byWorker, res.partial, res.coversFrom]]);
  if (slot.dataset.sig === sig) return;
  slot.dataset.sig = sig;

  const hour = h('div', { class: 'usage-hour' }, h('h2', { text: 'Leases, last hour' }));
  let state;
  if (err) {
    state = 'error';
    hour.append(h('p', { class: 'usage-problem', role: 'status', text: problemWords(err) }));
  } else if (!res) {
    state = 'reading';
    hour.append(h('p', { class: 'empty', text: 'Reading the usage figures…' }));
  } else {
    const o = outcomes(res);
    const words = summaryWords(res);
    state = quiet(o) ? 'empty' : 'chart';
    hour.append(h('p', { class: 'usage-summary', dataset: { granted: o.granted, refused: o.refused, asked: o.asked }, text: words }));
    if (state === 'chart') {
      const offset = app.api.clock.offset();
      hour.append(
        waitWords(res) ? h('p', { class: 'usage-wait', text: waitWords(res) }) : null,
        chartEl(res, `Leases, last hour: ${words}`, offset),
        legendEl());
    }
    if (res.partial && res.coversFrom) {
      hour.append(h('p', { class: 'usage-partial', text: `The daemon's event log begins at ${minute(res.coversFrom - app.api.clock.offset())}: the minutes before it (shaded) are not counted.` }));
    }
  }
  const block = h('section', { class: ['usage', !gateway && 'usage-solo'], dataset: { usage: state }, 'aria-label': 'usage of the last hour' }, hour,
    gateway ? busiestEl(app, err ? null : res) : null);
  slot.replaceChildren(block);
}

function busiestEl(app, res) {
  const el = h('div', { class: 'usage-busiest' }, h('h2', { text: 'Busiest workers' }));
  if (!res) return el;
  const nameOf = (id) => {
    const w = app.store.workerLines().find((x) => x.id === id);
    return (w && w.label) || id;
  };
  const rows = busiest(res, nameOf);
  if (rows.length === 0) {
    el.append(h('p', { class: 'empty', text: 'No worker was asked for a lease in the last hour.' }));
    return el;
  }
  el.append(h('table', { class: ['grid', 'busiest'] },
    h('thead', null, h('tr', null, ['Worker', 'Granted', 'Refused', 'p90 wait'].map((t) => h('th', { scope: 'col', text: t })))),
    h('tbody', null, rows.map((w) => h('tr', { dataset: { workerId: w.id, granted: w.granted, refused: w.refused, p90: w.wait.count ? w.wait.p90 : '' } },
      h('td', { class: 'worker' }, workerLink(app, w.id)),
      h('td', { class: 'num granted', text: String(w.granted) }),
      h('td', { class: 'num refused', text: String(w.refused) }),
      h('td', { class: 'num wait', text: w.wait.count ? shortDuration(w.wait.p90) : '—' }))))));
  return el;
}

// The chart's box, in its own units (the SVG scales to the width it is
// given): the plot between LEFT and W - RIGHT, TOP and BOTTOM, the
// minutes' labels under it.
const W = 720;
const H = 172;
const LEFT = 30;
const RIGHT = 6;
const TOP = 8;
const BOTTOM = 150;

const r2 = (n) => Math.round(n * 100) / 100;

// chartEl draws a bar per minute: requests as a pale bar, grants as a
// solid one inside it, both up from the line; the requests that ended
// without a lease (the series' rejected: refused, timed out, cancelled)
// in red, down from it. Each minute's title says its figures.
function chartEl(res, label, offset) {
  const pts = res.series || [];
  const n = Math.max(1, pts.length);
  const up = Math.max(1, ...pts.map((p) => Math.max(p.requests, p.granted)));
  const down = Math.max(0, ...pts.map((p) => p.rejected));
  const unit = (BOTTOM - TOP) / (up + down);
  const base = TOP + up * unit;
  const slotW = (W - LEFT - RIGHT) / n;
  const barW = slotW * 0.72;
  const rect = (cls, x, y, w, ht) => svg('rect', { class: cls, x: r2(x), y: r2(y), width: r2(w), height: r2(ht) });
  const text = (cls, x, y, t) => svg('text', { class: cls, x: r2(x), y: r2(y), text: t });
  const kids = [];
  const step = 60000; // the page asks for one-minute buckets
  if (res.partial && res.coversFrom > res.from) {
    const w = Math.min(n, (res.coversFrom - res.from) / step) * slotW;
    kids.push(rect('usage-nodata', LEFT, TOP, w, BOTTOM - TOP));
  }
  pts.forEach((p, i) => {
    const x = LEFT + i * slotW + (slotW - barW) / 2;
    kids.push(svg('g', { class: 'usage-minute', dataset: { at: p.at, requests: p.requests, granted: p.granted, rejected: p.rejected } },
      svg('title', { text: `${minute(p.at - offset)}: ${p.requests} asked for, ${p.granted} granted, ${p.rejected} not granted` }),
      rect('usage-hit', LEFT + i * slotW, TOP, slotW, BOTTOM - TOP),
      p.requests ? rect('usage-asked', x, base - p.requests * unit, barW, p.requests * unit) : null,
      p.granted ? rect('usage-granted', x + barW * 0.2, base - p.granted * unit, barW * 0.6, p.granted * unit) : null,
      p.rejected ? rect('usage-refused', x, base, barW, p.rejected * unit) : null));
  });
  kids.push(svg('line', { class: 'usage-axis', x1: LEFT, x2: W - RIGHT, y1: r2(base), y2: r2(base) }));
  kids.push(text('usage-y', LEFT - 5, TOP + 9, String(up)));
  if (base > TOP + 18) kids.push(text('usage-y', LEFT - 5, base + 4, '0'));
  if (down && BOTTOM - base > 14) kids.push(text('usage-y', LEFT - 5, BOTTOM, String(down)));
  const at = (i) => (pts[i] ? minute(pts[i].at - offset) : '');
  kids.push(text('usage-x usage-x-start', LEFT, H - 4, at(0)));
  kids.push(text('usage-x usage-x-mid', LEFT + (W - LEFT - RIGHT) / 2, H - 4, at(Math.floor(n / 2))));
  kids.push(text('usage-x usage-x-end', W - RIGHT, H - 4, 'now'));
  return svg('svg', { class: 'usage-chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label },
    svg('title', { text: label }), kids);
}

function legendEl() {
  const item = (cls, words) => h('li', null, h('span', { class: ['usage-key', cls], 'aria-hidden': 'true' }), words);
  return h('ul', { class: 'usage-legend' },
    item('usage-key-asked', 'asked for'),
    item('usage-key-granted', 'granted'),
    item('usage-key-refused', 'not granted: refused, timed out or cancelled (below the line)'));
}
