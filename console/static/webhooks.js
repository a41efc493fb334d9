// The webhooks page (/webhooks): the tenant's webhook endpoints
// (webhooks/list: URL, events, enabled; never the secret) and their latest
// deliveries (webhooks/deliveries: event, run, status, attempts, last
// error), read-only. Endpoints are added and changed, and failed
// deliveries sent again, with the API or `executor webhooks`
// (docs/webhooks.md).
import { call } from './api.js';
import { h, append, clear, fmtTime } from './dom.js';

export async function webhooksPage(main) {
  const endpoints = h('section', { class: 'panel', id: 'webhook-list' }, h('h2', {}, 'Webhooks'), h('p', { class: 'muted' }, 'Loading…'));
  const deliveries = h('section', { class: 'panel', id: 'webhook-deliveries' }, h('h2', {}, 'Deliveries'), h('p', { class: 'muted' }, 'Loading…'));
  append(main, endpoints, deliveries);
  const [eps, ds] = await Promise.all([call('/webhooks/list', {}), call('/webhooks/deliveries', { limit: 100 })]);
  clear(endpoints);
  append(endpoints, h('h2', {}, 'Webhooks ', h('span', { class: 'muted' }, '(' + eps.total + ')')),
    h('p', { class: 'muted' }, 'Each endpoint receives its runs\' events, signed (Standard Webhooks). Add and change endpoints with the API or ',
      h('code', {}, 'executor webhooks'), '.'));
  if (!eps.items.length) append(endpoints, h('p', { class: 'muted' }, 'None yet.'));
  else {
    append(endpoints, h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['Endpoint', 'URL', 'Events', 'State', 'Updated'].map((x) => h('th', {}, x)))),
      h('tbody', {}, eps.items.map((w) => h('tr', { dataset: { webhookId: w.id } },
        h('td', {}, h('code', {}, w.id), w.description ? [h('br'), h('span', { class: 'muted' }, w.description)] : null),
        h('td', { class: 'url' }, h('code', {}, w.url)),
        h('td', { class: 'events' }, w.events.map((e) => h('code', {}, e)).flatMap((c, i) => (i ? [' ', c] : [c]))),
        h('td', { class: 'state' }, w.enabled ? h('span', { class: 'badge' }, 'enabled') : h('span', { class: 'badge gate' }, 'disabled')),
        h('td', {}, fmtTime(w.updated_at)))))));
  }
  clear(deliveries);
  append(deliveries, h('h2', {}, 'Deliveries ', h('span', { class: 'muted' }, '(latest ' + ds.items.length + ' of ' + ds.total + ')')));
  if (!ds.items.length) {
    append(deliveries, h('p', { class: 'muted' }, 'None yet.'));
    return;
  }
  append(deliveries, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, ['Delivery', 'Event', 'Run', 'Status', 'Attempts', 'Last error', 'Updated'].map((x) => h('th', {}, x)))),
    h('tbody', {}, ds.items.map((d) => h('tr', { dataset: { deliveryId: d.id, status: d.status } },
      h('td', {}, h('code', {}, d.id)),
      h('td', { class: 'event' }, h('code', {}, d.event_type)),
      h('td', {}, h('a', { href: '/runs/' + encodeURIComponent(d.run_id) }, d.run_id), h('span', { class: 'muted' }, ' #' + d.sequence)),
      h('td', { class: 'status' }, h('span', { class: 'badge status-' + (d.status === 'delivered' ? 'completed' : d.status === 'failed' ? 'failed' : 'running') }, d.status)),
      h('td', { class: 'num' }, String(d.attempts)),
      h('td', { class: 'error' }, d.last_error || ''),
      h('td', {}, fmtTime(d.updated_at)))))));
}
