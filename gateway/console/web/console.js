'use strict';
// The operators' console: one shell page whose view is named by its path. Data comes from the
// admin listener's JSON routes and is put on the page as text (never as HTML). Actions send the
// login's CSRF token; the server refuses them without it.

let me = null;        // {name, token_id, csrf}
let timer = null;     // the current view's refresh
const main = () => document.getElementById('main');

// An element with attributes and children (strings become text nodes).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'onclick' || key === 'onchange' || key === 'oninput') node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// What the current view was last drawn from: a refresh that brings the same data leaves the
// page alone, so that a button is never replaced under the operator's pointer.
let drawnFrom = '';
function unchanged(view, data) {
  const key = view + JSON.stringify(data);
  if (key === drawnFrom) return true;
  drawnFrom = key;
  return false;
}

function status(text) {
  document.getElementById('status').textContent = text;
}

class Refused extends Error {}

async function api(path, options = {}) {
  const init = {credentials: 'same-origin', headers: {'Accept': 'application/json'}, ...options};
  if (init.method && init.method !== 'GET') {
    init.headers = {...init.headers, 'X-CSRF-Token': me ? me.csrf : '', 'Content-Type': 'application/json'};
  }
  const response = await fetch(path, init);
  if (response.status === 401) {
    window.location.assign('/console/login');
    throw new Refused('signed out');
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Refused(body.message || `${response.status}`);
  return body;
}

function post(path, body) {
  return api(path, {method: 'POST', body: JSON.stringify(body || {})});
}

const number = (n) => Number(n || 0).toLocaleString('en-US');
const usd = (n) => '$' + Number(n || 0).toFixed(Number(n || 0) >= 1 ? 2 : 4);
const when = (ms) => ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + 'Z' : '';
function duration(s) {
  if (s === null || s === undefined) return 'no limit';
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return (h ? `${h}h` : '') + (h || m ? `${m}m` : '') + `${r}s`;
}
function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== undefined && v !== null) q.set(k, v);
  return q.toString();
}

function pager(page, pages, total, noun, go) {
  return el('div', {class: 'pager'},
    el('button', {type: 'button', id: 'prev', disabled: page <= 0, onclick: () => go(page - 1)}, '‹ Newer'),
    `page ${page + 1} of ${Math.max(1, pages)} · ${number(total)} ${noun}`,
    el('button', {type: 'button', id: 'next', disabled: page + 1 >= pages, onclick: () => go(page + 1)}, 'Older ›'));
}

function indexNote(index) {
  if (!index) return '';
  return index.ready ? `audit index: ${number(index.records)} records in ${number(index.files)} files, ` +
                       `scanned in ${index.scan_ms.toFixed(0)} ms`
                     : 'reading the audit files…';
}

// ---- Sessions: live counters, budgets as bars, revoke.
const sessionsState = {page: 0, state: 'active', q: ''};

