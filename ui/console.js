// tether's operator console: reads the admin API's JSON every two seconds and renders it
// as text (never as HTML: names and reasons come from configs, servers and Redis); calls
// the API with the token kept in this tab's sessionStorage and sent only as an
// `Authorization` header, never in a URL or a cookie.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const PAGE_ROWS = 100;
  const TOKEN_KEY = 'tether.token';
  const ROLES = ['read', 'operate', 'admin'];

  const $ = (id) => document.getElementById(id);

  const state = {
    role: null,
    status: null,
    // requests per server at the previous refresh, and when, for requests per second
    previous: new Map(),
    previousAt: 0,
    rates: new Map(),
    page: 0,
    timer: null,
    // "cluster/server" of drains started here with "until empty", to show their progress
    waiting: new Set(),
    rows: new Map(),
  };

  // ---- the admin API -------------------------------------------------------------------

  async function api(method, path, body) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const headers = token === null ? {} : { Authorization: 'Bearer ' + token };
    const init = { method, headers, cache: 'no-store', credentials: 'omit' };
    if (body !== undefined) {
      headers['Content-Type'] = typeof body === 'string' ? 'text/plain' : 'application/json';
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      return { status: 0, data: { error: 'the admin listener did not answer' } };
    }
    let data = null;
    try {
      data = await resp.json();
    } catch (_) {
      data = null;
    }
    if (resp.status === 401 && token !== null) signOut('The token was refused. Sign in again.');
    return { status: resp.status, data };
  }

  function errorText(r) {
    return (r.data && r.data.error) || 'HTTP ' + r.status;
  }

  function may(needed) {
    return state.role !== null && ROLES.indexOf(state.role) >= ROLES.indexOf(needed);
  }

  // ---- building text-only DOM ------------------------------------------------------------

  // An element with text children only (strings become text nodes, never markup).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'onclick') e.addEventListener('click', v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) e.append(c instanceof Node ? c : String(c ?? ''));
    return e;
  }

  function setText(node, text) {
    const t = String(text ?? '');
    if (node.textContent !== t) node.textContent = t;
  }

  function fact(dl, term, value) {
    dl.append(el('dt', null, term), el('dd', null, value));
  }

  function ago(ms) {
    if (ms === null || ms === undefined) return '';
    if (ms < 1500) return 'just now';
    const s = Math.round(ms / 1000);
    if (s < 120) return s + ' s ago';
    const m = Math.round(s / 60);
    return m < 120 ? m + ' min ago' : Math.round(m / 60) + ' h ago';
  }

  function when(msSinceEpoch) {
    if (!msSinceEpoch) return '';
    return new Date(msSinceEpoch).toISOString().replace('.000Z', 'Z');
  }

  function message(text, isError) {
    const m = $('message');
    m.className = isError ? 'error' : '';
    setText(m, text);
  }

  // ---- signing in and out ----------------------------------------------------------------

  async function signIn(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    const r = await api('GET', '/whoami');
    if (r.status !== 200 || !r.data || ROLES.indexOf(r.data.role) < 0) {
      sessionStorage.removeItem(TOKEN_KEY);
      setText($('signin-error'), r.status === 401 ? 'That token was refused.' : errorText(r));
      return;
    }
    await enter(r.data);
  }

  // The API without a token: no sign-in to offer, and the page says who may use it.
  async function openWithoutToken() {
    const r = await api('GET', '/whoami');
    if (r.status === 200 && r.data && r.data.open && ROLES.indexOf(r.data.role) >= 0) {
      await enter(r.data);
    } else {
      $('token').focus();
    }
  }

  async function enter(who) {
    state.role = who.role;
    setText($('signin-error'), '');
    if (who.open) {
      setText($('who'), 'No token is configured');
      setText($('open-api'), 'The admin API is open to anyone who can reach ' + location.host +
        ': set admin.token_file to require a token.');
    } else {
      setText($('who'), 'Signed in: ' + state.role + ' role');
    }
    $('open-api').hidden = !who.open;
    for (const e of document.querySelectorAll('[data-needs]')) {
      e.hidden = !may(e.getAttribute('data-needs'));
    }
    $('signin').hidden = true;
    $('console').hidden = false;
    $('signout').hidden = !!who.open;
    state.rows.clear();
    $('servers').tBodies[0].replaceChildren();
    await refresh();
    $('filter').focus();
  }

  function signOut(why) {
    sessionStorage.removeItem(TOKEN_KEY);
    $('open-api').hidden = true;
    clearTimeout(state.timer);
    state.role = null;
    state.status = null;
    $('console').hidden = true;
    $('signout').hidden = true;
    $('signin').hidden = false;
    setText($('who'), '');
    setText($('updated'), '');
    setText($('signin-error'), why || '');
    $('token').value = '';
    $('token').focus();
  }

  // ---- refreshing ------------------------------------------------------------------------

  async function refresh() {
    clearTimeout(state.timer);
    if (state.role === null) return;
    const r = await api('GET', '/status');
    if (state.role === null) return;
    if (r.status === 200 && r.data) {
      rates(r.data);
      state.status = r.data;
      render();
      setText($('updated'), 'Updated ' + new Date().toLocaleTimeString());
    } else {
      setText($('updated'), 'Not updated: ' + errorText(r));
    }
    state.timer = setTimeout(refresh, REFRESH_MS);
  }

  function rates(status) {
    const now = performance.now();
    const dt = (now - state.previousAt) / 1000;
    const next = new Map();
    for (const c of status.clusters) {
      for (const s of c.servers) {
        const key = c.name + '/' + s.name;
        next.set(key, s.requests);
        const before = state.previous.get(key);
        if (before !== undefined && dt > 0) {
          state.rates.set(key, Math.max(0, (s.requests - before) / dt));
        }
      }
    }
    state.previous = next;
    state.previousAt = now;
  }

  function render() {
    const st = state.status;
    renderOverview(st);
    renderServers(st);
    renderClusters(st);
    renderListeners(st);
    renderCertificates(st);
    renderFleet(st);
    renderExplainListeners(st);
  }

  function renderOverview(st) {
    const dl = el('dl', { id: 'overview', class: 'facts' });
    const p = st.process || {};
    if (p.config_file) fact(dl, 'Config', p.config_file);
    const last = p.last_reload;
    fact(dl, 'Last reload', last
      ? when(last.at_ms) + (last.ok ? ': applied' : ': refused: ' + (last.error || ''))
      : 'none since start');
    if (p.started_at_ms) fact(dl, 'Running since', when(p.started_at_ms));
    let servers = 0, down = 0, draining = 0;
    for (const c of st.clusters) {
      for (const s of c.servers) {
        servers += 1;
        if (s.health === 'down') down += 1;
        if (s.state === 'draining') draining += 1;
      }
    }
    fact(dl, 'Servers', servers + ' (' + down + ' down, ' + draining + ' draining)');
    fact(dl, 'Fleet', st.fleet ? (st.fleet.up ? 'in sync with Redis' : 'Redis unreachable') : 'single instance');
    $('overview').replaceWith(dl);
  }

  function serverRows(st) {
    const terms = $('filter').value.toLowerCase().split(/\s+/).filter(Boolean);
    const all = [];
    let total = 0;
    for (const c of st.clusters) {
      for (const s of c.servers) {
        total += 1;
        const hay = (c.name + '/' + s.name + ' ' + s.state + ' ' + s.health + ' ' + s.address).toLowerCase();
        if (terms.every((t) => hay.includes(t))) all.push({ cluster: c.name, s });
      }
    }
    return { all, total };
  }

  function renderServers(st) {
    const { all, total } = serverRows(st);
    const pages = Math.max(1, Math.ceil(all.length / PAGE_ROWS));
    state.page = Math.min(state.page, pages - 1);
    const from = state.page * PAGE_ROWS;
    const shown = all.slice(from, from + PAGE_ROWS);
    setText($('shown'), all.length === 0
      ? 'no server matches (of ' + total + ')'
      : 'servers ' + (from + 1) + '–' + (from + shown.length) + ' of ' + all.length +
        (all.length === total ? '' : ' (filtered from ' + total + ')') +
        ', page ' + (state.page + 1) + ' of ' + pages);
    $('prev').disabled = state.page === 0;
    $('next').disabled = state.page >= pages - 1;
    // Rows are kept and updated in place, so that focus (on a button) survives a refresh.
    const tbody = $('servers').tBodies[0];
    const wanted = [];
    for (const { cluster, s } of shown) {
      const key = cluster + '/' + s.name;
      let row = state.rows.get(key);
      if (!row) {
        row = newRow(cluster, s.name);
        state.rows.set(key, row);
      }
      updateRow(row, cluster, s);
      wanted.push(row.tr);
    }
    const same = wanted.length === tbody.children.length &&
      wanted.every((tr, i) => tbody.children[i] === tr);
    if (!same) tbody.replaceChildren(...wanted);
    if (state.rows.size > 4 * PAGE_ROWS) {
      const keep = new Set(shown.map(({ cluster, s }) => cluster + '/' + s.name));
      for (const k of state.rows.keys()) if (!keep.has(k)) state.rows.delete(k);
    }
  }

  const COLUMNS = ['cluster', 'server', 'state', 'health', 'weight', 'inflight', 'rate',
    'errors', 'ejected', 'live', 'empty', 'fleet'];

  function newRow(cluster, server) {
    const tr = el('tr', { 'data-server': cluster + '/' + server });
    const cells = {};
    for (const c of COLUMNS) {
      cells[c] = el(c === 'server' ? 'th' : 'td', c === 'server' ? { scope: 'row' } : null);
      tr.append(cells[c]);
    }
    // Health: the word, and under it when and why the last check said so.
    cells.healthWord = el('span', { class: 'word' });
    cells.healthNote = el('span', { class: 'note' });
    cells.health.append(cells.healthWord, cells.healthNote);
    const cell = el('td');
    const actions = el('div', { class: 'row-actions' });
    cell.append(actions);
    const label = cluster + '/' + server;
    const button = (text, needs, act) => el('button', {
      type: 'button', 'data-needs': needs, 'aria-label': text + ' ' + label,
      onclick: () => act(cluster, server),
    }, text);
    actions.append(
      button('Drain', 'operate', drain),
      button('Drain until empty', 'operate', drainUntilEmpty),
      button('Stop', 'operate', stop),
      button('Activate', 'operate', activate),
      button('Recover', 'operate', recover),
      button('Reset counters', 'operate', resetCounters),
      button('Weight…', 'operate', weight),
      button('Drop change', 'admin', dropChange),
    );
    tr.append(cell);
    return { tr, cells, actions: cell };
  }

  function updateRow(row, cluster, s) {
    const key = cluster + '/' + s.name;
    const c = row.cells;
    setText(c.cluster, cluster);
    setText(c.server, s.name);
    setText(c.state, s.state + (s.runtime_override ? ' (run time)' : ''));
    c.state.className = 'nowrap state-' + s.state;
    const check = s.health_check;
    setText(c.healthWord, s.health);
    let note = check ? 'checked ' + ago(check.last_ms_ago) + (check.reason ? ': ' + check.reason : '') : '';
    if (s.health === 'down' && s.down_reason && !(check && check.reason === s.down_reason)) {
      note = 'marked down: ' + s.down_reason + (note ? '; ' + note : '');
    }
    setText(c.healthNote, note);
    if (c.healthNote.title !== note) c.healthNote.title = note;
    c.health.className = 'health-' + s.health;
    setText(c.weight, s.weight + (s.effective_weight !== s.weight ? ' (' + s.effective_weight + ')' : ''));
    // In flight against max_inflight (when bounded), and the requests waiting for a slot.
    setText(c.inflight, s.inflight + (s.max_inflight ? ' / ' + s.max_inflight : '') +
      (s.queued ? ' (' + s.queued + ' queued)' : ''));
    c.inflight.title = 'at most ' + s.inflight_peak + ' at once since the start or a reset';
    const rate = state.rates.get(key);
    setText(c.rate, rate === undefined ? '' : rate.toFixed(1));
    // Requests the server failed (of them, reply timeouts), and its marks down.
    setText(c.errors, s.errors + (s.reply_timeouts ? ' (' + s.reply_timeouts + ' timeouts)' : '') +
      (s.failures ? ', ' + s.failures + ' marked down' : ''));
    setText(c.ejected, s.ejected_for_seconds ? s.ejected_for_seconds + ' s more' : '');
    const live = s.sessions;
    let liveText = '';
    if (live) {
      liveText = String(live.live);
      if (live.fleet_live !== null && live.fleet_live !== undefined) liveText += ' (fleet ' + live.fleet_live + ')';
    }
    if (state.waiting.has(key) && live) {
      const left = Math.max(live.live, live.fleet_live || 0);
      if (s.state !== 'draining') state.waiting.delete(key);
      else if (left === 0) {
        liveText = '0: empty, safe to stop';
        state.waiting.delete(key);
        message(key + ' is empty: its drain is done.');
      } else liveText += ': draining until empty';
    }
    setText(c.live, liveText);
    setText(c.empty, live && live.empty_by ? live.empty_by : '');
    const f = s.fleet_change;
    setText(c.fleet, f ? (f.state || 'file') + ' by ' + f.by + ' at ' + when(f.at_ms) : '');
    for (const b of row.actions.querySelectorAll('button')) {
      b.hidden = !may(b.getAttribute('data-needs'));
    }
    row.actions.hidden = !may('operate');
  }

  function renderClusters(st) {
    const rows = st.clusters.map((c) => {
      const t = c.partition_table;
      const ls = c.live_sessions;
      return el('tr', null,
        el('th', { scope: 'row' }, c.name),
        el('td', null, c.servers.length),
        el('td', null, c.health_checks ? 'on' : 'off'),
        el('td', null, ls ? ls.live + ' (timeout ' + ls.timeout_seconds + ' s)' : 'not counted'),
        el('td', null, t ? t.size + ' of ' + t.max + ' entries' : ''));
    });
    $('clusters').tBodies[0].replaceChildren(...rows);
  }

  function renderListeners(st) {
    const rows = (st.listeners || []).map((l) => el('tr', null,
      el('th', { scope: 'row' }, l.name),
      el('td', null, l.address),
      el('td', null, l.tls ? 'yes' : 'no'),
      el('td', null, l.cluster || ''),
      el('td', null, l.routes.map((r) => r.name + ' → ' + r.to).join('; '))));
    $('listeners').tBodies[0].replaceChildren(...rows);
  }

  function renderCertificates(st) {
    const rows = (st.certificates || []).map((c) => el('tr', { class: c.days_left < 14 ? 'warn' : null },
      el('th', { scope: 'row' }, c.listener),
      el('td', null, c.names),
      el('td', null, when(c.not_after_ms)),
      el('td', null, c.days_left)));
    if (rows.length === 0) rows.push(el('tr', null, el('td', { colspan: 4 }, 'No TLS listener.')));
    $('certificates').tBodies[0].replaceChildren(...rows);
  }

  function renderFleet(st) {
    const dl = el('dl', { id: 'fleet', class: 'facts' });
    const f = st.fleet;
    const rows = [];
    if (!f) {
      fact(dl, 'Shared state', 'none: this instance runs alone');
    } else {
      fact(dl, 'This instance', f.instance);
      fact(dl, 'Redis', f.redis + (f.up ? ' (in sync)' : ' (unreachable)'));
      fact(dl, 'Replication lag', f.lag_ms + ' ms');
      if (f.name_conflict) fact(dl, 'Name conflict', 'another process (pid ' + f.name_conflict.pid + ') writes this name');
      for (const i of f.instances) {
        rows.push(el('tr', null,
          el('th', { scope: 'row' }, i.instance),
          el('td', null, ago(i.last_seen_ms_ago)),
          el('td', null, i.partitions)));
      }
    }
    $('fleet').replaceWith(dl);
    $('instances').tBodies[0].replaceChildren(...rows);
    $('instances').hidden = !f;
  }

  function renderExplainListeners(st) {
    const select = $('explain-listener');
    const names = (st.listeners || []).map((l) => l.name);
    const have = Array.from(select.options).map((o) => o.value);
    if (names.join('\n') === have.join('\n')) return;
    const chosen = select.value;
    select.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    if (names.includes(chosen)) select.value = chosen;
  }

  // ---- actions, each confirmed -----------------------------------------------------------

  let answer = null;

  // Asks in the dialog; resolves to null (cancelled) or the weight field's value.
  function ask(text, withWeight, weightNow) {
    const d = $('confirm');
    setText($('confirm-text'), text);
    $('weight-field').hidden = !withWeight;
    $('weight-input').value = withWeight ? String(weightNow) : '';
    d.showModal();
    (withWeight ? $('weight-input') : $('confirm-ok')).focus();
    return new Promise((resolve) => { answer = resolve; });
  }

  function settle(ok) {
    const d = $('confirm');
    if (!answer) return;
    const resolve = answer;
    answer = null;
    const value = $('weight-input').value;
    if (d.open) d.close();
    resolve(ok ? value : null);
  }

  async function act(text, method, path, body, done) {
    const r = await api(method, path, body);
    if (r.status >= 200 && r.status < 300) {
      message(done(r.data));
    } else if (r.status !== 401) {
      message(text + ' failed: ' + errorText(r), true);
    }
    await refresh();
    return r.status >= 200 && r.status < 300;
  }

  const serverPath = (c, s) => '/clusters/' + encodeURIComponent(c) + '/servers/' + encodeURIComponent(s);

  async function stateChange(verb, c, s, also) {
    if (await ask(verb[0].toUpperCase() + verb.slice(1) + ' ' + c + '/' + s + '?' + (also || '')) === null) return false;
    return act(verb, 'POST', serverPath(c, s) + '/' + verb, undefined,
      (d) => c + '/' + s + ' is now ' + ((d && d.state) || verb) + '.');
  }

  const drain = (c, s) => stateChange('drain', c, s, ' It takes no new sessions; its sessions stay.');
  const stop = (c, s) => stateChange('stop', c, s, ' Its sessions fail over to the other servers.');
  const activate = (c, s) => stateChange('activate', c, s);

  // mod_jk's status worker: clear a down mark now; zero the counters /status shows.
  async function recover(c, s) {
    if (await ask('Recover ' + c + '/' + s + '? It takes requests again now, whatever marked it down.') === null) return;
    await act('recover', 'POST', serverPath(c, s) + '/recover', undefined,
      (d) => c + '/' + s + (d && d.recovered ? ' is recovered.' : ' was not down.'));
  }

  async function resetCounters(c, s) {
    if (await ask('Reset the counters of ' + c + '/' + s + '?') === null) return;
    await act('reset', 'POST', serverPath(c, s) + '/reset', undefined,
      () => 'The counters of ' + c + '/' + s + ' start again from 0.');
  }

  async function drainUntilEmpty(c, s) {
    if (await stateChange('drain', c, s, ' The console then shows its live sessions until none is left.')) {
      state.waiting.add(c + '/' + s);
      await refresh();
    }
  }

  async function weight(c, s) {
    const now = findServer(c, s);
    const value = await ask('Set the weight of ' + c + '/' + s + ' for new sessions:', true, now ? now.weight : 1);
    if (value === null) return;
    if (!/^\d+$/.test(value.trim())) {
      message('A weight is a whole number.', true);
      return;
    }
    await act('Setting the weight', 'PUT', serverPath(c, s) + '/weight', value.trim(),
      (d) => 'The weight of ' + c + '/' + s + ' is now ' + d.weight + ' (was ' + d.previous + ').');
  }

  async function dropChange(c, s) {
    if (await ask('Drop the run-time change of ' + c + '/' + s + '? It takes the config file\'s state and weight again.') === null) return;
    await act('Dropping the change', 'DELETE', serverPath(c, s) + '/overrides', undefined,
      () => c + '/' + s + ' follows the config file again.');
  }

  async function reload() {
    if (await ask('Reload the config file?') === null) return;
    await act('The reload', 'POST', '/reload', undefined,
      (d) => 'Config reloaded' + (d.needs_upgrade && d.needs_upgrade.length ? '; needs a binary upgrade: ' + d.needs_upgrade.join(', ') : '.'));
  }

  async function dropAll() {
    if (await ask('Drop every run-time change (drains, stops, weights) of every server?') === null) return;
    await act('Dropping the changes', 'DELETE', '/overrides', undefined,
      (d) => d.dropped + ' run-time changes dropped.');
  }

  function findServer(c, s) {
    const cl = state.status && state.status.clusters.find((x) => x.name === c);
    return cl && cl.servers.find((x) => x.name === s);
  }

  async function explain(event) {
    event.preventDefault();
    const cookie = $('explain-cookie').value.trim();
    const body = {
      url: $('explain-url').value.trim(),
      headers: cookie ? [['Cookie', cookie]] : [],
    };
    if ($('explain-listener').value) body.listener = $('explain-listener').value;
    const r = await api('POST', '/explain', body);
    if (r.status !== 200) {
      setText($('explain-summary'), 'Not explained: ' + errorText(r));
      setText($('explain-out'), '');
      return;
    }
    const d = r.data;
    let summary;
    if (d.answered_by_route) {
      summary = 'Answered by ' + (d.route ? 'route ' + d.route : 'the listener') + ': ' + d.answered_by_route.status;
    } else if (d.decision && d.decision.server) {
      summary = 'To ' + d.cluster + '/' + d.decision.server + ' (' + d.decision.outcome + ')' +
        (d.session ? '; session ' + d.session.id + ' found in ' + d.session.found_in : '; no session');
    } else if (d.decision && d.decision.rejected) {
      summary = 'Refused with 503: ' + d.decision.rejected;
    } else {
      summary = 'See the answer below.';
    }
    setText($('explain-summary'), summary);
    setText($('explain-out'), JSON.stringify(d, null, 2));
  }

  // ---- wiring ----------------------------------------------------------------------------

  document.addEventListener('DOMContentLoaded', () => {
    $('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      signIn($('token').value.trim());
    });
    $('signout').addEventListener('click', () => signOut(''));
    $('filter').addEventListener('input', () => { state.page = 0; if (state.status) renderServers(state.status); });
    $('prev').addEventListener('click', () => { state.page = Math.max(0, state.page - 1); renderServers(state.status); });
    $('next').addEventListener('click', () => { state.page += 1; renderServers(state.status); });
    $('reload').addEventListener('click', reload);
    $('drop-all').addEventListener('click', dropAll);
    $('explain-form').addEventListener('submit', explain);
    $('confirm-ok').addEventListener('click', () => settle(true));
    $('confirm-cancel').addEventListener('click', () => settle(false));
    $('confirm').addEventListener('close', () => settle(false));
    $('weight-input').addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); settle(true); }
    });
    if (sessionStorage.getItem(TOKEN_KEY)) signIn(sessionStorage.getItem(TOKEN_KEY));
    else openWithoutToken();
  });
})();
