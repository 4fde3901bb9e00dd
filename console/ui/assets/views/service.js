// Service: its clusters with their check specs and its instances with health and last
// probe, followed live through the instance list's stream; actions for tokens that
// may write the namespace.
import { get, request, watch, servicePath, joinAddr, can } from '../api.js';
import { h, replace, orDash, errorBox, time, metadata, parseMetadata, formatMetadata, dialog, field, DASH } from '../dom.js';

const HEALTH_REFRESH_MS = 5000;

function checkSummary(hc) {
  if (!hc) return DASH;
  if (hc.type === 'NONE') return 'NONE (health set through the API)';
  const port = hc.port ? `port ${hc.port}` : 'instance port';
  switch (hc.type) {
    case 'HTTP':
    case 'HTTPS':
      return `${hc.type} ${hc.path || '/'} on ${port}` + (hc.expectedStatus && hc.expectedStatus.length ? `, expects ${hc.expectedStatus.join(', ')}` : '');
    case 'TLS':
      return `TLS handshake on ${port}`;
    case 'GRPC':
      return `gRPC health${hc.grpcService ? ` of ${hc.grpcService}` : ''}${hc.grpcTls ? ' over TLS' : ''} on ${port}`;
    case 'MYSQL':
      return `MySQL login as ${hc.user} on ${port}`;
    default:
      return `TCP connect to ${port}`;
  }
}

// CHECK_TYPES are the types the check dialog offers. It edits the fields every type
// shares and HTTP's; the options of the other types (TLS, gRPC, MySQL, the password
// shown as "***", which the server keeps) are carried over unchanged while the type
// stays the same, and set through the API.
const CHECK_TYPES = ['TCP', 'HTTP', 'HTTPS', 'TLS', 'GRPC', 'MYSQL', 'NONE'];
const CARRIED_FIELDS = ['tlsServerName', 'tlsSkipVerify', 'tlsCaPem', 'grpcService', 'grpcTls', 'user', 'password', 'query'];

