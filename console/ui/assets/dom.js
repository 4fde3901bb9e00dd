// Small DOM helpers shared by the views. Text always goes in as text, never as HTML.

// h builds an element: h('a', {href: '/ui/x', class: 'k'}, 'text', child, ...).
// Attributes starting with "on" are listeners; false, null and undefined are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replace swaps the children of el for children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const DASH = '–';

// orDash shows a value the API may not send (yet) as "–".
export function orDash(v) {
  return v === undefined || v === null || v === '' ? DASH : String(v);
}

// errorBox shows an API error as its message (and status), plainly.
export function errorBox(err, prefix = '') {
  const what = err && err.status === 403 ? 'Permission denied' : 'Error';
  const detail = err && err.message ? err.message : String(err);
  return h('div', { class: 'error', role: 'alert' },
    h('strong', {}, prefix || what), ': ', detail,
    err && err.status ? h('span', { class: 'muted' }, ` (HTTP ${err.status}${err.code ? ', ' + err.code : ''})`) : null);
}

// time shows an RFC 3339 time as local time of day, with the full date in a tooltip.
export function time(iso) {
  if (!iso) return DASH;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime()) || d.getFullYear() < 2) return DASH;
  return h('time', { datetime: iso, title: d.toString() }, d.toLocaleTimeString());
}

// metadata shows a string map as "k=v" chips.
export function metadata(m) {
  const entries = Object.entries(m || {});
  if (entries.length === 0) return h('span', { class: 'muted' }, 'none');
  return h('ul', { class: 'chips' }, entries.map(([k, v]) => h('li', {}, `${k}=${v}`)));
}

// parseMetadata reads "k=v" lines into a map; it throws on a line without "=".
export function parseMetadata(text) {
  const out = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const i = line.indexOf('=');
    if (i <= 0) throw new Error(`metadata line "${line}" is not key=value`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

export function formatMetadata(m) {
  return Object.entries(m || {}).map(([k, v]) => `${k}=${v}`).join('\n');
}

// dialog opens a modal <dialog> holding a form built by build(form); submit(form)
// runs on submit and closes the dialog when it resolves, or shows its error in the
// dialog. It returns the dialog element; it removes itself once closed.
export function dialog(title, build, submit, { submitLabel = 'Save', danger = false } = {}) {
  const status = h('div', { class: 'dialog-status', 'aria-live': 'assertive' });
  const form = h('form', { method: 'dialog' });
  const id = 'dlg-' + Math.random().toString(36).slice(2);
  const dlg = h('dialog', { 'aria-labelledby': id },
    h('h2', { id }, title), form);
  build(form);
  const cancel = h('button', { type: 'button', onclick: () => dlg.close() }, 'Cancel');
  const ok = h('button', { type: 'submit', class: danger ? 'danger' : 'primary' }, submitLabel);
  form.append(status, h('div', { class: 'buttons' }, cancel, ok));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    ok.disabled = true;
    replace(status);
    try {
      await submit(form);
      dlg.close();
    } catch (err) {
      replace(status, errorBox(err));
    } finally {
      ok.disabled = false;
    }
  });
  dlg.addEventListener('close', () => dlg.remove());
  document.body.append(dlg);
  dlg.showModal();
  return dlg;
}

// field is a labelled input: field('Weight', {name: 'weight', type: 'number'}).
export function field(label, attrs, hint) {
  const { tag = 'input', options = [], ...rest } = attrs;
  const id = 'f-' + (rest.name || '') + '-' + Math.random().toString(36).slice(2, 7);
  const input = h(tag, { ...rest, id }, options);
  return h('div', { class: 'field' }, h('label', { for: id }, label), input,
    hint ? h('small', { class: 'muted' }, hint) : null);
}
