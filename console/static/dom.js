// Small DOM helpers. Text always goes in as text (textContent, text
// nodes), never as HTML, so nothing from the API can inject markup.

// h builds an element: h('div', {class: 'x', dataset: {agentId: 'a'}}, 'text', child).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, ...children);
  return el;
}

// append adds children (strings become text nodes; null and arrays are
// flattened).
export function append(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// clear removes every child of el.
export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// fmtCost formats US dollars for people; the exact sum stays in data-*.
export function fmtCost(usd, unknown) {
  const s = usd >= 0.01 ? usd.toFixed(4) : usd.toPrecision(3);
  return '$' + (usd === 0 ? '0' : s) + (unknown ? ' + unknown' : '');
}

// fmtTime formats an ISO timestamp in the browser's locale.
export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

// fmtDuration formats the time between two ISO timestamps (the second
// defaulting to now).
export function fmtDuration(from, to) {
  if (!from) return '';
  const ms = (to ? Date.parse(to) : Date.now()) - Date.parse(from);
  if (!(ms >= 0)) return '';
  const s = Math.round(ms / 1000);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

// showError puts an error where the whole page can see it.
export function showError(err) {
  const el = document.getElementById('page-error');
  el.textContent = err && err.message ? err.message : String(err);
  el.hidden = false;
}
