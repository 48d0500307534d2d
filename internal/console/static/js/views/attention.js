// The Attention tab: workers that are gone, incompatible or drained,
// devices quarantined or stalled, RAM over budget, requests that failed,
// installs that failed in the last day (each linking to its job's page).

import { h } from '../dom.js';
import { spec as specWords } from '../format.js';
import { keyedTable, retryEl, stateBadge, workerLink } from './common.js';

export function renderAttention(root, app) {
  const { store } = app;
  if (!root.built) {
    root.head = h('h2', { class: 'sub' });
    root.tableSlot = h('div');
    root.append(root.head, root.tableSlot);
    root.built = true;
  }
  const items = store.attention();
  root.head.textContent = `Needs attention (${items.length})`;
  const heads = ['What', 'Which', 'Why', ...(store.gateway ? ['Worker'] : []), ''];
  keyedTable(root.tableSlot, 'attention', heads, items, (a) => a.key,
    (a) => JSON.stringify([a.what, a.title, a.why, a.workerId, store.who(a.requesterId), a.retry && store.actions.get(a.retry.key), store.gateway]),
    (a) => h('tr', { dataset: { kind: a.kind, what: a.what, id: a.id } },
      h('td', null, stateBadge(a.what === 'over RAM budget' ? 'stalled' : a.what), a.what === 'over RAM budget' ? ' over RAM budget' : ''),
      h('td', null, a.kind === 'worker' ? app.link(`/workers/${encodeURIComponent(a.id)}`, a.title) : a.href ? app.link(a.href, a.title) : a.title,
        a.kind === 'worker' || a.kind === 'capacity' ? '' : h('div', { class: 'id', text: a.id }),
        a.spec ? h('div', { class: 'why', text: `${a.requesterId ? `${store.who(a.requesterId)} asked for ` : ''}${specWords(a.spec)}` }) : null),
      h('td', { class: 'why-cell', text: a.why }),
      store.gateway ? h('td', null, workerLink(app, a.workerId)) : null,
      h('td', null, a.retry ? retryEl(app, a.retry) : null)),
    'Nothing needs attention.');
}
