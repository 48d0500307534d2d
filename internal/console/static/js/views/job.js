// A job's page, /jobs/{id}: what it installs, its state and times, a row
// per worker with its phase and an honest bar, and for each worker that
// did not end installed where and why it failed. A running job is drawn
// live from its stream; an ended one from its record.

import { h } from '../dom.js';
import { bytes, clock, duration } from '../format.js';
import { failedRows } from '../jobs.js';
import { jobWhat } from '../store.js';
import { badge, barEl, keyedTable, section, stateBadge } from './common.js';

const PHASE_WORDS = { queue: 'waiting', download: 'downloading', verify: 'verifying', record: 'recording' };

// rowWord is the one word a worker's row is in: waiting, downloading,
// verifying, recording, then installed, failed or unknown; stale or
// retrying while the gateway cannot hear the worker.
export function rowWord(r) {
  if (r.outcome) return r.outcome;
  if (r.stale) return 'stale';
  if (r.status === 'retrying') return 'retrying';
  return PHASE_WORDS[r.phase] || 'waiting';
}

// rowPercent is the row's percentage as the page shows it (whole, never
// rounded up), or null when none is known.
export function rowPercent(r) {
  return !r.outcome && r.phase === 'download' && typeof r.percent === 'number' ? Math.floor(r.percent) : null;
}

// rowSummary says where a row is, in a few words: downloading 41%.
export function rowSummary(r) {
  const pct = rowPercent(r);
  return pct === null ? rowWord(r) : `${rowWord(r)} ${pct}%`;
}

export function jobBadge(state) {
  return badge(state, state === 'running' ? 'work' : state === 'succeeded' ? 'ok' : 'bad');
}

export function renderJob(root, app, id) {
  const { store } = app;
  const watch = store.job && store.job.id === id ? store.job : null;
  if (!root.built) {
    root.top = h('div');
    root.rowSlot = h('div');
    root.errSlot = h('div', { class: 'job-errors' });
    root.errSection = section('What went wrong', root.errSlot);
    root.append(root.top, section('Workers', root.rowSlot), root.errSection);
    root.built = true;
  }
  const back = h('p', null, app.link('/workers', '← Workers'), ' · ', app.link('/attention', 'Attention'));
  if (!watch || !watch.job) {
    let text = `Reading job ${id}…`;
    if (watch && watch.missing) text = watch.missing;
    else if (watch && watch.error) text = `Could not read job ${id}: ${watch.error}`;
    root.top.replaceChildren(back, h('p', { class: watch && watch.missing ? 'reason' : 'empty', dataset: { jobMissing: watch && watch.missing ? id : null }, text }));
    root.rowSlot.replaceChildren();
    root.errSection.hidden = true;
    return;
  }
  const job = watch.job;
  const daemonNow = app.api.clock.now();
  const sig = JSON.stringify([job.id, job.state, job.spec, job.createdAt, job.endedAt, watch.source, watch.error, store.gateway]);
  if (root.top.dataset.sig !== sig) {
    root.top.dataset.sig = sig;
    const warn = watch.error && !watch.ended ? h('p', { class: 'warn-line', text: `Following the job: ${watch.error}; trying again` }) : '';
    root.top.replaceChildren(back,
      h('header', { class: 'page-head', dataset: { jobId: job.id, state: job.state, source: watch.source } },
        h('h2', { text: `Install ${jobWhat(job)}` }), jobBadge(job.state),
        h('span', { class: 'meta job-source', text: sourceWords(watch) })),
      h('dl', { class: 'facts facts-wide' },
        fact('What', jobWhat(job)), fact('State', job.state),
        fact('Created', clock(job.createdAt)),
        job.endedAt
          ? fact('Took', duration(job.endedAt - job.createdAt), { took: '' })
          : fact('Running for', h('span', { class: 'job-since', dataset: { since: job.createdAt }, text: duration(daemonNow - job.createdAt) })),
        store.gateway ? fact('Workers', choiceWords(job.spec && job.spec.workers)) : null,
        fact('Rows', rowCounts(job)),
        fact('Job', h('span', { class: 'id', text: job.id }))),
      warn);
  }
  const rows = job.workers || [];
  keyedTable(root.rowSlot, 'job-rows', ['Worker', 'State', 'Progress'], rows, (r) => r.workerId,
    (r) => JSON.stringify([r, watch.lines.get(r.workerId) || '']),
    (r) => rowEl(app, r, watch.lines.get(r.workerId) || ''),
    'No worker has been asked yet.');
  const bad = failedRows(job);
  root.errSection.hidden = bad.length === 0;
  if (root.errSlot.dataset.sig !== JSON.stringify(bad)) {
    root.errSlot.dataset.sig = JSON.stringify(bad);
    root.errSlot.replaceChildren(...bad.map((r) => errorBlock(app, r)));
  }
}

function sourceWords(watch) {
  switch (watch.source) {
    case 'live': return watch.ended ? 'followed live to its end' : 'live';
    case 'reconnecting': return 'reconnecting…';
    default: return watch.ended ? 'from the job’s record' : 'reading…';
  }
}