async function sessionsView() {
  const s = sessionsState;
  const data = await api('/api/console/sessions?' + query({page: s.page, state: s.state, q: s.q}));
  status(indexNote(data.index));
  if (unchanged('sessions', [s, data.sessions, data.total, data.active, data.all])) return;
  const pages = Math.ceil(data.total / data.per_page);
  const rows = data.sessions.map((x) => el('tr', {id: 'session-' + x.id, class: 'state-' + x.state},
    el('td', {}, el('a', {href: '/console/session/' + x.id, class: 'mono'}, x.id)),
    el('td', {}, x.user),
    el('td', {class: 'mono'}, Object.entries(x.labels).map(([k, v]) => `${k}=${v}`).join(' ')),
    el('td', {class: 'state'}, x.state),
    el('td', {class: 'num ttl'}, x.state === 'active' ? duration(x.ttl_left_s) : ''),
    el('td', {class: 'num requests'}, number(x.requests)),
    el('td', {class: 'num denied'}, number(x.denied)),
    el('td', {class: 'num tokens'}, number(x.llm_tokens)),
    el('td', {class: 'num cost'}, usd(x.cost_usd)),
    el('td', {}, el('div', {class: 'budgets'}, x.budgets.flatMap((b) => [
      el('span', {}, b.name),
      el('meter', {min: 0, max: 1, low: 0.75, high: 0.9, optimum: 0, value: Math.min(1, b.fraction),
                   title: `${b.used} of ${b.limit}`}),
      el('span', {class: 'quiet'}, `${b.used} / ${b.limit}`)]))),
    el('td', {}, x.state === 'active'
      ? el('button', {type: 'button', class: 'danger revoke', onclick: () => revoke(x.id)}, 'Revoke') : '')));
  main().replaceChildren(
    el('h1', {}, 'Sessions'),
    el('div', {class: 'filters'},
      el('label', {for: 'state'}, 'State'),
      el('select', {id: 'state', onchange: (e) => { s.state = e.target.value; s.page = 0; show(); }},
        ['active', 'all', 'revoked', 'expired'].map((v) => el('option', {value: v, selected: v === s.state}, v))),
      el('label', {for: 'q'}, 'Find'),
      el('input', {id: 'q', type: 'search', value: s.q, placeholder: 'id, user or label',
                   onchange: (e) => { s.q = e.target.value; s.page = 0; show(); }}),
      el('span', {class: 'quiet'}, `${number(data.active)} active of ${number(data.all)}`)),
    el('table', {id: 'sessions'},
      el('thead', {}, el('tr', {}, ['Session', 'User', 'Labels', 'State', 'TTL left', 'Requests',
        'Refused', 'LLM tokens', 'Cost', 'Budgets', ''].map((h, i) =>
        el('th', {class: i >= 4 && i <= 8 ? 'num' : null}, h)))),
      el('tbody', {}, rows)),
    pager(s.page, pages, data.total, 'sessions', (p) => { s.page = p; show(); }));
}

async function revoke(id) {
  if (!window.confirm(`Revoke session ${id}? Its clients are refused from their next request on.`)) return;
  await post(`/api/sessions/${encodeURIComponent(id)}/revoke`);
  status(`session ${id} revoked`);
  await show();
}

// ---- Refusals: the latest across sessions, filtered on the server.
const refusalsState = {page: 0, code: '', session: '', host: ''};

async function refusalsView() {
  const s = refusalsState;
  const data = await api('/api/console/refusals?' + query(s));
  status(indexNote(data.index));
  if (unchanged('refusals', [s, data.refusals, data.total])) return;
  const pages = Math.ceil(data.total / data.per_page);
  const filter = (key, label) => el('input', {id: 'filter-' + key, type: 'search', value: s[key],
    placeholder: label, onchange: (e) => { s[key] = e.target.value.trim(); s.page = 0; show(); }});
  main().replaceChildren(
    el('h1', {}, 'Refusals'),
    el('div', {class: 'filters'}, filter('code', 'code, e.g. host_not_allowed'),
      filter('session', 'session'), filter('host', 'host contains')),
    el('table', {id: 'refusals'},
      el('thead', {}, el('tr', {}, ['Time', 'Session', 'Code', 'Request', 'Status', 'Rule'].map((h) => el('th', {}, h)))),
      el('tbody', {}, data.refusals.map((r) => el('tr', {class: 'deny'},
        el('td', {class: 'mono'}, r.ts),
        el('td', {}, el('a', {href: '/console/session/' + r.session, class: 'mono'}, r.session)),
        el('td', {class: 'mono code'}, r.code),
        el('td', {class: 'mono'}, `${r.method} ${r.host}${r.path || ''}`),
        el('td', {class: 'num'}, r.status || ''),
        el('td', {class: 'mono'}, r.rule))))),
    pager(s.page, pages, data.total, 'refusals', (p) => { s.page = p; show(); }));
}

// An MCP call held for a decision: the server, the tool and why, then its arguments as the
// broker pretty-printed them (secrets redacted), as text.
function mcpCall(m) {
  const name = m.tool || m.prompt || m.resource || '';
  return el('div', {class: 'mcp-call'},
    el('div', {}, `MCP ${m.method} `, el('strong', {class: 'mcp-tool'}, name), ` on ${m.server}`),
    el('div', {class: 'quiet mcp-why'}, m.why || ''),
    m.arguments ? el('pre', {class: 'mcp-arguments'}, m.arguments) : '');
}

