// The schedules page (/schedules): the tenant's schedules, read-only
// (schedules/list): what each runs, when (its cron expressions or
// intervals, time zone and jitter), its overlap policy, whether it is
// paused, the actions taken and skipped, and the next ones. A schedule's
// runs are ordinary runs, linked from here. Schedules are created and
// changed with the API or `executor schedules` (docs/schedules.md).
import { call } from './api.js';
import { h, append, clear, fmtTime } from './dom.js';

export async function schedulesPage(main) {
  const panel = h('section', { class: 'panel', id: 'schedule-list' }, h('h2', {}, 'Schedules'), h('p', { class: 'muted' }, 'Loading…'));
  append(main, panel);
  const data = await call('/schedules/list', {});
  clear(panel);
  append(panel, h('h2', {}, 'Schedules ', h('span', { class: 'muted' }, '(' + data.total + ')')),
    h('p', { class: 'muted' }, 'Each action starts an ordinary run of the hierarchy. Create and change schedules with the API or ',
      h('code', {}, 'executor schedules'), '.'));
  if (!data.items.length) {
    append(panel, h('p', { class: 'muted' }, 'None yet.'));
    return;
  }
  const rows = data.items.map((s) => h('tr', { dataset: { scheduleId: s.id } },
    h('td', {}, h('code', {}, s.id), s.note ? [h('br'), h('span', { class: 'muted' }, s.note)] : null),
    h('td', { class: 'task' }, s.task, h('br'), h('a', { href: '/?h=' + encodeURIComponent(s.hierarchy_id), class: 'muted' }, s.hierarchy_id)),
    h('td', { class: 'spec' }, spec(s)),
    h('td', { class: 'overlap' }, s.overlap),
    h('td', { class: 'state' }, s.paused ? h('span', { class: 'badge gate' }, 'paused') : h('span', { class: 'badge' }, 'active')),
    h('td', { class: 'num actions' }, String(s.info.num_actions), s.info.num_skipped_overlap ? h('span', { class: 'muted' }, ' (' + s.info.num_skipped_overlap + ' skipped)') : null),
    h('td', { class: 'next' }, s.paused || !s.info.next_action_times.length ? h('span', { class: 'muted' }, '—') : fmtTime(s.info.next_action_times[0])),
    h('td', {}, h('a', { href: '/runs?schedule_id=' + encodeURIComponent(s.id) }, 'runs'))));
  append(panel, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, ['Schedule', 'Task', 'When', 'Overlap', 'State', 'Actions', 'Next', ''].map((x) => h('th', {}, x)))),
    h('tbody', {}, rows)));
}

// spec reads a schedule's times: cron expressions and intervals, in its
// time zone, with its jitter.
function spec(s) {
  const parts = [...s.cron.map((c) => h('code', {}, c)),
    ...s.intervals.map((i) => h('code', {}, 'every ' + i.every + (i.offset ? ' + ' + i.offset : '')))];
  const out = parts.flatMap((c, i) => (i ? [', ', c] : [c]));
  if (s.time_zone) out.push(h('span', { class: 'muted' }, ' ' + s.time_zone));
  if (s.jitter && s.jitter !== '0s') out.push(h('span', { class: 'muted' }, ' ± ' + s.jitter));
  return out;
}
