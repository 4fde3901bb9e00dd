// The console's only way to the cluster: the native REST API of the node that served
// the page, with the operator's token (if any) in X-Roster-Token on every request.

const TOKEN_KEY = 'roster.token';

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(secret) {
  sessionStorage.setItem(TOKEN_KEY, secret);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

// An answer other than 2xx: the API's {"error":{code,message,field}} when it sent one.
export class APIError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.name = 'APIError';
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

// Called with the error of every 401 answer (the app shows the login prompt).
let unauthenticated = () => {};
export function onUnauthenticated(fn) {
  unauthenticated = fn;
}

async function toError(resp) {
  let code = '', message = `${resp.status} ${resp.statusText}`.trim(), field = '';
  try {
    const body = await resp.json();
    if (body && body.error) {
      code = body.error.code || '';
      message = body.error.message || message;
      field = body.error.field || '';
    }
  } catch {
    // Not JSON: keep the status line.
  }
  const err = new APIError(resp.status, code, message, field);
  if (resp.status === 401) unauthenticated(err);
  return err;
}

function headers(extra) {
  const h = new Headers(extra);
  const t = getToken();
  if (t) h.set('X-Roster-Token', t);
  return h;
}

// path joins segments, each escaped: path('v1', 'namespaces', ns).
export function path(...segments) {
  return '/' + segments.map(encodeURIComponent).join('/');
}

export function servicePath(ns, group, service) {
  return path('v1', 'namespaces', ns, 'groups', group, 'services', service);
}

export function joinAddr(ip, port) {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

function withQuery(url, query) {
  if (!query) return url;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${url}?${s}` : url;
}

// request sends one call and returns the decoded JSON answer, or the Response itself
// with {raw: true}; it throws an APIError for any answer but 2xx.
export async function request(method, url, { query, body, raw, signal, contentType } = {}) {
  const init = { method, headers: headers(), signal, cache: 'no-store' };
  if (body !== undefined) {
    if (body instanceof Blob) {
      init.body = body;
      init.headers.set('Content-Type', contentType || 'application/octet-stream');
    } else {
      init.body = JSON.stringify(body);
      init.headers.set('Content-Type', 'application/json');
    }
  }
  const resp = await fetch(withQuery(url, query), init);
  if (!resp.ok) throw await toError(resp);
  return raw ? resp : resp.json();
}

export const get = (url, opts) => request('GET', url, opts);

// The token's rights as GET /v1/acl/token/self shows them; acl false when ACLs are off.
export async function whoAmI() {
  try {
    return { acl: true, token: await get('/v1/acl/token/self') };
  } catch (err) {
    if (err.status === 404) return { acl: false, token: null };
    throw err;
  }
}

// can tells whether a session may do what (one of "operator:read", "operator:write",
// "namespace:write") — as far as the token's rules say; the API decides in the end.
export function can(session, what, ns) {
  if (!session || !session.acl || !session.token) return true;
  const t = session.token;
  if (t.management) return true;
  const rules = t.rules || {};
  const level = (a) => ({ read: 1, write: 2 })[a] || 0;
  switch (what) {
    case 'operator:read': return level(rules.operator) >= 1;
    case 'operator:write': return level(rules.operator) >= 2;
    case 'namespace:write': {
      const nss = rules.namespaces || {};
      return level(Object.hasOwn(nss, ns) ? nss[ns] : nss['*']) >= 2;
    }
    default: return false;
  }
}

// watch follows a server-sent-event stream (Accept: text/event-stream) with fetch, so
// that the token travels in a header, which EventSource cannot send. onEvent gets
// {event, id, data} for each event whose data is JSON; onState gets "live",
// "reconnecting" or "stopped" (with the error). It reconnects with Last-Event-ID after
// an error or a silent connection. close() ends it.
export function watch(url, { query, lastEventId = '', onEvent, onState = () => {} }) {
  const ctrl = new AbortController();
  let lastId = lastEventId ? String(lastEventId) : '';
  let retry = 1000;
  const idleLimit = 45000; // three keep-alive periods of the server (15 s)

  async function once() {
    const h = headers({ Accept: 'text/event-stream' });
    if (lastId) h.set('Last-Event-ID', lastId);
    const conn = new AbortController();
    const abort = () => conn.abort();
    ctrl.signal.addEventListener('abort', abort);
    let idle;
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(abort, idleLimit);
    };
    try {
      touch();
      const resp = await fetch(withQuery(url, query), { headers: h, signal: conn.signal, cache: 'no-store' });
      if (!resp.ok) throw await toError(resp);
      onState('live');
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      let ev = { event: '', data: [], id: null };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        touch();
        retry = 1000;
        buf += value;
        let m;
        while ((m = /\r\n|\r|\n/.exec(buf)) !== null) {
          // A lone \r at the end may be the first half of \r\n: wait for more.
          if (m[0] === '\r' && m.index === buf.length - 1) break;
          const line = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          if (line === '') {
            if (ev.id !== null) lastId = ev.id;
            if (ev.data.length > 0) {
              let data;
              try {
                data = JSON.parse(ev.data.join('\n'));
              } catch {
                data = undefined;
              }
              if (data !== undefined) onEvent({ event: ev.event || 'message', id: lastId, data });
            }
            ev = { event: '', data: [], id: null };
            continue;
          }
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'event') ev.event = val;
          else if (field === 'data') ev.data.push(val);
          else if (field === 'id' && !val.includes('\0')) ev.id = val;
          else if (field === 'retry' && /^\d+$/.test(val)) retry = Number(val);
        }
      }
    } finally {
      clearTimeout(idle);
      ctrl.signal.removeEventListener('abort', abort);
    }
  }

  (async () => {
    while (!ctrl.signal.aborted) {
      try {
        await once();
      } catch (err) {
        if (ctrl.signal.aborted) return;
        // A refusal the same request would meet again stops the stream (429 aside).
        if (err instanceof APIError && err.status >= 400 && err.status < 500 && err.status !== 429 && err.status !== 408) {
          onState('stopped', err);
          return;
        }
      }
      if (ctrl.signal.aborted) return;
      onState('reconnecting');
      await new Promise((r) => setTimeout(r, retry));
      retry = Math.min(retry * 2, 10000);
    }
  })();

  return { close: () => ctrl.abort() };
}
