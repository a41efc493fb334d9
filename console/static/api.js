// Calls to the executor API (contract 002, POST + JSON under
// /api/executor/v1). With access control on, the person gives an API key
// once: it is kept in sessionStorage (this tab only, gone when it closes)
// and sent as Authorization: Bearer, never in a URL.

export const BASE = '/api/executor/v1';
const KEY = 'executor.apiKey';

// APIError is an API's error answer: HTTP status, error_code, the field
// at fault (when the API names one) and the message.
export class APIError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : 'HTTP ' + status);
    this.status = status;
    this.code = body && body.error_code;
    this.field = body && body.field;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY) || '';
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

let asking = null; // the pending key prompt, shared by concurrent calls

// askKey shows the key form and resolves once a key was given.
function askKey(reason) {
  if (asking) return asking;
  const panel = document.getElementById('key-panel');
  const form = document.getElementById('key-form');
  const input = document.getElementById('key-input');
  document.getElementById('key-reason').textContent = reason;
  panel.hidden = false;
  input.value = '';
  input.focus();
  asking = new Promise((resolve) => {
    form.addEventListener('submit', function onSubmit(e) {
      e.preventDefault();
      const key = input.value.trim();
      if (!key) return;
      sessionStorage.setItem(KEY, key);
      input.value = '';
      panel.hidden = true;
      form.removeEventListener('submit', onSubmit);
      asking = null;
      updateKeyButton();
      resolve();
    });
  });
  return asking;
}

// updateKeyButton shows "Forget key" while a key is kept.
export function updateKeyButton() {
  const b = document.getElementById('forget-key');
  if (b) b.hidden = !apiKey();
}

// call POSTs body to path and returns the envelope's data. A 401 asks for
// a key (again, when the kept one was refused) and retries.
export async function call(path, body = {}) {
  for (;;) {
    const key = apiKey();
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
    if (key) headers.Authorization = 'Bearer ' + key;
    const resp = await fetch(BASE + path, {
      method: 'POST', headers, body: JSON.stringify(body), cache: 'no-store', credentials: 'omit',
    });
    let env = null;
    try {
      env = await resp.json();
    } catch {
      env = { message: resp.status + ' ' + resp.statusText };
    }
    if (resp.status === 401) {
      if (key) forgetKey();
      await askKey(key ? 'The key was refused (' + env.message + '). Give another one.' : 'This service needs an API key.');
      continue;
    }
    if (!resp.ok || env.code !== 0) throw new APIError(resp.status, env);
    return env.data;
  }
}

// download fetches a file the API serves outside the JSON envelope (an
// artifact, /api/v1/artifacts/{id}) with the kept key and saves it under
// name: a plain link could not send the key.
export async function download(url, name) {
  const key = apiKey();
  const headers = {};
  if (key) headers.Authorization = 'Bearer ' + key;
  const resp = await fetch(url, { headers, cache: 'no-store', credentials: 'omit' });
  if (!resp.ok) throw new APIError(resp.status, { message: 'download: ' + resp.status + ' ' + resp.statusText });
  const href = URL.createObjectURL(await resp.blob());
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 10000);
}