function choiceWords(c) {
  if (c === 'all') return 'all';
  if (Array.isArray(c)) return c.join(', ');
  return '—';
}

function rowCounts(job) {
  const n = {};
  for (const r of job.workers || []) { const w = rowWord(r); n[w] = (n[w] || 0) + 1; }
  return Object.entries(n).map(([w, k]) => `${k} ${w}`).join(', ') || '—';
}

function workerName(app, r) {
  const w = app.store.workerLines().find((x) => x.id === r.workerId);
  return r.label || (w && w.label) || r.workerId;
}

function rowEl(app, r, line) {
  const word = rowWord(r);
  const name = workerName(app, r);
  return h('tr', { dataset: { workerId: r.workerId, state: word } },
    h('td', null, app.link(`/workers/${encodeURIComponent(r.workerId)}`, name),
      name !== r.workerId ? h('div', { class: 'id', text: r.workerId }) : null),
    h('td', null, stateBadge(word),
      r.attempt > 1 ? h('div', { class: 'why job-attempt', text: `attempt ${r.attempt}` }) : null),
    h('td', { class: 'progress-cell job-progress' }, progressEl(r, name, line)));
}

// progressEl is a row's bar and what is under it. A row still running has
// a bar, determinate only while its download's percentage is known; an
// ended row says what it ended with.
function progressEl(r, name, line) {
  if (r.outcome === 'installed') {
    const v = r.version ? ` ${r.version}` : '';
    return h('span', { class: 'why', text: r.alreadyInstalled ? `already installed${v}` : `installed${v}` });
  }
  if (r.outcome) {
    const at = typeof r.percent === 'number' ? `stopped at ${Math.floor(r.percent)}%` : '';
    const size = r.total > 0 ? `${bytes(r.bytes || 0)} of ${bytes(r.total)}` : '';
    const words = [at, size].filter(Boolean).join(' · ');
    return words ? h('span', { class: 'why', text: words }) : null;
  }
  if (r.stale) return h('span', { class: 'warn-line', text: 'the worker said nothing for too long' });
  const pct = rowPercent(r);
  const determinate = pct !== null;
  let note;
  if (r.status === 'retrying') note = 'its uplink failed; asking it again';
  else if (!r.phase || r.phase === 'queue') note = 'waiting for another install on the platform';
  else if (r.phase === 'download') note = 'size not known yet';
  else if (r.phase === 'verify') note = 'checking the runtime is there';
  else note = 'writing simlock’s record of it';
  const el = barEl({ determinate, value: determinate ? r.percent : null, component: '' });
  el.setAttribute('aria-label', `${PHASE_WORDS[r.phase] || 'install'} on ${name}`);
  return h('div', { class: 'bar-block' },
    h('div', { class: 'bar-head' },
      h('span', { class: 'bar-what', text: r.phase || 'queue' }),
      h('span', { class: determinate ? 'pct' : 'bar-note', text: determinate ? `${pct}%` : note })),
    el,
    r.phase === 'download' && r.total > 0 ? h('div', { class: 'bar-detail', text: `${bytes(r.bytes || 0)} of ${bytes(r.total)}` }) : null,
    line ? h('div', { class: 'job-line', title: line, text: line }) : null);
}

// errorBlock says where and why a row did not end installed: the phase,
// the worker, the code and message, and whether the gateway retried it.
function errorBlock(app, r) {
  const e = r.error;
  const name = workerName(app, r);
  let retried = 'not retried';
  if (e && e.transient) {
    const n = Math.max(0, (e.attempts || 1) - 1);
    retried = `transport error, retried ${n} time${n === 1 ? '' : 's'}`;
  } else if (!e && r.attempt > 1) {
    retried = `asked ${r.attempt} times`;
  }
  const message = e ? e.message : r.stale
    ? 'the worker said nothing for longer than any install may take; how it ended is unknown'
    : 'nobody saw how the install ended on this worker';
  return h('article', { class: ['card', 'card-failed', 'job-error'], dataset: { workerId: r.workerId, outcome: r.outcome, code: e ? e.code : '' } },
    h('header', { class: 'card-head' }, h('h3', { text: `${name}: ${r.outcome}${e && e.phase ? ` in ${e.phase}` : ''}` }), stateBadge(r.outcome)),
    h('dl', { class: 'facts' },
      fact('Phase', (e && e.phase) || r.phase || '—', { field: 'phase' }),
      fact('Worker', app.link(`/workers/${encodeURIComponent(r.workerId)}`, name), { field: 'worker' }),
      fact('Code', e ? e.code : '—', { field: 'code' }),
      fact('Message', message, { field: 'message' }),
      fact('Retries', retried, { field: 'retries' })));
}

// tick counts a running job's time up in place.
export function tick(root, daemonNow) {
  for (const el of root.querySelectorAll('.job-since[data-since]')) el.textContent = duration(daemonNow - Number(el.dataset.since));
}

function fact(label, value, dataset) {
  return [h('dt', { text: label }), h('dd', { dataset }, value === undefined || value === null || value === '' ? '—' : value)];
}
