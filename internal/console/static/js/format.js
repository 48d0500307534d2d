// How numbers, sizes, durations and times read on the page.

// bytes says a size in binary units, 2.1 GiB: one unit system on every
// page, the one RAM (a host's, a budget's) is counted in.
export function bytes(n) {
  if (!Number.isFinite(n) || n < 0) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(n >= 100 ? 0 : 1)} ${units[i]}`;
}

// duration says a span of milliseconds to the second: 45s, 14m 58s, 2h 5m.
export function duration(ms) {
  if (!Number.isFinite(ms)) return '';
  const neg = ms < 0;
  let s = Math.floor(Math.abs(ms) / 1000);
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hr = Math.floor(s / 3600); s -= hr * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  let out;
  if (d > 0) out = `${d}d ${hr}h`;
  else if (hr > 0) out = `${hr}h ${m}m`;
  else if (m > 0) out = `${m}m ${s}s`;
  else out = `${s}s`;
  return neg ? `-${out}` : out;
}

// shortDuration says a span that may last less than a second, as waits
// do: 203 ms, 4.2 s, then as duration says it (1m 5s).
export function shortDuration(ms) {
  if (!Number.isFinite(ms)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return duration(ms);
}

// minute says an epoch-ms time as the browser's local hour and minute:
// 14:05.
export function minute(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hour12: false });
}

// clock says an epoch-ms time as the browser's local time of day, with
// the date when it is not today.
export function clock(ms) {
  if (!ms) return '';
  const t = new Date(ms);
  const now = new Date();
  const hms = t.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  if (t.toDateString() === now.toDateString()) return hms;
  return `${t.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${hms}`;
}

// spec says what a request asked for or what a device is.
export function spec(s) {
  if (!s) return '';
  const parts = [s.platform];
  if (s.model) parts.push(s.model);
  if (s.class) parts.push(s.class);
  if (s.osVersion) parts.push(s.osVersion);
  return parts.filter(Boolean).join(' · ');
}
