// Services: one page of a namespace's services (server-side pages), filtered by group
// and name, with instance and health counts; followed live through the list's stream.
import { get, watch, path } from '../api.js';
import { h, replace, orDash, errorBox, DASH } from '../dom.js';

const SIZES = [20, 50, 100, 500, 1000];
const DEFAULT_SIZE = 50;

function read(query) {
  const size = Number(query.get('size'));
  return {
    ns: query.get('ns') || 'public',
    group: query.get('group') || '',
    name: query.get('name') || '',
    page: Math.max(1, parseInt(query.get('page') || '1', 10) || 1),
    size: SIZES.includes(size) ? size : DEFAULT_SIZE,
  };
}

function url(f) {
  const q = new URLSearchParams();
  if (f.ns !== 'public') q.set('ns', f.ns);
  if (f.group) q.set('group', f.group);
  if (f.name) q.set('name', f.name);
  if (f.page > 1) q.set('page', f.page);
  if (f.size !== DEFAULT_SIZE) q.set('size', f.size);
  const s = q.toString();
  return '/ui/services' + (s ? '?' + s : '');
}

export function serviceURL(ns, group, name) {
  return `/ui/namespaces/${encodeURIComponent(ns)}/groups/${encodeURIComponent(group)}/services/${encodeURIComponent(name)}`;
}

function count(n, cls) {
  if (!Number.isInteger(n)) return h('td', { class: 'num' }, DASH);
  return h('td', { class: 'num' + (cls && n > 0 ? ' ' + cls : '') }, String(n));
}

function protect(s) {
  const threshold = typeof s.protectThreshold === 'number' ? s.protectThreshold : 0;
  let state;
  if (s.protectThresholdReached === true) state = h('span', { class: 'badge warn' }, 'reached');
  else if (s.protectThresholdReached === false) state = h('span', { class: 'badge' }, 'not reached');
  else state = h('span', { class: 'muted' }, DASH);
  return h('td', {}, h('span', { class: 'num' }, String(threshold)), ' ', state);
}

function row(s) {
  const total = s.instanceCount, healthy = s.healthyCount;
  const unhealthy = Number.isInteger(total) && Number.isInteger(healthy) ? total - healthy : undefined;
  return h('tr', { 'data-service': s.name, 'data-group': s.group },
    h('td', {}, h('a', { href: serviceURL(s.namespace, s.group, s.name) }, s.name)),
    h('td', {}, s.group),
    count(total),
    count(healthy, 'good'),
    count(unhealthy, 'bad'),
    protect(s),
    h('td', { class: 'num' }, orDash(s.modifyIndex)));
}

