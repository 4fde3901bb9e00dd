// Cluster: the Raft members with role, suffrage, last contact and replication progress,
// the leader, this node's readiness, and a leadership transfer for operators.
import { get, request, can } from '../api.js';
import { h, replace, orDash, errorBox, dialog, field, DASH } from '../dom.js';

const REFRESH_MS = 3000;

function yesNo(v) {
  return v === true ? 'yes' : v === false ? 'no' : DASH;
}

function contact(m) {
  if (m.leader) return 'leader';
  const ms = m.lastContactMillis;
  if (typeof ms !== 'number' || ms < 0) return DASH;
  return ms < 1000 ? `${ms} ms ago` : `${(ms / 1000).toFixed(1)} s ago`;
}

export function render(main, _params, _query, ctx) {
  let timer = null;
  let closed = false;
  let members = [];

  const readyBox = h('div', { class: 'card', id: 'ready' });
  const leaderBox = h('p', { id: 'leader' });
  const errBox = h('div');
  const body = h('tbody');
  const actions = h('div', { class: 'actions' });

  replace(main,
    h('h1', {}, 'Cluster'),
    h('section', { 'aria-labelledby': 'h-node' }, h('h2', { id: 'h-node' }, 'This node'), readyBox),
    h('section', { 'aria-labelledby': 'h-members' },
      h('h2', { id: 'h-members' }, 'Members'), leaderBox, errBox,
      h('div', { class: 'table-wrap' }, h('table', { class: 'grid', id: 'members' },
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Server'), h('th', { scope: 'col' }, 'Role'), h('th', { scope: 'col' }, 'Voter'),
          h('th', { scope: 'col' }, 'Raft address'), h('th', { scope: 'col' }, 'HTTP address'),
          h('th', { scope: 'col' }, 'Last contact'), h('th', { scope: 'col', class: 'num' }, 'Applied'),
          h('th', { scope: 'col', class: 'num' }, 'Commit'), h('th', { scope: 'col', class: 'num' }, 'Lag'),
          h('th', { scope: 'col' }, 'Status'))),
        body)),
      actions,
      h('p', { class: 'muted small' }, 'Refreshed every few seconds. Applied, commit and lag are as each member answered the node that served the list; lag is that node’s commit index minus the member’s applied index.')));

  function showReady(r, status) {
    const ok = r && r.ready === true;
    replace(readyBox,
      h('p', {}, h('span', { class: 'health ' + (ok ? 'good' : 'bad') }, h('span', { class: 'dot', 'aria-hidden': 'true' }),
        ok ? 'ready' : 'not ready'), status && !ok ? h('span', { class: 'muted' }, ` (HTTP ${status})`) : null),
      r && r.reason ? h('p', {}, 'Reason: ', r.reason) : null,
      h('dl', { class: 'facts' },
        h('div', {}, h('dt', {}, 'Leader known'), h('dd', {}, orDash(r && r.leader))),
        h('div', {}, h('dt', {}, 'Applied index'), h('dd', {}, orDash(r && r.appliedIndex))),
        h('div', {}, h('dt', {}, 'Commit index'), h('dd', {}, orDash(r && r.commitIndex))),
        h('div', {}, h('dt', {}, 'Leader’s commit index'), h('dd', {}, orDash(r && r.leaderCommitIndex))),
        h('div', {}, h('dt', {}, 'Cluster id'), h('dd', {}, h('code', {}, orDash(r && r.clusterId))))));
  }

  function statusCell(st) {
    if (!st) return h('td', {}, DASH);
    if (st.error) return h('td', {}, h('span', { class: 'bad' }, 'unreachable'), h('div', { class: 'muted small' }, st.error));
    const ok = st.reachable !== false && st.ready === true;
    return h('td', {}, h('span', { class: 'health ' + (ok ? 'good' : 'bad') }, h('span', { class: 'dot', 'aria-hidden': 'true' }),
      st.reachable === false ? 'unreachable' : st.ready ? 'ready' : 'not ready'),
    st.reason ? h('div', { class: 'muted small' }, st.reason) : null);
  }

  function showMembers(list) {
    members = list;
    const leader = list.find((m) => m.leader);
    replace(leaderBox, 'Leader: ', leader ? h('strong', { id: 'leader-id' }, leader.id) : h('span', { class: 'bad' }, 'none known'),
      leader ? ` (${leader.httpAddr || leader.raftAddr})` : '');
    replace(body, list.map((m) => {
      const st = m.status;
      return h('tr', { 'data-member': m.id },
        h('th', { scope: 'row' }, m.id),
        h('td', {}, m.leader ? h('span', { class: 'badge good' }, 'leader') : 'follower'),
        h('td', {}, yesNo(m.voter)),
        h('td', {}, h('code', {}, orDash(m.raftAddr))),
        h('td', {}, h('code', {}, orDash(m.httpAddr))),
        h('td', {}, contact(m)),
        h('td', { class: 'num' }, orDash(st && st.appliedIndex)),
        h('td', { class: 'num' }, orDash(st && st.commitIndex)),
        h('td', { class: 'num' + (st && st.lag > 0 ? ' warn' : '') }, orDash(st && st.lag)),
        statusCell(st));
    }));
    replace(actions, can(ctx.session(), 'operator:write')
      ? h('button', { type: 'button', id: 'transfer', onclick: transferDialog, disabled: !leader }, 'Transfer leadership…')
      : null);
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const resp = await fetch('/v1/status/ready', { cache: 'no-store' });
      const r = await resp.json().catch(() => null);
      if (!closed) showReady(r, resp.status);
    } catch (err) {
      if (!closed) replace(readyBox, errorBox(err));
    }
    try {
      const res = await get('/v1/cluster/members', { query: { detail: 'true' } });
      if (closed) return;
      replace(errBox);
      showMembers(res.members || []);
    } catch (err) {
      if (closed || err.status === 401) return;
      replace(errBox, errorBox(err));
    }
    if (!closed) timer = setTimeout(refresh, REFRESH_MS);
  }

  function transferDialog() {
    const leader = members.find((m) => m.leader);
    const voters = members.filter((m) => m.voter && !m.leader);
    dialog('Transfer leadership', (form) => {
      form.append(
        h('p', {}, `The leader ${leader ? leader.id : ''} hands leadership over; writes pause for a moment while it moves.`),
        field('New leader', {
          tag: 'select', name: 'target',
          options: [h('option', { value: '' }, 'Any up-to-date voter'), ...voters.map((m) => h('option', { value: m.id }, m.id))],
        }));
    }, async (form) => {
      const id = form.elements.target.value;
      await request('POST', '/v1/cluster/leadership-transfer', { query: { id } });
      ctx.announce('Leadership transferred');
      refresh();
    }, { submitLabel: 'Transfer' });
  }

  refresh();
  return {
    title: 'Cluster',
    cleanup() {
      closed = true;
      clearTimeout(timer);
    },
  };
}
