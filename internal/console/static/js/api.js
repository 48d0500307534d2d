// Calls to the daemon's /v1 API with the operator token, and the daemon's
// clock as the browser can tell it from the answers.

// ApiError is an answer with an error status: its HTTP status and the
// error object's stable code and message.
export class ApiError extends Error {
  constructor(status, code, message, detail) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
    this.detail = detail || {};
  }
}

// Unreachable is a call that got no answer at all: the daemon is down, or
// the network between is.
export class Unreachable extends Error {}

// DaemonClock estimates the daemon's clock from the Date header of its
// answers. A Date header is whole seconds, read by the daemon at some
// moment between the call's start and its answer, so each answer bounds
// the offset (daemon minus browser) to an interval; the intersection of
// the intervals narrows as answers come in. An answer that does not fit
// the others (a clock was stepped) starts over from it.
export class DaemonClock {
  constructor() { this.lo = -Infinity; this.hi = Infinity; }

  observe(dateHeader, sentAt, receivedAt) {
    const d = Date.parse(dateHeader || '');
    if (!Number.isFinite(d)) return;
    const lo = d - receivedAt;
    const hi = d + 1000 - sentAt;
    if (lo > this.hi || hi < this.lo) { this.lo = lo; this.hi = hi; return; }
    this.lo = Math.max(this.lo, lo);
    this.hi = Math.min(this.hi, hi);
  }

  // offset is the daemon's clock minus the browser's, in ms (0 before any
  // answer).
  offset() { return Number.isFinite(this.lo) ? Math.round((this.lo + this.hi) / 2) : 0; }

  // now is the daemon's time now, as epoch ms.
  now() { return Date.now() + this.offset(); }
}

// Api calls /v1 with one token. onUnauthorized is called once for a 401,
// whatever the call: the token was revoked or never known.
export class Api {
  constructor(secret, { onUnauthorized } = {}) {
    this.secret = secret;
    this.clock = new DaemonClock();
    this.onUnauthorized = onUnauthorized || (() => {});
    this.lastAnswerAt = 0;
  }

  async request(method, path, { body, signal, headers } = {}) {
    const h = { Authorization: `Bearer ${this.secret}`, Accept: 'application/json' };
    if (body !== undefined) h['Content-Type'] = 'application/json';
    Object.assign(h, headers || {});
    const sentAt = Date.now();
    let resp;
    try {
      resp = await fetch(path, {
        method, headers: h, signal, cache: 'no-store', credentials: 'omit',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      if (e && e.name === 'AbortError') throw e;
      throw new Unreachable(`the daemon did not answer (${e && e.message ? e.message : e})`);
    }
    this.clock.observe(resp.headers.get('Date'), sentAt, Date.now());
    this.lastAnswerAt = Date.now();
    return resp;
  }

  // call sends one request and returns the decoded JSON body (null for
  // none), or throws ApiError for an error status.
  async call(method, path, opts) {
    const resp = await this.request(method, path, opts);
    let doc = null;
    const text = await resp.text();
    if (text) {
      try { doc = JSON.parse(text); } catch { doc = null; }
    }
    if (!resp.ok) throw this.failure(resp.status, doc);
    return doc;
  }

  failure(status, doc) {
    const e = doc && doc.error ? doc.error : {};
    const err = new ApiError(status, e.code, e.message, e);
    if (status === 401) this.onUnauthorized(err);
    return err;
  }

  get(path, opts) { return this.call('GET', path, opts); }

  // stream opens an event stream and returns the response once its status
  // is 200; an error status throws as call does.
  async stream(path, { lastEventId, signal } = {}) {
    const headers = { Accept: 'text/event-stream' };
    if (lastEventId !== undefined && lastEventId !== null) headers['Last-Event-ID'] = String(lastEventId);
    const resp = await this.request('GET', path, { signal, headers });
    if (!resp.ok) {
      let doc = null;
      try { doc = await resp.json(); } catch { doc = null; }
      throw this.failure(resp.status, doc);
    }
    return resp;
  }
}

// readEvents reads a text/event-stream body to its end, calling onEvent
// with each event ({event, id, data}) and onComment with each comment
// line (": connected", ": keepalive"). It returns when the stream ends,
// and throws when reading fails or signal aborts.
export async function readEvents(body, onEvent, onComment) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let ev = { event: '', id: null, data: [] };
  const line = (l) => {
    if (l === '') {
      if (ev.data.length > 0) onEvent({ event: ev.event || 'message', id: ev.id, data: ev.data.join('\n') });
      ev = { event: '', id: null, data: [] };
      return;
    }
    if (l[0] === ':') { if (onComment) onComment(l.slice(1).trim()); return; }
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') ev.data.push(value);
    else if (field === 'event') ev.event = value;
    else if (field === 'id') ev.id = value;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const l = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        line(l.endsWith('\r') ? l.slice(0, -1) : l);
      }
    }
  } finally {
    reader.releaseLock();
  }
}