// ---- Asks: held requests, decided here.
async function asksView() {
  const data = await api('/api/asks');
  status(`${data.asks.length} waiting`);
  // The same asks as drawn: only how long each has waited changes.
  if (unchanged('asks', data.asks.map((a) => ({...a, waiting_s: 0})))) {
    for (const a of data.asks) {
      const cell = document.querySelector(`#ask-${CSS.escape(a.id)} td.waiting`);
      if (cell) cell.textContent = `${a.waiting_s}s`;
    }
    return;
  }
  const decide = async (id, verb, scope) => {
    await post(`/api/asks/${encodeURIComponent(id)}/${verb}`, scope ? {scope} : {});
    status(`${id}: ${verb}${scope ? ' (' + scope + ')' : ''}`);
    await show();
  };
  main().replaceChildren(
    el('h1', {}, 'Pending asks'),
    data.asks.length === 0 ? el('p', {class: 'quiet', id: 'no-asks'}, 'Nothing is waiting for a decision.') :
    el('table', {id: 'asks'},
      el('thead', {}, el('tr', {}, ['Ask', 'Replica', 'Session', 'Request', 'Rule', 'Waiting', ''].map((h) => el('th', {}, h)))),
      el('tbody', {}, data.asks.map((a) => el('tr', {id: 'ask-' + a.id},
        el('td', {class: 'mono'}, a.id),
        el('td', {class: 'replica'}, a.replica || ''),
        el('td', {}, el('a', {href: '/console/session/' + a.session, class: 'mono'}, a.session)),
        el('td', {class: 'mono request'}, a.mcp ? mcpCall(a.mcp) : `${a.method} ${a.url}`),
        el('td', {class: 'mono'}, a.rule),
        el('td', {class: 'num waiting'}, `${a.waiting_s}s`),
        el('td', {},
          el('button', {type: 'button', class: 'go approve-once', onclick: () => decide(a.id, 'approve', 'once')}, 'Approve once'), ' ',
          el('button', {type: 'button', class: 'go approve-session', onclick: () => decide(a.id, 'approve', 'session')}, a.mcp ? 'Approve this tool for session' : 'Approve for session'), ' ',
          el('button', {type: 'button', class: 'danger deny', onclick: () => decide(a.id, 'deny')}, 'Deny')))))),
    el('p', {class: 'quiet'}, 'An approval here holds for this session only; to allow a host for everyone, add a rule to the team policy.'));
}

// ---- One session: its timeline across replicas, and whether its chain verifies.
const timelineState = {id: '', page: null};

function target(r) {
  if (r.method && r.host) return `${r.method} ${r.scheme ? r.scheme + '://' : ''}${r.host}${r.port && r.port !== 443 && r.port !== 80 ? ':' + r.port : ''}${r.path || ''}`;
  if (r.host) return `${r.host}:${r.port || ''}`;
  return '';
}

