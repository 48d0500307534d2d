// Sentences about a waiting request, shared by the Devices and Waiting
// tabs.

import { duration } from '../format.js';

// waitWords says what the first request in line waits for, counted on
// the daemon's clock.
export function waitWords(w, daemonNow) {
  if (!w) return '';
  let s;
  switch (w.limit) {
    case 'machine-running': s = `${w.inUse}/${w.max} running on the machine`; break;
    case 'devices': s = `${w.inUse}/${w.max} devices kept`; break;
    case 'ram-budget': s = `RAM budget ${w.inUse}/${w.max} MiB in use`; break;
    default: s = `${w.inUse}/${w.max} running`;
  }
  if (w.leaseId) {
    s += `; ${w.leaseId} held by ${w.holder || 'someone'}`;
    if (w.endsAt) s += w.endsAt > daemonNow ? `, ends in ${duration(w.endsAt - daemonNow)}` : ', due to end now';
  }
  return s;
}

// stageWords says where a journey is, in a line.
export function stageWords(j, daemonNow) {
  if (j.outcome === 'ready') return j.leaseId ? `Ready: granted as ${j.leaseId}` : 'Ready';
  if (j.outcome === 'failed') return 'Failed';
  if (j.outcome === 'cancelled') return 'Cancelled';
  if (j.goneAt) return 'Left the list; waiting to hear how it ended';
  const e = j.entry || {};
  const p = e.progress || {};
  const eta = p.etaMs > 0 ? ` (estimate ${duration(p.etaMs)})` : '';
  switch (j.stage) {
    case 'queued': {
      const place = p.queuePosition || e.queuePosition;
      const why = waitWords(p.wait, daemonNow);
      return `In line${place ? `, place ${place}` : ''}${why ? ` — ${why}` : ''}`;
    }
    case 'downloading':
      return p.waiting ? `Waiting to download ${p.component || 'its runtime'}: another install runs first` : `Downloading ${p.component || 'its runtime'}`;
    case 'reclaiming': return `Cleaning a device for it${eta}`;
    case 'provisioning': return `Creating its device${eta}`;
    case 'booting': return `Booting its device${eta}`;
    case 'starting': return 'A device is being readied';
    default: return j.stage || 'Waiting';
  }
}
