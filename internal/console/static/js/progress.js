// Honest progress: what the page shows of a request on its way to a
// device, from the waiting entries of /v1/status and the lease events.
//
// The rules:
//   - A bar is determinate only while the daemon gives a percentage
//     (progress.percent present); otherwise it is indeterminate and shows
//     no number.
//   - Within a stage a shown value never goes down: the page keeps the
//     highest percentage (and byte count) it showed for each request and
//     stage.
//   - The detail under a bar belongs to its stage and goes with it.
//   - The step strip lights a step only once its stage has been current
//     for MIN_LIT_MS, so a stage that passes in a blink does not flash a
//     segment of its own; it is merged into the next one (shown done when
//     that one lights). A failed request has no strip: the page cannot
//     tell which step failed, so it shows the reason instead.

import { bytes } from './format.js';

// The strip's steps, in their usual order.
export const STEPS = ['queued', 'downloading', 'provisioning', 'booting', 'ready'];

// MIN_LIT_MS is how long a stage must have been current before its step
// lights.
export const MIN_LIT_MS = 1000;

// stepOf maps a daemon stage to its step on the strip. Cleaning a device
// after another lease readies a device as creating one does, so both
// share a step; "starting" (a device is being readied, the requester not
// yet told how) says nothing more than that: null keeps the step shown.
export function stepOf(stage) {
  switch (stage) {
    case 'queued': return 'queued';
    case 'downloading': return 'downloading';
    case 'reclaiming':
    case 'provisioning': return 'provisioning';
    case 'booting': return 'booting';
    case 'ready':
    case 'granted': return 'ready';
    default: return null;
  }
}

// stageOf is the stage a waiting entry is in: the step its requester was
// last told, else the list's coarser word.
export function stageOf(entry) {
  return (entry.progress && entry.progress.stage) || entry.stage || 'queued';
}

// Journey is one request's way to a device, as the page saw it.
export class Journey {
  constructor(requestId, now) {
    this.requestId = requestId;
    this.firstSeen = now;
    this.history = []; // {step, at}: each step the request entered, in order
    this.stage = '';
    this.stageSince = now;
    this.bar = null; // the current stage's bar: {stage, max, bytesDone, bytesTotal}
    this.entry = null; // the last waiting entry
    this.outcome = null; // null while waiting, then 'ready', 'failed' or 'cancelled'
    this.settledAt = 0;
    this.error = null; // {code, message, reason} of a failed request
    this.deviceId = '';
    this.leaseId = '';
    this.goneAt = 0; // when it left the waiting list without a known outcome
  }

  // observe takes the request's waiting entry as status lists it now.
  observe(entry, now) {
    this.entry = entry;
    this.goneAt = 0;
    if (entry.deviceId) this.deviceId = entry.deviceId;
    const stage = stageOf(entry);
    if (stage !== this.stage) {
      this.stage = stage;
      this.stageSince = now;
      this.bar = null; // a new stage starts its own bar and detail
    }
    const step = stepOf(stage);
    if (step && (this.history.length === 0 || this.history[this.history.length - 1].step !== step)) {
      this.history.push({ step, at: now });
    }
    const p = entry.progress;
    if (stage === 'downloading' && p && p.stage === 'downloading') {
      if (!this.bar) this.bar = { stage, max: null, bytesDone: 0, bytesTotal: 0 };
      if (typeof p.percent === 'number') this.bar.max = this.bar.max === null ? p.percent : Math.max(this.bar.max, p.percent);
      if (p.bytesTotal > 0) {
        this.bar.bytesTotal = p.bytesTotal;
        this.bar.bytesDone = Math.max(this.bar.bytesDone, p.bytesDone || 0);
      }
    }
  }

  // settle records how the request ended.
  settle(outcome, now, detail = {}) {
    if (this.outcome) return;
    this.outcome = outcome;
    this.settledAt = now;
    if (detail.deviceId) this.deviceId = detail.deviceId;
    if (detail.leaseId) this.leaseId = detail.leaseId;
    if (outcome === 'failed') this.error = detail.error || { message: 'the request failed' };
    if (outcome === 'ready') {
      const last = this.history[this.history.length - 1];
      this.history.push({ step: 'ready', at: Math.max(now, last ? last.at : now) });
    }
    this.bar = null;
  }