async function sessionView(id) {
  const s = timelineState;
  if (s.id !== id) Object.assign(s, {id, page: null});
  const data = await api(`/api/console/sessions/${encodeURIComponent(id)}/timeline?` + query({page: s.page}));
  const v = data.verify;
  const verdict = v.pending
    ? el('div', {class: 'verdict', id: 'verdict'}, `Verifying the chain of ${number(data.total)} records…`)
    : v.ok
    ? el('div', {class: 'verdict ok', id: 'verdict'}, `Chain verified: ${v.replicas.map((r) =>
        `${number(r.records)} records from replica ${r.replica}${r.ended ? ' (ended)' : ''}`).join(', ')}.`)
    : el('div', {class: 'verdict bad', id: 'verdict'}, 'Verification failed: ' + v.replicas.filter((r) => !r.ok)
        .map((r) => `replica ${r.replica}: ${r.error} (${r.file} line ${r.line})`).join('; '));
  const reg = data.registry;
  main().replaceChildren(
    el('h1', {}, 'Session ', el('span', {class: 'mono'}, id)),
    reg ? el('p', {}, `user ${reg.user || '(none)'} · ${reg.state} · created ${when(reg.created_ms)}` +
              (reg.expires_ms ? ` · expires ${when(reg.expires_ms)}` : '')) : '',
    verdict,
    el('table', {id: 'timeline'},
      el('thead', {}, el('tr', {}, ['Time', 'Seq', 'Event', 'Decision', 'Request', 'Status', 'Code', 'Rule', 'Credential', 'Tokens']
        .map((h) => el('th', {}, h)))),
      el('tbody', {}, data.records.map((r) => el('tr', {class: r.decision === 'deny' ? 'deny' : null},
        el('td', {class: 'mono'}, r.ts || ''),
        el('td', {class: 'num'}, r.seq ?? ''),
        el('td', {}, r.event || (r.unparseable ? 'unparseable' : '')),
        el('td', {}, r.decision || ''),
        el('td', {class: 'mono'}, target(r)),
        el('td', {class: 'num'}, r.status || ''),
        el('td', {class: 'mono'}, r.error || ''),
        el('td', {class: 'mono'}, r.rule || ''),
        el('td', {}, r.credential || ''),
        el('td', {class: 'num'}, r.llm_tokens ?? ''))))),
    el('div', {class: 'pager'},
      el('button', {type: 'button', id: 'older', disabled: data.page <= 0, onclick: () => { s.page = data.page - 1; show(); }}, '‹ Older'),
      `page ${data.page + 1} of ${data.pages} · ${number(data.total)} records, oldest first`,
      el('button', {type: 'button', id: 'newer', disabled: data.page + 1 >= data.pages, onclick: () => { s.page = data.page + 1; show(); }}, 'Newer ›')));
  status('');
  // Asked again until the verdict is in.
  if (v.pending) timer = setTimeout(show, 2000);
}

// ---- Spend: LLM tokens and cost per day and user, top sessions; the numbers beside the charts.
const spendState = {days: 30};
const charts = [];
const palette = ['#1f5fbf', '#d9822b', '#1e7b34', '#b3261e', '#7b4bb7', '#0f8b8d', '#8c6d1f', '#c2185b', '#546e7a', '#5d4037'];

function chart(canvasId, config) {
  if (typeof Chart === 'undefined') return;
  charts.push(new Chart(document.getElementById(canvasId), config));
}

