// Snapshot: download a backup archive of the whole state, and restore one by upload
// behind a confirmation that names the archive's index and counts (read from its
// meta.json, the first member of the gzip'd tar, in the browser).
import { request, can } from '../api.js';
import { h, replace, errorBox, dialog, time } from '../dom.js';

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  return `${(n / (1 << 30)).toFixed(2)} GiB`;
}

// readMeta returns the archive's meta.json: gunzip the start of the file and read the
// first tar member, which Roster always writes first. It throws when the file is not
// such an archive; the node checks the whole archive again before it restores.
export async function readMeta(file) {
  const reader = file.stream().pipeThrough(new DecompressionStream('gzip')).getReader();
  let buf = new Uint8Array(0);
  const need = async (n) => {
    while (buf.length < n) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the archive ends before its meta.json');
      const next = new Uint8Array(buf.length + value.length);
      next.set(buf);
      next.set(value, buf.length);
      buf = next;
    }
  };
  try {
    await need(512);
    const text = (a, b) => new TextDecoder().decode(buf.subarray(a, b)).replace(/\0.*$/s, '').trim();
    const name = text(0, 100);
    if (name !== 'meta.json') throw new Error(`its first member is "${name}", not meta.json`);
    const len = parseInt(text(124, 136), 8);
    if (!Number.isInteger(len) || len <= 0 || len > 1 << 20) throw new Error('its meta.json has an impossible size');
    await need(512 + len);
    return JSON.parse(new TextDecoder().decode(buf.subarray(512, 512 + len)));
  } finally {
    reader.cancel().catch(() => {});
  }
}

export function render(main, _params, _query, ctx) {
  const allowed = can(ctx.session(), 'operator:write');
  const dlStatus = h('div', { 'aria-live': 'polite', id: 'download-status' });
  const dlButton = h('button', { type: 'button', class: 'primary', id: 'download' }, 'Download a snapshot');
  const fileInput = h('input', { type: 'file', id: 'archive', accept: '.snap,.gz,.tgz,application/gzip' });
  const summary = h('div', { id: 'archive-summary', 'aria-live': 'polite' });
  const restoreButton = h('button', { type: 'button', class: 'danger', id: 'restore', disabled: true }, 'Restore…');
  const restoreStatus = h('div', { 'aria-live': 'polite', id: 'restore-status' });
  let chosen = null; // {file, meta, error}

  replace(main, h('h1', {}, 'Snapshot'),
    allowed ? null : h('p', { class: 'error', role: 'note' }, 'Saving and restoring archives needs operator: write; this token does not grant it, so the node will refuse (403).'),
    h('section', { class: 'card', 'aria-labelledby': 'h-save' },
      h('h2', { id: 'h-save' }, 'Save'),
      h('p', {}, 'A point-in-time archive of the whole state (namespaces, services, clusters, instances, settings and ACL tokens’ hashes), served by the leader after a linearizable check. It holds every token’s hash: keep it as safe as the tokens.'),
      dlButton, dlStatus),
    h('section', { class: 'card', 'aria-labelledby': 'h-restore' },
      h('h2', { id: 'h-restore' }, 'Restore'),
      h('p', {}, 'Replaces the state of the whole cluster with an archive. The node checks the whole archive before anything changes.'),
      h('div', { class: 'field' }, h('label', { for: 'archive' }, 'Archive file'), fileInput),
      summary, restoreButton, restoreStatus));

  dlButton.addEventListener('click', async () => {
    dlButton.disabled = true;
    replace(dlStatus, 'Downloading…');
    try {
      const resp = await request('GET', '/v1/snapshot', { raw: true });
      const blob = await resp.blob();
      const index = resp.headers.get('X-Roster-Index') || '';
      const m = /filename="([^"]+)"/.exec(resp.headers.get('Content-Disposition') || '');
      const filename = m ? m[1] : `roster-${index || 'snapshot'}.snap`;
      const url = URL.createObjectURL(blob);
      const a = h('a', { href: url, download: filename, class: 'visually-hidden' }, filename);
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      replace(dlStatus, h('p', {}, `Saved ${filename} (${size(blob.size)}), the state as of index ${index || '?'}.`));
    } catch (err) {
      replace(dlStatus, errorBox(err));
    } finally {
      dlButton.disabled = false;
    }
  });

  function describe(c) {
    if (!c.meta) {
      return h('p', {}, `${c.file.name} (${size(c.file.size)}). Its index and counts could not be read (${c.error}); the node checks the archive and refuses a bad one.`);
    }
    const m = c.meta, n = m.counts || {};
    return h('dl', { class: 'facts' },
      h('div', {}, h('dt', {}, 'File'), h('dd', {}, `${c.file.name} (${size(c.file.size)})`)),
      h('div', {}, h('dt', {}, 'Index / term'), h('dd', { id: 'archive-index' }, `${m.index} / ${m.term}`)),
      h('div', {}, h('dt', {}, 'Contents'), h('dd', { id: 'archive-counts' }, `${plural(n.namespaces, 'namespace')}, ${plural(n.services, 'service')}, ${plural(n.instances, 'instance')}`)),
      h('div', {}, h('dt', {}, 'Written'), h('dd', {}, time(m.createdAt), m.rosterVersion ? ` by Roster ${m.rosterVersion}` : null)));
  }

  fileInput.addEventListener('change', async () => {
    replace(restoreStatus);
    const file = fileInput.files[0];
    chosen = null;
    restoreButton.disabled = true;
    if (!file) {
      replace(summary);
      return;
    }
    try {
      chosen = { file, meta: await readMeta(file) };
    } catch (err) {
      chosen = { file, meta: null, error: err.message };
    }
    replace(summary, describe(chosen));
    restoreButton.disabled = false;
  });

  restoreButton.addEventListener('click', () => {
    const c = chosen;
    if (!c) return;
    const what = c.meta
      ? `the state at index ${c.meta.index}: ${plural(c.meta.counts.namespaces, 'namespace')}, ${plural(c.meta.counts.services, 'service')} and ${plural(c.meta.counts.instances, 'instance')}`
      : `the archive ${c.file.name} (${size(c.file.size)}), whose contents could not be read here`;
    dialog('Restore the whole cluster?', (form) => {
      form.append(h('p', {}, `Every member’s state is replaced by ${what}. Everything registered since then is lost. This cannot be undone.`));
    }, async () => {
      replace(restoreStatus, 'Uploading and checking…');
      const res = await request('PUT', '/v1/snapshot', { body: c.file, contentType: 'application/gzip' }).catch((err) => {
        replace(restoreStatus);
        throw err;
      });
      replace(restoreStatus, h('p', { class: 'ok' }, `Restored. The first write after the restore has index ${res.index}.`));
      ctx.announce('Snapshot restored');
    }, { submitLabel: c.meta ? `Restore index ${c.meta.index}` : 'Restore', danger: true });
  });

  return { title: 'Snapshot' };
}