  // progressBar is what the bar of the current stage shows, or null when
  // the stage has no bar: {determinate, value (0-100 or null), percentText,
  // detail, waiting, component}.
  progressBar() {
    if (this.outcome || this.stage !== 'downloading') return null;
    const p = (this.entry && this.entry.progress) || {};
    const known = p.stage === 'downloading' && typeof p.percent === 'number';
    const b = this.bar || { max: null, bytesDone: 0, bytesTotal: 0 };
    const value = known ? b.max : null;
    let detail = '';
    if (b.bytesTotal > 0) detail = `${bytes(b.bytesDone)} of ${bytes(b.bytesTotal)}`;
    return {
      determinate: known,
      value,
      percentText: known ? `${value}%` : '',
      detail,
      waiting: !!p.waiting,
      component: p.component || '',
    };
  }

  // strip is the step strip now: one {step, state} per step, state done,
  // active or pending; null for a request that failed or was cancelled.
  strip(now) {
    if (this.outcome === 'failed' || this.outcome === 'cancelled') return null;
    const hist = this.history;
    let lit = -1;
    for (let i = 0; i < hist.length; i++) {
      const end = i + 1 < hist.length ? hist[i + 1].at : now;
      if (hist[i].step === 'ready' || end - hist[i].at >= MIN_LIT_MS) lit = i;
    }
    const done = new Set();
    for (let i = 0; i < lit; i++) done.add(hist[i].step);
    const active = lit >= 0 ? hist[lit].step : '';
    return STEPS.map((step) => ({
      step,
      state: step === active ? 'active' : done.has(step) ? 'done' : 'pending',
    }));
  }

  // litStep is the step the strip lights now ('' for none).
  litStep(now) {
    const s = this.strip(now);
    const a = s && s.find((x) => x.state === 'active');
    return a ? a.step : '';
  }

  // nextChange is when the strip will change by itself (a young stage
  // reaching MIN_LIT_MS), or 0.
  nextChange(now) {
    const last = this.history[this.history.length - 1];
    if (!last || this.outcome) return 0;
    const at = last.at + MIN_LIT_MS;
    return at > now ? at : 0;
  }
}

// How long a settled journey stays on the page: a ready one long enough
// to be seen ready, a failed one until retried or dismissed (bounded by
// the time the daemon keeps a settled request), one that left the list
// with no outcome heard until the events would have told.
const KEEP_READY_MS = 10000;
const KEEP_FAILED_MS = 10 * 60 * 1000;
const KEEP_UNHEARD_MS = 15000;

// Journeys keeps a Journey per request the page has seen waiting.
export class Journeys {
  constructor() { this.byId = new Map(); }

  // update takes the waiting list as status answers it now.
  update(waiting, now) {
    const seen = new Set();
    for (const w of waiting || []) {
      seen.add(w.requestId);
      let j = this.byId.get(w.requestId);
      if (!j) { j = new Journey(w.requestId, now); this.byId.set(w.requestId, j); }
      if (!j.outcome) j.observe(w, now);
    }
    for (const j of this.byId.values()) {
      if (!seen.has(j.requestId) && !j.outcome && !j.goneAt) j.goneAt = now;
    }
  }

  // settle records a request's end, as a lease event tells it. A failed
  // request the page never saw waiting gets a journey too, so its failure
  // is shown with its reason.
  settle(requestId, outcome, now, detail) {
    let j = this.byId.get(requestId);
    if (!j) {
      if (outcome !== 'failed') return;
      j = new Journey(requestId, now);
      j.entry = { requestId, requesterId: detail.requesterId || '', requestSpec: detail.requestSpec || null };
      this.byId.set(requestId, j);
    }
    j.settle(outcome, now, detail);
  }

  dismiss(requestId) { this.byId.delete(requestId); }

  // prune drops the journeys that have been shown long enough.
  prune(now) {
    for (const [id, j] of this.byId) {
      const gone =
        (j.outcome === 'ready' && now - j.settledAt > KEEP_READY_MS) ||
        j.outcome === 'cancelled' ||
        (j.outcome === 'failed' && now - j.settledAt > KEEP_FAILED_MS) ||
        (!j.outcome && j.goneAt && now - j.goneAt > KEEP_UNHEARD_MS);
      if (gone) this.byId.delete(id);
    }
  }

  // shown lists the journeys to draw, oldest first.
  shown() { return Array.from(this.byId.values()).sort((a, b) => a.firstSeen - b.firstSeen); }

  // nextChange is the soonest time a strip changes by itself, or 0.
  nextChange(now) {
    let soonest = 0;
    for (const j of this.byId.values()) {
      const t = j.nextChange(now);
      if (t && (!soonest || t < soonest)) soonest = t;
    }
    return soonest;
  }
}
