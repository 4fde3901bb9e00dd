// The console's shell and router: every view has its own /ui/... URL (history API), so
// links can be shared and bookmarked and the back button works. The node serves
// index.html for any /ui/ path; this module picks the view.
import { onUnauthenticated, whoAmI, clearToken, getToken } from './api.js';
import { h, replace } from './dom.js';
import * as services from './views/services.js';
import * as service from './views/service.js';
import * as cluster from './views/cluster.js';
import * as snapshot from './views/snapshot.js';
import * as login from './views/login.js';

const seg = '([^/]+)';
const routes = [
  { re: /^\/ui\/services$/, view: services, nav: 'services' },
  { re: new RegExp(`^/ui/namespaces/${seg}/groups/${seg}/services/${seg}$`), view: service, nav: 'services' },
  { re: /^\/ui\/cluster$/, view: cluster, nav: 'cluster' },
  { re: /^\/ui\/snapshot$/, view: snapshot, nav: 'snapshot' },
  { re: /^\/ui\/login$/, view: login, nav: '' },
];

const main = document.getElementById('main');
const announcer = document.getElementById('announcer');
const sessionBox = document.getElementById('session');

// session is what the token may do: {acl, token} (whoAmI), null while unknown.
let session = null;
let current = null; // {route, params, cleanup, update}
let started = false;

function announce(text) {
  // Re-set the text so that the same message is read again.
  announcer.textContent = '';
  setTimeout(() => { announcer.textContent = text; }, 50);
}

function here() {
  return location.pathname + location.search;
}

export function navigate(url, { replace: rep = false } = {}) {
  if (rep) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render();
}

function showSession() {
  const items = [];
  if (session && session.acl && session.token) {
    const t = session.token;
    items.push(h('span', { class: 'who' }, 'Token: ', h('strong', {}, t.description || t.accessorId.slice(0, 8))));
  }
  if (getToken()) {
    items.push(h('button', { type: 'button', onclick: logout }, 'Log out'));
  }
  replace(sessionBox, items);
}

function logout() {
  clearToken();
  session = null;
  showSession();
  announce('Logged out');
  navigate('/ui/login');
}

export async function refreshSession() {
  try {
    session = await whoAmI();
  } catch {
    session = null; // 401 (handled by onUnauthenticated) or the node cannot answer
  }
  showSession();
  return session;
}

onUnauthenticated(() => {
  session = null;
  showSession();
  if (location.pathname !== '/ui/login') {
    const url = '/ui/login?next=' + encodeURIComponent(here());
    if (started) navigate(url, { replace: true });
    else history.replaceState(null, '', url);
  }
});

function render() {
  const path = location.pathname;
  if (path === '/ui' || path === '/ui/') {
    history.replaceState(null, '', '/ui/services');
    return render();
  }
  let route = null, params = [];
  for (const r of routes) {
    const m = r.re.exec(path);
    if (m) {
      route = r;
      params = m.slice(1).map(decodeURIComponent);
      break;
    }
  }
  for (const a of document.querySelectorAll('nav a[data-nav]')) {
    if (route && a.dataset.nav === route.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const query = new URLSearchParams(location.search);
  // The same view with other query parameters (filters, pages) updates in place.
  if (current && route && current.route === route && current.update &&
      JSON.stringify(current.params) === JSON.stringify(params)) {
    current.update(query);
    return;
  }
  if (current && current.cleanup) current.cleanup();
  current = null;
  replace(main);
  if (!route) {
    document.title = 'Not found · Roster';
    replace(main, h('h1', { tabindex: '-1' }, 'Not found'),
      h('p', {}, 'The console has no page at ', h('code', {}, path), '. ', h('a', { href: '/ui/services' }, 'Go to the services.')));
    main.querySelector('h1').focus();
    return;
  }
  const ctx = { navigate, announce, session: () => session, refreshSession, here };
  const result = route.view.render(main, params, query, ctx) || {};
  current = { route, params, cleanup: result.cleanup, update: result.update };
  document.title = `${result.title || 'Roster'} · Roster`;
  const h1 = main.querySelector('h1');
  if (h1) {
    h1.setAttribute('tabindex', '-1');
    h1.focus({ preventScroll: true });
  }
}

// Links inside the console navigate without reloading the page.
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/ui/') || url.pathname.startsWith('/ui/assets/')) return;
  // A link to a part of this page (the skip link) moves the focus there and leaves the
  // URL and the view alone.
  if (url.hash && url.pathname + url.search === here()) {
    const target = document.getElementById(decodeURIComponent(url.hash.slice(1)));
    if (target) {
      e.preventDefault();
      target.focus();
    }
    return;
  }
  e.preventDefault();
  if (url.pathname + url.search !== here()) navigate(url.pathname + url.search);
});

window.addEventListener('popstate', render);

refreshSession().then(() => {
  started = true;
  render();
});
