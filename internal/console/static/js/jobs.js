// Jobs: a component install's record (GET /v1/jobs/{id}) and the one
// fold from the events of its stream (/v1/jobs/{id}/events) to its
// state. apply mirrors internal/jobs.Apply, the daemon's own fold, rule
// for rule, so the page shows what the daemon records and the CLI prints:
//   - a row is made for a worker the job has not heard of;
//   - a new phase clears the last one's figures, so no phase shows
//     another's percentage; within a phase a percentage never goes back;
//   - an error sets the row's outcome to failed unless one is set;
//   - a worker event raises the attempt, marks the row stale, retrying or
//     asked again (no longer retrying), and sets its outcome; a row that
//     ends installed keeps no error from an earlier attempt;
//   - log lines change nothing of the record (JobWatch keeps the latest
//     one per row, for as long as its phase lasts).

// The phases of an install on one worker, in order.
export const PHASES = ['queue', 'download', 'verify', 'record'];

// apply folds one event (its SSE name and decoded data) into job and
// returns the job: the same object changed in place, or for a job event
// a copy of the record it carries.
export function apply(job, name, ev) {
  if (name === 'job') return clone(ev);
  if (!job || !ev) return job;
  switch (name) {
    case 'phase': {
      const r = row(job, ev.workerId);
      if (r.phase !== ev.phase) { delete r.percent; delete r.bytes; delete r.total; }
      r.phase = ev.phase;
      r.status = ev.status;
      break;
    }
    case 'progress': {
      const r = row(job, ev.workerId);
      if (typeof ev.percent === 'number' && (typeof r.percent !== 'number' || ev.percent >= r.percent)) r.percent = ev.percent;
      if (ev.total > 0) {
        r.bytes = Math.max(ev.bytes || 0, r.bytes || 0);
        r.total = ev.total;
      }
      if (r.status === 'start') r.status = 'progress';
      break;
    }
    case 'worker': {
      const r = row(job, ev.workerId);
      r.attempt = Math.max(r.attempt || 0, ev.attempt || 0);
      if (ev.status === 'stale') r.stale = true;
      else if (ev.status === 'retrying') r.status = ev.status;
      else if (ev.status === 'asked') {
        r.stale = false;
        if (r.status === 'retrying') delete r.status;
      }
      if (ev.outcome) r.outcome = ev.outcome;
      // A row that ended installed after a failed attempt has no error
      // left to show.
      if (ev.outcome === 'installed') delete r.error;
      if (ev.version) { r.version = ev.version; r.alreadyInstalled = !!ev.alreadyInstalled; }
      break;
    }
    case 'error': {
      const r = row(job, ev.workerId);
      r.error = { ...ev };
      r.status = 'error';
      if (ev.phase) r.phase = ev.phase;
      if (!r.outcome) r.outcome = 'failed';
      break;
    }
    case 'done':
      job.state = ev.result;
      for (const o of ev.workers || []) {
        const r = row(job, o.workerId);
        r.outcome = o.outcome;
        if (o.error && !r.error) r.error = { ...o.error };
      }
      break;
    default: // log, and anything newer than this page
  }
  return job;
}

// row is the job's row for a worker, made at the end when it has none.
function row(job, workerId) {
  if (!job.workers) job.workers = [];
  let r = job.workers.find((w) => w.workerId === workerId);
  if (!r) { r = { workerId }; job.workers.push(r); }
  return r;
}

function clone(job) {
  return job ? JSON.parse(JSON.stringify(job)) : null;
}

// failedRows lists the rows that did not end installed, as jobs.Failed
// does.
export function failedRows(job) {
  return ((job && job.workers) || []).filter((w) => w.outcome && w.outcome !== 'installed');
}

// JobWatch is what the job page knows of one job: its record, folded
// from the stream while it runs, and the latest line each worker's
// installer printed in its current phase.
export class JobWatch {
  constructor(id) {
    this.id = id;
    this.job = null;
    this.lines = new Map(); // workerId -> the latest installer line
    this.source = ''; // 'record' (read with GET) or 'live' (the stream)
    this.missing = ''; // the daemon's word for a job it does not know
    this.error = ''; // the last read or stream that failed
    this.version = 0;
  }

  get ended() { return !!this.job && this.job.state !== 'running'; }

  // take folds one event in; a log event keeps its line, a row that moved
  // to another phase or ended loses its line.
  take(name, ev) {
    const before = new Map(((this.job && this.job.workers) || []).map((w) => [w.workerId, w.phase]));
    this.job = apply(this.job, name, ev);
    if (name === 'log' && ev && ev.workerId) this.lines.set(ev.workerId, ev.line || '');
    for (const w of (this.job && this.job.workers) || []) {
      if (w.outcome || (before.has(w.workerId) && before.get(w.workerId) !== w.phase)) this.lines.delete(w.workerId);
    }
    this.version++;
  }
}