export function render(main, [ns, group, name], _query, ctx) {
  const base = servicePath(ns, group, name);
  let stream = null;
  let timer = null;
  let healthTimer = null;
  let closed = false;
  let svc = null;          // GET service answer
  let view = null;         // last instances event data
  let health = new Map();  // ip:port → probe result
  let healthInfo = null;   // {leader, probing}
  let known = null;        // ip:port → healthy, of the last rendered event
  let lastServiceIndex = 0;

  const writable = () => can(ctx.session(), 'namespace:write', ns);
  const live = h('span', { class: 'live-state', id: 'svc-live' });
  const facts = h('dl', { class: 'facts' });
  const errBox = h('div');
  const actions = h('div', { class: 'actions' });
  const clustersBody = h('tbody');
  const instancesBody = h('tbody');
  const probeNote = h('p', { class: 'muted small', id: 'probe-note' });

  replace(main,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: '/ui/services' + (ns === 'public' ? '' : '?ns=' + encodeURIComponent(ns)) }, 'Services'), ' › ',
      h('a', { href: `/ui/services?${new URLSearchParams({ ...(ns === 'public' ? {} : { ns }), group })}` }, `${ns} / ${group}`)),
    h('div', { class: 'title-row' }, h('h1', {}, name), live),
    errBox, facts, actions,
    h('section', { 'aria-labelledby': 'h-clusters' },
      h('h2', { id: 'h-clusters' }, 'Clusters'),
      h('div', { class: 'table-wrap' }, h('table', { class: 'grid', id: 'clusters' },
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Cluster'), h('th', { scope: 'col' }, 'Check'),
          h('th', { scope: 'col' }, 'Interval / timeout'), h('th', { scope: 'col' }, 'Rise / fall'),
          h('th', { scope: 'col' }, 'Metadata'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
        clustersBody))),
    h('section', { 'aria-labelledby': 'h-instances' },
      h('h2', { id: 'h-instances' }, 'Instances'),
      h('div', { class: 'table-wrap' }, h('table', { class: 'grid', id: 'instances' },
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Address'), h('th', { scope: 'col' }, 'Cluster'),
          h('th', { scope: 'col', class: 'num' }, 'Weight'), h('th', { scope: 'col' }, 'Enabled'),
          h('th', { scope: 'col' }, 'Health'), h('th', { scope: 'col' }, 'Metadata'),
          h('th', { scope: 'col' }, 'Last probe'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
        instancesBody)),
      probeNote));

  // ---- rendering ----

  function showFacts() {
    const s = (view && view.service) || (svc && svc.service) || {};
    const list = view ? view.instances || [] : null;
    const total = list ? list.length : svc ? svc.instanceCount : undefined;
    const healthy = list ? list.filter((i) => i.healthy).length : svc ? svc.healthyCount : undefined;
    const threshold = typeof s.protectThreshold === 'number' ? s.protectThreshold : 0;
    // The server applies the one protect-threshold rule; the unfiltered list reports it.
    const reached = view ? view.protectThresholdReached === true : undefined;
    replace(facts,
      h('div', {}, h('dt', {}, 'Instances'), h('dd', { id: 'svc-counts' },
        Number.isInteger(total) ? `${total} (${healthy} healthy, ${total - healthy} unhealthy)` : DASH)),
      h('div', {}, h('dt', {}, 'Protect threshold'), h('dd', {}, String(threshold), ' ',
        reached === undefined ? h('span', { class: 'muted' }, DASH)
          : reached ? h('span', { class: 'badge warn' }, 'reached: every enabled instance is returned')
            : h('span', { class: 'badge' }, 'not reached'))),
      h('div', {}, h('dt', {}, 'Last change'), h('dd', {}, 'index ', orDash(s.modifyIndex))),
      h('div', {}, h('dt', {}, 'Metadata'), h('dd', {}, metadata(s.metadata))));
    replace(actions, writable()
      ? h('button', { type: 'button', class: 'primary', id: 'register', onclick: registerDialog }, 'Register an instance')
      : null);
  }

  function showClusters() {
    const clusters = (svc && svc.clusters) || [];
    replace(clustersBody, clusters.length ? clusters.map((c) => {
      const hc = c.healthCheck || {};
      return h('tr', { 'data-cluster': c.name },
        h('td', {}, c.name),
        h('td', {}, checkSummary(hc),
          hc.headers && Object.keys(hc.headers).length ? h('div', { class: 'muted small' }, 'headers: ', Object.keys(hc.headers).join(', ')) : null),
        h('td', {}, hc.type === 'NONE' ? DASH : `${orDash(hc.interval)} / ${orDash(hc.timeout)}`),
        h('td', {}, hc.type === 'NONE' ? DASH : `${orDash(hc.rise)} / ${orDash(hc.fall)}`),
        h('td', {}, metadata(c.metadata)),
        h('td', { class: 'row-actions' }, writable()
          ? h('button', { type: 'button', onclick: () => checkDialog(c), 'aria-label': `Edit the check of cluster ${c.name}` }, 'Edit check')
          : null));
    }) : h('tr', {}, h('td', { colspan: '6', class: 'empty' }, svc ? 'No clusters.' : DASH)));
  }

  function probeCell(p) {
    if (!p || !p.lastCheck) return h('td', {}, DASH);
    const ok = p.outcome === 'success';
    return h('td', { class: 'probe' },
      time(p.lastCheck), ' · ', orDash(p.latency), ' · ',
      h('span', { class: ok ? 'good' : 'bad', title: p.error || '' }, orDash(p.outcome)),
      p.error && !ok ? h('div', { class: 'muted small' }, p.error) : null,
      p.vantages && p.vantages.length ? h('div', { class: 'muted small vantages' }, 'Last confirmation: ', views(p.vantages)) : null,
      p.deregisterAt ? h('div', { class: 'muted small' }, 'Deregistered at ', time(p.deregisterAt), ' unless it recovers') : null);
  }

  // views shows each node's view of the last majority confirmation: "n1 down · n2 up".
  function views(vs) {
    return vs.map((v) => {
      const seen = !v.answered ? 'no answer' : v.healthy ? 'up' : 'down';
      return `${v.node} ${seen}` + (v.answered && v.outcome && v.outcome !== 'success' ? ` (${v.outcome})` : '');
    }).join(' · ');
  }

  function showInstances() {
    const list = view ? view.instances || [] : [];
    if (!view) {
      replace(instancesBody, h('tr', {}, h('td', { colspan: '8', class: 'empty' }, 'Loading…')));
      return;
    }
    replace(instancesBody, list.length ? list.map((i) => {
      const addr = joinAddr(i.ip, i.port);
      const p = health.get(addr);
      const state = i.healthy ? 'healthy' : 'unhealthy';
      return h('tr', { 'data-addr': addr, 'data-health': state, class: i.enabled ? '' : 'disabled' },
        h('td', {}, h('code', {}, addr)),
        h('td', {}, i.cluster),
        h('td', { class: 'num' }, String(i.weight)),
        h('td', {}, i.enabled ? 'yes' : h('span', { class: 'badge' }, 'disabled')),
        h('td', {}, h('span', { class: 'health ' + (i.healthy ? 'good' : 'bad') },
          h('span', { class: 'dot', 'aria-hidden': 'true' }), state,
          p && p.pending ? h('span', { class: 'muted small' }, ' (changing)') : null)),
        h('td', {}, metadata(i.metadata)),
        probeCell(p),
        h('td', { class: 'row-actions' }, writable() ? [
          h('button', { type: 'button', onclick: () => editDialog(i), 'aria-label': `Edit ${addr}` }, 'Edit'),
          h('button', { type: 'button', class: 'danger', onclick: () => deregisterDialog(i), 'aria-label': `Deregister ${addr}` }, 'Deregister'),
        ] : null));
    }) : h('tr', {}, h('td', { colspan: '8', class: 'empty' }, 'No instances.')));
    if (healthInfo) {
      replace(probeNote, `Probe results from the leader ${healthInfo.leader || DASH}`,
        healthInfo.probing ? '' : ' (its prober has not started yet)', '; refreshed every few seconds.');
    }
  }

  // announce says what changed between two instance lists, for screen readers.
  function announceChanges(list) {
    const now = new Map(list.map((i) => [joinAddr(i.ip, i.port), i.healthy]));
    if (known) {
      const said = [];
      for (const [addr, healthy] of now) {
        if (!known.has(addr)) said.push(`${addr} registered`);
        else if (known.get(addr) !== healthy) said.push(`${addr} is now ${healthy ? 'healthy' : 'unhealthy'}`);
      }
      for (const addr of known.keys()) if (!now.has(addr)) said.push(`${addr} deregistered`);
      if (said.length) ctx.announce(`${name}: ${said.join('; ')}`);
    }
    known = now;
  }

  // ---- data ----

  async function loadService() {
    try {
      svc = await get(base);
      lastServiceIndex = svc.service ? svc.service.modifyIndex : 0;
      replace(errBox);
    } catch (err) {
      if (err.status === 401) return;
      svc = null;
      replace(errBox, errorBox(err, err.status === 404 ? 'Not found' : ''));
    }
    showFacts();
    showClusters();
  }

  async function loadHealth() {
    clearTimeout(healthTimer);
    try {
      const res = await get(base + '/health');
      if (closed) return;
      health = new Map((res.results || []).map((r) => [joinAddr(r.ip, r.port), r]));
      healthInfo = { leader: res.leader, probing: res.probing };
    } catch (err) {
      if (closed) return;
      health = new Map();
      healthInfo = null;
      replace(probeNote, 'Probe results unavailable: ', err.message);
    }
    showInstances();
    if (!closed) healthTimer = setTimeout(loadHealth, HEALTH_REFRESH_MS);
  }

  function onEvent(e) {
    if (closed) return;
    if (e.event === 'not_found') {
      view = { instances: [] };
      svc = null;
      replace(errBox, errorBox({ message: (e.data.error || {}).message || 'the service does not exist' }, 'Not found'));
      announceChanges([]);
      showFacts();
      showClusters();
      showInstances();
      return;
    }
    if (e.event !== 'instances') return;
    view = e.data;
    announceChanges(view.instances || []);
    showFacts();
    showInstances();
    const idx = view.service ? view.service.modifyIndex : 0;
    if (!svc || idx !== lastServiceIndex) loadService();
    // Probe results follow the committed change shortly after.
    clearTimeout(timer);
    timer = setTimeout(loadHealth, 150);
  }

  function liveState(state, err) {
    if (state === 'live') replace(live, h('span', { class: 'dot good', 'aria-hidden': 'true' }), 'Live');
    else if (state === 'reconnecting') replace(live, h('span', { class: 'dot warn', 'aria-hidden': 'true' }), 'Reconnecting…');
    else replace(live, h('span', { class: 'dot', 'aria-hidden': 'true' }), 'Not live: ' + (err ? err.message : 'stopped'));
  }

  // ---- actions ----

  const instancePath = (i) => base + '/instances/' + encodeURIComponent(joinAddr(i.ip, i.port));

  function registerDialog() {
    const clusters = ((svc && svc.clusters) || []).map((c) => c.name);
    dialog(`Register an instance of ${name}`, (form) => {
      form.append(
        field('IP address or host name', { name: 'ip', required: true, autocomplete: 'off', spellcheck: false }),
        field('Port', { name: 'port', type: 'number', min: '1', max: '65535', required: true }),
        field('Cluster', { name: 'cluster', value: clusters[0] || 'DEFAULT', list: 'cluster-names', required: true }),
        h('datalist', { id: 'cluster-names' }, clusters.map((c) => h('option', { value: c }))),
        field('Weight', { name: 'weight', type: 'number', min: '0', max: '10000', step: 'any', value: '1' }),
        h('div', { class: 'field check' }, h('label', {}, h('input', { type: 'checkbox', name: 'enabled', checked: true }), ' Enabled')),
        field('Metadata', { tag: 'textarea', name: 'metadata', rows: '3', placeholder: 'key=value, one per line' }));
    }, async (form) => {
      const els = form.elements;
      const ip = els.ip.value.trim();
      const port = Number(els.port.value);
      await request('PUT', base + '/instances/' + encodeURIComponent(joinAddr(ip, port)), {
        query: { cas: 0 },
        body: { cluster: els.cluster.value.trim(), weight: Number(els.weight.value), enabled: els.enabled.checked, metadata: parseMetadata(els.metadata.value) },
      });
      ctx.announce(`Registered ${joinAddr(ip, port)}`);
    }, { submitLabel: 'Register' });
  }

  function editDialog(i) {
    const addr = joinAddr(i.ip, i.port);
    dialog(`Edit ${addr}`, (form) => {
      form.append(
        field('Weight', { name: 'weight', type: 'number', min: '0', max: '10000', step: 'any', value: String(i.weight), required: true }),
        h('div', { class: 'field check' }, h('label', {}, h('input', { type: 'checkbox', name: 'enabled', checked: i.enabled }), ' Enabled (receives traffic)')),
        field('Metadata', { tag: 'textarea', name: 'metadata', rows: '4', value: formatMetadata(i.metadata) }, 'key=value, one per line; replaces the whole map'),
        h('p', { class: 'muted small' }, `Saved only if the instance is still at index ${i.modifyIndex}.`));
    }, async (form) => {
      const els = form.elements;
      await request('PATCH', instancePath(i), {
        query: { cas: i.modifyIndex },
        body: { weight: Number(els.weight.value), enabled: els.enabled.checked, metadata: parseMetadata(els.metadata.value) },
      });
      ctx.announce(`Saved ${addr}`);
    });
  }

  function deregisterDialog(i) {
    const addr = joinAddr(i.ip, i.port);
    dialog(`Deregister ${addr}?`, (form) => {
      form.append(h('p', {}, `The instance ${addr} (cluster ${i.cluster}) is removed from ${name}; clients stop receiving it at once. This cannot be undone, except by registering it again.`));
    }, async () => {
      await request('DELETE', instancePath(i));
      ctx.announce(`Deregistered ${addr}`);
    }, { submitLabel: 'Deregister', danger: true });
  }

  function checkDialog(c) {
    const hc = c.healthCheck || {};
    const headers = Object.entries(hc.headers || {}).map(([k, v]) => `${k}: ${v}`).join('\n');
    dialog(`Health check of cluster ${c.name}`, (form) => {
      form.append(
        field('Type', { tag: 'select', name: 'type', options: CHECK_TYPES.map((t) => h('option', { value: t, selected: t === hc.type }, t)) }),
        field('Port', { name: 'port', type: 'number', min: '0', max: '65535', value: String(hc.port || 0) }, '0: the instance’s own port'),
        field('HTTP path', { name: 'path', value: hc.path || '/' }),
        field('Expected HTTP statuses', { name: 'expected', value: (hc.expectedStatus || []).join(', '), placeholder: 'any of 200–399' }),
        field('HTTP headers', { tag: 'textarea', name: 'headers', rows: '2', value: headers, placeholder: 'Name: value, one per line' }),
        h('div', { class: 'field-row' },
          field('Interval', { name: 'interval', value: hc.interval || '5s', required: true }),
          field('Timeout', { name: 'timeout', value: hc.timeout || '2s', required: true })),
        h('div', { class: 'field-row' },
          field('Rise', { name: 'rise', type: 'number', min: '1', max: '10', value: String(hc.rise || 2) }),
          field('Fall', { name: 'fall', type: 'number', min: '1', max: '10', value: String(hc.fall || 3) })),
        h('p', { class: 'muted small' }, 'The cluster’s metadata is kept. Saved only if the cluster is unchanged since it was shown.'));
    }, async (form) => {
      const els = form.elements;
      const hdrs = {};
      for (const line of els.headers.value.split('\n')) {
        if (!line.trim()) continue;
        const i = line.indexOf(':');
        if (i <= 0) throw new Error(`header line "${line.trim()}" is not Name: value`);
        hdrs[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
      const expected = els.expected.value.split(',').map((s) => s.trim()).filter(Boolean).map(Number);
      const type = els.type.value;
      const spec = {
        type, port: Number(els.port.value), interval: els.interval.value.trim(), timeout: els.timeout.value.trim(),
        rise: Number(els.rise.value), fall: Number(els.fall.value),
      };
      // The HTTP fields belong to HTTP and HTTPS (TCP and NONE ignore them, as before).
      if (type === 'HTTP' || type === 'HTTPS' || type === 'TCP' || type === 'NONE') {
        Object.assign(spec, { path: els.path.value.trim(), headers: hdrs, expectedStatus: expected });
      }
      if (type === hc.type) {
        for (const f of CARRIED_FIELDS) if (hc[f] !== undefined) spec[f] = hc[f];
      }
      await request('PUT', base + '/clusters/' + encodeURIComponent(c.name), {
        query: { cas: c.modifyIndex },
        body: { healthCheck: spec, metadata: c.metadata || {} },
      });
      ctx.announce(`Saved the check of cluster ${c.name}`);
      await loadService();
    });
  }

  // ---- start ----

  showFacts();
  showClusters();
  showInstances();
  loadService();
  stream = watch(base + '/instances', { onEvent, onState: liveState });

  return {
    title: name,
    cleanup() {
      closed = true;
      clearTimeout(timer);
      clearTimeout(healthTimer);
      if (stream) stream.close();
      for (const d of document.querySelectorAll('dialog')) d.close();
    },
  };
}