async function spendView() {
  const data = await api('/api/console/spend?' + query(spendState));
  charts.splice(0).forEach((c) => c.destroy());
  const stacked = (tick) => ({responsive: true, maintainAspectRatio: false, animation: false,
    scales: {x: {stacked: true}, y: {stacked: true, beginAtZero: true, ticks: {callback: tick}}}});
  main().replaceChildren(
    el('h1', {}, 'Spend'),
    el('div', {class: 'filters'}, el('label', {for: 'days'}, 'Days'),
      el('select', {id: 'days', onchange: (e) => { spendState.days = Number(e.target.value); show(); }},
        [7, 30, 90].map((d) => el('option', {value: d, selected: d === spendState.days}, d)))),
    el('div', {class: 'spend'},
      el('div', {},
        el('h2', {}, 'LLM tokens per day, by user'), el('div', {class: 'chart'}, el('canvas', {id: 'tokens-chart'})),
        el('h2', {}, 'Cost per day, by user (USD)'), el('div', {class: 'chart'}, el('canvas', {id: 'cost-chart'})),
        el('h2', {}, 'Top sessions by cost'), el('div', {class: 'chart'}, el('canvas', {id: 'sessions-chart'}))),
      el('div', {},
        el('h2', {}, 'Per day and user'),
        el('table', {id: 'spend-table'},
          el('thead', {}, el('tr', {}, ['Day', 'User', 'Sessions', 'Responses', 'LLM tokens', 'Cost'].map((h, i) =>
            el('th', {class: i >= 2 ? 'num' : null}, h)))),
          el('tbody', {}, data.table.length ? data.table.map((r) => el('tr', {},
            el('td', {class: 'mono'}, r.day), el('td', {}, r.user), el('td', {class: 'num'}, number(r.sessions)),
            el('td', {class: 'num'}, number(r.responses)), el('td', {class: 'num'}, number(r.llm_tokens)),
            el('td', {class: 'num'}, usd(r.cost_usd))))
            : el('tr', {}, el('td', {colspan: 6, class: 'quiet'}, 'No LLM responses in these days.')))),
        el('h2', {}, 'Top sessions'),
        el('table', {id: 'spend-sessions'},
          el('thead', {}, el('tr', {}, ['Session', 'User', 'LLM tokens', 'Cost'].map((h, i) => el('th', {class: i >= 2 ? 'num' : null}, h)))),
          el('tbody', {}, data.sessions.map((x) => el('tr', {},
            el('td', {}, el('a', {href: '/console/session/' + x.session, class: 'mono'}, x.session)),
            el('td', {}, x.user), el('td', {class: 'num'}, number(x.total_llm_tokens)),
            el('td', {class: 'num'}, usd(x.total_cost_usd)))))))));
  const byUser = (key) => ({labels: data.days.map((d) => d.slice(5)), datasets: data.users.map((u, i) =>
    ({label: u.user, data: u[key], backgroundColor: palette[i % palette.length]}))});
  chart('tokens-chart', {type: 'bar', data: byUser('llm_tokens'), options: stacked((v) => number(v))});
  chart('cost-chart', {type: 'bar', data: byUser('cost_usd'), options: stacked((v) => usd(v))});
  chart('sessions-chart', {type: 'bar', options: {responsive: true, maintainAspectRatio: false, animation: false, indexAxis: 'y'},
    data: {labels: data.sessions.map((x) => `${x.session} (${x.user})`),
           datasets: [{label: 'cost (USD)', data: data.sessions.map((x) => x.total_cost_usd), backgroundColor: palette[0]}]}});
  status(indexNote(data.index));
}

// ---- The shell: which view, how often it refreshes, the pending asks' badge.
const views = [
  {path: /^\/console\/sessions$/, nav: 'nav-sessions', draw: () => sessionsView(), every: 2000},
  {path: /^\/console\/refusals$/, nav: 'nav-refusals', draw: () => refusalsView(), every: 3000},
  {path: /^\/console\/asks$/, nav: 'nav-asks', draw: () => asksView(), every: 1000},
  {path: /^\/console\/session\/([A-Za-z0-9._-]+)$/, nav: null, draw: (m) => sessionView(m[1]), every: 0},
  {path: /^\/console\/spend$/, nav: 'nav-spend', draw: () => spendView(), every: 0},
];

async function show() {
  const path = window.location.pathname;
  for (const view of views) {
    const m = path.match(view.path);
    if (!m) continue;
    if (view.nav) document.getElementById(view.nav).classList.add('current');
    clearTimeout(timer);
    try {
      await view.draw(m);
    } catch (e) {
      if (!(e instanceof Refused) || e.message !== 'signed out') status('error: ' + e.message);
    }
    // Refresh while the page is open, unless the operator is typing into a filter.
    if (view.every) timer = setTimeout(() => {
      const focused = document.activeElement;
      if (focused && (focused.tagName === 'INPUT' || focused.tagName === 'SELECT')) timer = setTimeout(show, view.every);
      else show();
    }, view.every);
    return;
  }
  main().replaceChildren(el('p', {}, 'No such page.'));
}

async function badge() {
  try {
    const data = await api('/api/asks');
    document.getElementById('asks-count').textContent = data.asks.length ? data.asks.length : '';
  } catch (e) { /* the view says what is wrong */ }
}

document.addEventListener('DOMContentLoaded', async () => {
  try {
    me = await api('/api/console/me');
  } catch (e) {
    return;
  }
  document.getElementById('who').textContent = me.name;
  document.getElementById('sign-out').addEventListener('click', async () => {
    await fetch('/console/logout', {method: 'POST', credentials: 'same-origin', headers: {'X-CSRF-Token': me.csrf}});
    window.location.assign('/console/login');
  });
  await show();
  badge();
  setInterval(badge, 2000);
});