export function render(main, _params, query, ctx) {
  let f = read(query);
  let stream = null;
  let seq = 0;
  let typing = null;

  const nsSelect = h('select', { id: 'svc-ns', name: 'ns' });
  const groupInput = h('input', { id: 'svc-group', name: 'group', placeholder: 'every group', autocomplete: 'off', spellcheck: false });
  const nameInput = h('input', { id: 'svc-name', name: 'name', type: 'search', placeholder: 'part of the name', autocomplete: 'off', spellcheck: false });
  const sizeSelect = h('select', { id: 'svc-size', name: 'size' }, SIZES.map((n) => h('option', { value: String(n) }, String(n))));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter services' },
    h('div', { class: 'field' }, h('label', { for: 'svc-ns' }, 'Namespace'), nsSelect),
    h('div', { class: 'field' }, h('label', { for: 'svc-group' }, 'Group'), groupInput),
    h('div', { class: 'field' }, h('label', { for: 'svc-name' }, 'Name contains'), nameInput),
    h('div', { class: 'field' }, h('label', { for: 'svc-size' }, 'Per page'), sizeSelect),
    h('button', { type: 'submit' }, 'Apply'));
  const summary = h('p', { class: 'summary', id: 'svc-summary' });
  const errBox = h('div');
  const body = h('tbody');
  const table = h('table', { class: 'grid', id: 'services', 'aria-describedby': 'svc-summary' },
    h('caption', { class: 'visually-hidden' }, 'Services'),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Service'),
      h('th', { scope: 'col' }, 'Group'),
      h('th', { scope: 'col', class: 'num' }, 'Instances'),
      h('th', { scope: 'col', class: 'num' }, 'Healthy'),
      h('th', { scope: 'col', class: 'num' }, 'Unhealthy'),
      h('th', { scope: 'col' }, 'Protect threshold'),
      h('th', { scope: 'col', class: 'num' }, 'Last change'))),
    body);
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const live = h('span', { class: 'live-state', id: 'svc-live' });

  replace(main,
    h('div', { class: 'title-row' }, h('h1', {}, 'Services'), live),
    form, errBox, summary, h('div', { class: 'table-wrap' }, table), pager);

  function fromForm() {
    return { ns: nsSelect.value || f.ns, group: groupInput.value.trim(), name: nameInput.value.trim(), page: 1, size: Number(sizeSelect.value) };
  }
  function apply(rep) {
    clearTimeout(typing);
    const next = url(fromForm());
    if (next !== ctx.here()) ctx.navigate(next, { replace: rep });
  }
  form.addEventListener('submit', (e) => { e.preventDefault(); apply(false); });
  nsSelect.addEventListener('change', () => apply(false));
  sizeSelect.addEventListener('change', () => apply(false));
  for (const input of [groupInput, nameInput]) {
    input.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => apply(true), 300);
    });
  }

  function syncForm() {
    if (![...nsSelect.options].some((o) => o.value === f.ns)) nsSelect.append(h('option', { value: f.ns }, f.ns));
    nsSelect.value = f.ns;
    if (document.activeElement !== groupInput) groupInput.value = f.group;
    if (document.activeElement !== nameInput) nameInput.value = f.name;
    sizeSelect.value = String(f.size);
  }

  function show(data) {
    replace(errBox);
    const list = data.services || [];
    const total = data.total || 0;
    const pages = Math.max(1, Math.ceil(total / f.size));
    replace(body, list.length ? list.map(row)
      : h('tr', {}, h('td', { colspan: '7', class: 'empty' }, total ? 'No services on this page.' : 'No services match.')));
    replace(summary, `${total} service${total === 1 ? '' : 's'} in namespace ${f.ns}`,
      f.group ? `, group ${f.group}` : '', f.name ? `, name containing “${f.name}”` : '',
      ` · page ${f.page} of ${pages}`, ` · index ${orDash(data.index)}`);
    const link = (label, page, rel) => page >= 1 && page <= pages && page !== f.page
      ? h('a', { href: url({ ...f, page }), rel }, label)
      : h('span', { class: 'disabled', 'aria-disabled': 'true' }, label);
    replace(pager, link('« First', 1), link('‹ Previous', f.page - 1, 'prev'),
      h('span', {}, `Page ${f.page} of ${pages}`),
      link('Next ›', f.page + 1, 'next'), link('Last »', pages));
  }

  function liveState(state, err) {
    if (state === 'live') replace(live, h('span', { class: 'dot good' }), 'Live');
    else if (state === 'reconnecting') replace(live, h('span', { class: 'dot warn' }), 'Reconnecting…');
    else replace(live, h('span', { class: 'dot' }), 'Not live: ' + (err ? err.message : 'stopped'));
  }

  async function load() {
    const my = ++seq;
    if (stream) stream.close();
    stream = null;
    syncForm();
    const list = path('v1', 'namespaces', f.ns, 'services');
    const q = { group: f.group, name: f.name, page: f.page, size: f.size };
    try {
      const data = await get(list, { query: q });
      if (my !== seq) return;
      show(data);
      stream = watch(list, {
        query: q,
        lastEventId: data.index,
        onEvent: (e) => {
          if (my !== seq) return;
          if (e.event === 'services') show(e.data);
          else if (e.event === 'not_found') {
            replace(body);
            replace(errBox, errorBox({ message: (e.data.error || {}).message || 'not found' }, 'Not found'));
          }
        },
        onState: (s, err) => { if (my === seq) liveState(s, err); },
      });
    } catch (err) {
      if (my !== seq || err.status === 401) return;
      replace(body);
      replace(summary);
      replace(pager);
      replace(errBox, errorBox(err));
    }
  }

  get('/v1/namespaces').then((data) => {
    const ids = (data.namespaces || []).map((n) => n.id);
    if (!ids.includes(f.ns)) ids.push(f.ns);
    replace(nsSelect, ids.map((id) => h('option', { value: id }, id)));
    nsSelect.value = f.ns;
  }).catch(() => { /* the list's own error says enough */ });

  load();
  return {
    title: 'Services',
    update(q) {
      f = read(q);
      load();
    },
    cleanup() {
      seq++;
      clearTimeout(typing);
      if (stream) stream.close();
    },
  };
}
