// Login: paste an ACL token's secret. It is kept in this tab's sessionStorage and sent
// as X-Roster-Token with every request until logout or the tab closes.
import { setToken, clearToken, whoAmI } from '../api.js';
import { h, replace, errorBox } from '../dom.js';

export function render(main, _params, query, ctx) {
  const next = query.get('next') || '/ui/services';
  const safeNext = next.startsWith('/ui/') && !next.startsWith('//') ? next : '/ui/services';
  const status = h('div', { 'aria-live': 'assertive' });
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: false, required: true, 'aria-describedby': 'token-help' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Log in');
  const form = h('form', { class: 'card login', id: 'login' },
    h('div', { class: 'field' }, h('label', { for: 'token' }, 'Token secret'), input,
      h('small', { id: 'token-help', class: 'muted' },
        'The secret of an ACL token (a UUID), from roster acl bootstrap or roster acl token create. It stays in this browser tab (sessionStorage) and is sent as X-Roster-Token with every request.')),
    status, h('div', { class: 'buttons' }, submit));

  replace(main, h('h1', {}, 'Log in'),
    h('p', {}, 'This cluster has access control on: every request needs a token.'), form);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    replace(status);
    setToken(input.value.trim());
    try {
      const who = await whoAmI();
      if (!who.acl) {
        clearToken();
        ctx.announce('Access control is off on this cluster: no token is needed');
      } else {
        ctx.announce('Logged in');
      }
      await ctx.refreshSession();
      ctx.navigate(safeNext, { replace: true });
    } catch (err) {
      clearToken();
      replace(status, errorBox(err, err.status === 401 ? 'Not accepted' : ''));
      input.focus();
    } finally {
      submit.disabled = false;
    }
  });

  setTimeout(() => input.focus(), 0);
  return { title: 'Log in' };
}
