// Janus console. Plain JavaScript, no framework and no build step: every
// view is a function that fills <main> from the console's JSON API
// (/ui/api/...), and writes go through etcd's JSON gateway (/v3/...) with
// the user's etcd token, exactly as any etcd client's would.
'use strict';

const main = document.getElementById('main');
const statusLine = document.getElementById('status');
let token = sessionStorage.getItem('janus-token') || '';
let userName = sessionStorage.getItem('janus-user') || '';
// stopView ends what the current view keeps running (timers, streams).
let stopView = () => {};

// el builds an element: el('td', {class: 'num'}, 'text', child...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function authHeaders() {
  return token ? { Authorization: token } : {};
}

// api GETs a console API path and returns its JSON, or throws its error.
async function api(path, params) {
  const q = new URLSearchParams(params || {});
  const res = await fetch('api/' + path + (q.toString() ? '?' + q : ''), { headers: authHeaders() });
  const body = await res.json();
  if (res.status === 401) { needLogin(body.error); throw new Error(body.error); }
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// gateway POSTs to etcd's JSON gateway, as etcd's own clients do.
async function gateway(path, body) {
  const res = await fetch('/v3/' + path, {
    method: 'POST',
    headers: Object.assign({ 'Content-Type': 'application/json' }, authHeaders()),
    body: JSON.stringify(body),
  });
  const out = await res.json();
  if (!res.ok) throw new Error(out.message || out.error || res.statusText);
  return out;
}

// Keys and values travel as base64 of their bytes.
function b64(s) { return bytesB64(new TextEncoder().encode(s)); }
function bytesB64(bytes) { let s = ''; for (const b of bytes) s += String.fromCharCode(b); return btoa(s); }
function unb64(s) { const bin = atob(s || ''); const out = new Uint8Array(bin.length); for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i); return out; }
function text(bytes) { try { return new TextDecoder('utf-8', { fatal: true }).decode(bytes); } catch { return null; } }
function hex(bytes) { return Array.from(bytes, b => b.toString(16).padStart(2, '0')).join(' '); }
function keyText(k64) { const b = unb64(k64); const t = text(b); return t === null ? '0x' + hex(b).replace(/ /g, '') : t; }

function say(msg, cls) { statusLine.textContent = msg; statusLine.className = cls || ''; }

// ---- routing: every view has its own URL ----

function params() { return new URLSearchParams(location.search); }

function go(query, replace) {
  const url = '?' + new URLSearchParams(query);
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  route();
}

const views = { tree: treeView, search: searchView, sessions: sessionsView, locks: locksView, cluster: clusterView, events: eventsView, migration: migrationView };

async function route() {
  stopView(); stopView = () => {};
  const p = params();
  const view = views[p.get('view')] ? p.get('view') : 'tree';
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.view === view) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  main.replaceChildren();
  try {
    await views[view](p);
  } catch (e) {
    if (!loginShown) main.append(el('p', { class: 'err', role: 'alert' }, e.message));
  }
}

document.querySelector('nav').addEventListener('click', ev => {
  const a = ev.target.closest('a');
  if (!a || ev.ctrlKey || ev.metaKey) return;
  ev.preventDefault();
  go({ view: a.dataset.view });
});
window.addEventListener('popstate', route);

// ---- login (etcd auth) ----

function showWho() {
  const who = document.getElementById('who');
  who.replaceChildren();
  if (userName) {
    who.append('Signed in as ', el('strong', {}, userName), ' ',
      el('button', { type: 'button', onclick: () => { token = userName = ''; sessionStorage.clear(); showWho(); route(); } }, 'Sign out'));
  }
}

let loginShown = false;
function needLogin(reason) {
  if (loginShown) return;
  loginShown = true;
  stopView();
  const name = el('input', { id: 'login-name', name: 'name', autocomplete: 'username', required: true });
  const pass = el('input', { id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password' });
  const msg = el('p', { role: 'alert', class: 'err' }, reason && reason !== 'login required' ? reason : '');
  const form = el('form', { class: 'login panel', 'aria-labelledby': 'login-title', onsubmit: async ev => {
    ev.preventDefault();
    try {
      const out = await gateway('auth/authenticate', { name: name.value, password: pass.value });
      token = out.token; userName = name.value;
      sessionStorage.setItem('janus-token', token); sessionStorage.setItem('janus-user', userName);
      loginShown = false; showWho(); route();
    } catch (e) { msg.textContent = e.message; }
  } },
  el('h2', { id: 'login-title' }, 'Sign in with an etcd user'),
  el('p', {}, 'Authentication is enabled: the console shows what this user may read, and writes as this user.'),
  el('label', { for: 'login-name' }, 'User'), name,
  el('label', { for: 'login-password' }, 'Password'), pass,
  el('p', {}, el('button', { type: 'submit' }, 'Sign in')), msg);
  main.replaceChildren(form);
  name.focus();
}

// ---- tree ----

const ROW = 28, PAGE = 200;

function pathParts(path) {
  const parts = path.split('/').filter(Boolean);
  const out = [['/', '/']];
  let acc = '';
  for (const p of parts) { acc += '/' + p; out.push([p, acc]); }
  return out;
}

function parentOf(path) {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

// treeView shows a node and, beside it, its children; a leaf shows its
// siblings instead, with itself selected.
async function treeView(p) {
  const path = p.get('path') || '/';
  const key = p.get('key');
  const which = key !== null ? { key } : { path };
  const n = await api('node', which);
  let listed = path;
  if (key !== null) listed = '/';
  else if (path !== '/' && !n.hidden && (!n.zk || n.zk.stat.numChildren === 0)) listed = parentOf(path);
  const node = el('section', { class: 'panel', 'aria-labelledby': 'node-title' });
  const list = el('section', { class: 'panel', 'aria-label': 'Children' });
  main.append(el('div', { class: 'tree' }, list, node));
  await Promise.all([
    childrenPanel(list, listed, key === null ? path : null, p.get('q') || ''),
    nodePanel(node, which, n),
  ]);
}

// childrenPanel draws a virtual list of path's children: the server says
// how many match, and only the rows in sight are fetched and drawn, so a
// parent with 100,000 children costs a few pages.
async function childrenPanel(box, path, selected, q) {
  const crumbs = el('nav', { class: 'crumbs', 'aria-label': 'Path' });
  pathParts(path).forEach(([name, full], i) => {
    if (i > 1) crumbs.append(' / ');
    crumbs.append(el('a', { href: '?' + new URLSearchParams({ view: 'tree', path: full }), onclick: ev => { ev.preventDefault(); go({ view: 'tree', path: full }); } }, name));
  });
  const filter = el('input', { id: 'child-filter', type: 'search', value: q, placeholder: 'name prefix' });
  const count = el('span', { id: 'child-count', class: 'badge' });
  const vlist = el('div', { class: 'vlist', id: 'children', role: 'list', 'aria-label': 'Children of ' + path, tabindex: '0' });
  const spacer = el('div', { style: 'height:0' });
  vlist.append(spacer);
  box.append(el('h2', {}, 'Children ', count), crumbs,
    el('form', { class: 'inline', role: 'search', onsubmit: ev => { ev.preventDefault(); go({ view: 'tree', path, q: filter.value }); } },
      el('label', { for: 'child-filter' }, 'Filter children', filter), el('button', { type: 'submit' }, 'Filter')));
  box.append(vlist);
  const pages = new Map();
  let total = 0;
  async function page(i) {
    if (!pages.has(i)) pages.set(i, api('children', { path, offset: i * PAGE, limit: PAGE, q }));
    return pages.get(i);
  }
  async function draw() {
    const first = Math.floor(vlist.scrollTop / ROW);
    const last = Math.min(total, first + Math.ceil(vlist.clientHeight / ROW) + 5);
    const want = new Set();
    for (let i = Math.floor(first / PAGE); i <= Math.floor(Math.max(first, last - 1) / PAGE); i++) want.add(i);
    const got = await Promise.all([...want].map(page));
    for (const old of vlist.querySelectorAll('.row')) {
      const i = +old.dataset.index;
      if (i < first || i >= last) old.remove();
    }
    for (const pg of got) {
      pg.children.forEach((c, j) => {
        const i = pg.offset + j;
        if (i < first || i >= last || vlist.querySelector(`.row[data-index="${i}"]`)) return;
        const row = el('a', { class: 'row' + (c.path === selected ? ' sel' : ''), role: 'listitem', 'data-index': i, 'data-path': c.path,
          href: '?' + new URLSearchParams({ view: 'tree', path: c.path }), style: `top:${i * ROW}px`,
          onclick: ev => { ev.preventDefault(); go({ view: 'tree', path: c.path }); } },
        c.name,
        c.numChildren ? el('span', { class: 'badge' }, c.numChildren) : null,
        c.ephemeral ? el('span', { class: 'badge eph' }, 'ephemeral') : null,
        c.implicit ? el('span', { class: 'badge imp' }, 'implicit') : null,
        c.system ? el('span', { class: 'badge' }, 'system') : null,
        c.mode !== 'persistent' ? el('span', { class: 'badge' }, c.mode) : null);
        vlist.append(row);
      });
    }
  }
  const first = await page(0);
  total = first.total;
  count.textContent = total;
  spacer.style.height = total * ROW + 'px';
  if (total === 0) vlist.append(el('p', { class: 'none' }, 'no children'));
  let pending = false;
  vlist.addEventListener('scroll', () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw().catch(e => say(e.message, 'err')); });
  });
  // Arrow keys walk the rows; the list scrolls to keep the focus in sight.
  vlist.addEventListener('keydown', async ev => {
    if (ev.key !== 'ArrowDown' && ev.key !== 'ArrowUp') return;
    ev.preventDefault();
    const cur = document.activeElement.classList.contains('row') ? +document.activeElement.dataset.index : -1;
    const next = Math.max(0, Math.min(total - 1, cur + (ev.key === 'ArrowDown' ? 1 : -1)));
    if (next * ROW < vlist.scrollTop || (next + 1) * ROW > vlist.scrollTop + vlist.clientHeight) vlist.scrollTop = next * ROW - vlist.clientHeight / 2;
    await draw();
    const row = vlist.querySelector(`.row[data-index="${next}"]`);
    if (row) row.focus();
  });
  await draw();
  if (path === '/') box.append(await nonPathKeys());
}

// nonPathKeys lists, page by page, the etcd keys ZooKeeper cannot see.
async function nonPathKeys() {
  const ul = el('ul', { id: 'nonpath' });
  const more = el('button', { type: 'button' }, 'More');
  const sec = el('section', { 'aria-labelledby': 'nonpath-title' }, el('h3', { id: 'nonpath-title' }, 'Keys only etcd sees (not ZooKeeper paths)'), ul);
  let next = '';
  async function load() {
    const out = await api('keys', next ? { after64: next, limit: 100 } : { limit: 100 });
    for (const k of out.keys) {
      const t = keyText(k);
      ul.append(el('li', {}, el('a', { href: '?' + new URLSearchParams({ view: 'tree', key: t }), onclick: ev => { ev.preventDefault(); go({ view: 'tree', key: t }); } }, JSON.stringify(t))));
    }
    next = out.next;
    if (!next) more.remove();
    if (!ul.children.length && !next) ul.append(el('li', { class: 'none' }, 'none'));
  }
  more.addEventListener('click', () => load().catch(e => say(e.message, 'err')));
  sec.append(more);
  await load();
  return sec;
}

// valueBlock renders a value as text, hex or JSON, the person's choice.
function valueBlock(v64) {
  const bytes = unb64(v64);
  const t = text(bytes);
  let json = null;
  if (t !== null && t.trim()) { try { json = JSON.stringify(JSON.parse(t), null, 2); } catch { /* not JSON */ } }
  const pre = el('pre', { class: 'value', id: 'value', tabindex: '0', 'aria-label': 'Value' });
  const sel = el('select', { id: 'value-as' },
    el('option', { value: 'text' }, 'text'), el('option', { value: 'hex' }, 'hex'), json ? el('option', { value: 'json' }, 'JSON') : null);
  const show = () => { pre.textContent = sel.value === 'hex' ? hex(bytes) : sel.value === 'json' ? json : (t === null ? '(not UTF-8; see hex)' : t); };
  sel.value = json ? 'json' : t === null ? 'hex' : 'text';
  sel.addEventListener('change', show);
  show();
  return el('div', {}, el('label', { for: 'value-as' }, 'Show value as '), sel, ' ', el('span', { class: 'badge' }, bytes.length + ' bytes'), pre);
}

function table(id, rows) {
  return el('table', { id }, el('tbody', {}, rows.map(([k, v]) => el('tr', {}, el('th', { scope: 'row' }, k), el('td', { class: 'num', 'data-field': k }, v)))));
}

function fmtTime(ms) { return ms ? new Date(ms).toISOString() : '0'; }

async function nodePanel(box, which, n) {
  const name = n.isPath ? n.key : JSON.stringify(n.key);
  box.append(el('h2', { id: 'node-title' }, name));
  if (n.hidden) { box.append(el('p', { class: 'none', id: 'hidden' }, 'You may not read this node; the children listed are those you may reach.')); return; }
  if (!n.exists) { box.append(el('p', { class: 'none' }, 'No such node or key.'), writeForms(n)); return; }
  const flags = [];
  if (n.zk && n.zk.implicit) flags.push('implicit parent: ZooKeeper sees it, etcd does not');
  if (n.zk && n.zk.system) flags.push('ZooKeeper system node');
  if (n.zk && n.zk.mode === 'container') flags.push('container: removed once its last child goes');
  if (n.zk && n.zk.mode === 'ttl') flags.push('TTL node: removed when childless and unmodified for ' + n.zk.ttlMs + ' ms');
  if (!n.isPath) flags.push('not a ZooKeeper path: only etcd clients see this key');
  if (n.lease) flags.push((n.lease.session ? 'ephemeral of session 0x' : 'attached to lease ') + n.lease.idHex + ' (' + Math.round(n.lease.remainingMs / 1000) + ' s left)');
  box.append(el('ul', { id: 'flags' }, flags.map(f => el('li', {}, f))));
  const kvSide = el('section', { class: 'face-etcd', 'aria-labelledby': 'etcd-title' }, el('h3', { id: 'etcd-title' }, 'etcd KeyValue'));
  if (n.etcd) {
    kvSide.append(table('etcd-kv', [['key', keyText(n.etcd.key)], ['create_revision', n.etcd.create_revision || 0], ['mod_revision', n.etcd.mod_revision || 0],
      ['version', n.etcd.version || 0], ['lease', n.etcd.lease !== '0' ? n.etcd.lease + ' (0x' + BigInt(n.etcd.lease).toString(16) + ')' : '0']]), valueBlock(n.etcd.value));
  } else kvSide.append(el('p', { class: 'none', id: 'etcd-kv' }, 'etcd Range does not return this node.'));
  const zkSide = el('section', { class: 'face-zk', 'aria-labelledby': 'zk-title' }, el('h3', { id: 'zk-title' }, 'ZooKeeper Stat'));
  if (n.zk) {
    const s = n.zk.stat;
    zkSide.append(table('zk-stat', [['czxid', '0x' + s.czxid.toString(16)], ['mzxid', '0x' + s.mzxid.toString(16)], ['pzxid', '0x' + s.pzxid.toString(16)],
      ['ctime', fmtTime(s.ctime)], ['mtime', fmtTime(s.mtime)], ['version', s.version], ['cversion', s.cversion], ['aversion', s.aversion],
      ['ephemeralOwner', '0x' + BigInt(s.ephemeralOwner).toString(16)], ['dataLength', s.dataLength], ['numChildren', s.numChildren]]),
    el('h3', {}, 'ACL'),
    el('table', { id: 'zk-acl' }, el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'scheme'), el('th', { scope: 'col' }, 'id'), el('th', { scope: 'col' }, 'perms'))),
      el('tbody', {}, n.zk.acl.map(a => el('tr', {}, el('td', {}, a.scheme), el('td', {}, a.id), el('td', {}, a.perms))))));
  } else zkSide.append(el('p', { class: 'none', id: 'zk-stat' }, 'ZooKeeper cannot see this key.'));
  box.append(el('div', { class: 'two' }, kvSide, zkSide));
  box.append(writeForms(n));
  if (n.etcd) box.append(historyBlock(which));
}

// writeForms are the console's writes: each is one etcd Txn through the
// gateway, guarded by a compare on the version shown, so a write made
// from a stale page fails instead of overwriting someone else's.
function writeForms(n) {
  const sec = el('section', { 'aria-labelledby': 'write-title' }, el('h3', { id: 'write-title' }, 'Write'));
  const result = el('p', { id: 'write-result', role: 'status' });
  const k64 = n.key64;
  const done = (out, what) => {
    if (out.succeeded) { say(what + ' done'); route(); } else result.textContent = what + ' refused: the node changed since this page was drawn (version check failed). Reload to see it.';
  };
  const fail = e => { result.textContent = e.message; result.className = 'err'; };
  const version = n.etcd ? n.etcd.version || 0 : 0;
  if (n.etcd) {
    const val = el('textarea', { id: 'set-value', rows: 3, cols: 40 }, text(unb64(n.etcd.value)) || '');
    sec.append(el('form', { class: 'inline', onsubmit: ev => { ev.preventDefault();
      gateway('kv/txn', { compare: [{ key: k64, target: 'VERSION', result: 'EQUAL', version: String(version) }],
        success: [{ request_put: { key: k64, value: b64(val.value) } }] }).then(o => done(o, 'Set'), fail); } },
    el('label', { for: 'set-value' }, 'New value (if version is still ' + version + ')', val), el('button', { type: 'submit', id: 'set-submit' }, 'Set')));
    sec.append(el('form', { class: 'inline', onsubmit: ev => { ev.preventDefault();
      if (!confirm('Delete ' + n.key + ' (version ' + version + ')?')) return;
      gateway('kv/txn', { compare: [{ key: k64, target: 'VERSION', result: 'EQUAL', version: String(version) }],
        success: [{ request_delete_range: { key: k64 } }] }).then(o => done(o, 'Delete'), fail); } },
    el('button', { type: 'submit', class: 'danger', id: 'delete-submit' }, 'Delete this key')));
  }
  if (n.isPath) {
    const child = el('input', { id: 'create-name', required: true });
    const cval = el('input', { id: 'create-value' });
    sec.append(el('form', { class: 'inline', onsubmit: ev => { ev.preventDefault();
      const p = (n.key === '/' ? '' : n.key) + '/' + child.value;
      const ck = b64(p);
      gateway('kv/txn', { compare: [{ key: ck, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
        success: [{ request_put: { key: ck, value: b64(cval.value) } }] }).then(o => {
        if (o.succeeded) go({ view: 'tree', path: p }); else result.textContent = p + ' already exists';
      }, fail); } },
    el('label', { for: 'create-name' }, 'New child name', child), el('label', { for: 'create-value' }, 'Value', cval),
    el('button', { type: 'submit', id: 'create-submit' }, 'Create child')));
  }
  sec.append(result);
  return sec;
}

// historyBlock loads a key's versions on demand, each with a line diff
// against the one before it.
function historyBlock(which) {
  const box = el('div', { id: 'history' });
  const btn = el('button', { type: 'button', id: 'history-load' }, 'Show history');
  btn.addEventListener('click', async () => {
    btn.remove();
    const h = await api('history', which);
    const vs = h.versions;
    const tbody = el('tbody');
    vs.forEach((v, i) => {
      const cur = text(unb64(v.value)) ?? hex(unb64(v.value));
      const prev = i + 1 < vs.length ? (text(unb64(vs[i + 1].value)) ?? hex(unb64(vs[i + 1].value))) : null;
      tbody.append(el('tr', {}, el('td', { class: 'num' }, v.mod_revision), el('td', { class: 'num' }, v.version),
        el('td', {}, el('div', { class: 'diff' }, prev === null ? el('ins', {}, cur) : lineDiff(prev, cur)))));
    });
    box.append(el('table', {}, el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'mod_revision'), el('th', { scope: 'col' }, 'version'), el('th', { scope: 'col' }, 'change'))), tbody));
    if (h.compacted) box.append(el('p', { class: 'none' }, 'Older versions were compacted away.'));
  });
  return el('section', { 'aria-labelledby': 'history-title' }, el('h3', { id: 'history-title' }, 'History'), btn, box);
}

// lineDiff is a longest-common-subsequence diff of two texts by line.
function lineDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  if (x.length * y.length > 250000) return [el('del', {}, a), el('ins', {}, b)];
  const L = Array.from({ length: x.length + 1 }, () => new Int32Array(y.length + 1));
  for (let i = x.length - 1; i >= 0; i--) for (let j = y.length - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < x.length && j < y.length) {
    if (x[i] === y[j]) { out.push(el('span', { style: 'display:block' }, x[i])); i++; j++; } else if (L[i + 1][j] >= L[i][j + 1]) out.push(el('del', {}, x[i++])); else out.push(el('ins', {}, y[j++]));
  }
  while (i < x.length) out.push(el('del', {}, x[i++]));
  while (j < y.length) out.push(el('ins', {}, y[j++]));
  return out;
}

// ---- search ----

// searchView finds keys across the whole keyspace by prefix or substring.
// The server examines a bounded number of keys per request and returns a
// cursor; "More" continues from it, so a search of a large store is many
// short requests.
async function searchView(p) {
  const q = p.get('q') || '';
  const mode = p.get('mode') === 'contains' ? 'contains' : 'prefix';
  const input = el('input', { id: 'search-q', type: 'search', value: q, placeholder: '/app/ or a part of a key' });
  const select = el('select', { id: 'search-mode' },
    el('option', { value: 'prefix', selected: mode === 'prefix' }, 'starts with'),
    el('option', { value: 'contains', selected: mode === 'contains' }, 'contains'));
  main.append(el('form', { class: 'inline panel', role: 'search', onsubmit: ev => { ev.preventDefault(); go({ view: 'search', q: input.value, mode: select.value }); } },
    el('label', { for: 'search-mode' }, 'Key', select), el('label', { for: 'search-q' }, 'Text', input), el('button', { type: 'submit', id: 'search-submit' }, 'Search')));
  if (!p.has('q')) { input.focus(); return; }
  const ul = el('ul', { id: 'search-results', class: 'hits' });
  const more = el('button', { type: 'button', id: 'search-more' }, 'More');
  const count = el('p', { id: 'search-count', class: 'none' });
  main.append(el('section', { class: 'panel', 'aria-labelledby': 'search-title' },
    el('h2', { id: 'search-title' }, 'Keys that ' + (mode === 'prefix' ? 'start with ' : 'contain ') + JSON.stringify(q)), count, ul, more));
  let next = '', scanned = 0, found = 0;
  async function load() {
    const params = { q, mode, limit: 100 };
    if (next) params.after64 = next;
    const out = await api('search', params);
    for (const h of out.hits) {
      const t = keyText(h.key64);
      const link = h.isPath ? { view: 'tree', path: t } : { view: 'tree', key: t };
      ul.append(el('li', {}, el('a', { href: '?' + new URLSearchParams(link), onclick: ev => { ev.preventDefault(); go(link); } }, h.isPath ? t : JSON.stringify(t)),
        h.isPath ? null : el('span', { class: 'badge' }, 'etcd only'),
        h.ephemeral ? el('span', { class: 'badge eph' }, 'leased') : null,
        el('span', { class: 'badge' }, 'version ' + h.version + ', revision ' + h.modRevision)));
    }
    next = out.next; scanned += out.scanned; found += out.hits.length;
    count.textContent = found + ' found, ' + scanned + ' keys examined at revision ' + out.rev + (next ? '; more may follow' : '; search complete') + '.';
    if (!next) more.remove();
  }
  more.addEventListener('click', () => load().catch(e => say(e.message, 'err')));
  await load();
}

// ---- sessions and leases ----

async function sessionsView() {
  const out = await api('sessions', { limit: 1000 });
  const tbody = el('tbody');
  for (const s of out.sessions) {
    const revoke = el('button', { type: 'button', class: 'danger', 'aria-label': 'Revoke ' + s.idHex, onclick: async () => {
      if (!confirm('Revoke ' + (s.session ? 'session' : 'lease') + ' 0x' + s.idHex + '? Its ' + s.keys.length + ' key(s) will be deleted.')) return;
      try { await gateway('lease/revoke', { ID: s.id }); route(); } catch (e) { say(e.message, 'err'); }
    } }, 'Revoke');
    tbody.append(el('tr', { 'data-lease': s.idHex },
      el('td', { class: 'num' }, '0x' + s.idHex), el('td', {}, s.face), el('td', { class: 'num' }, s.ttl + ' s'),
      el('td', { class: 'num' }, (s.remainingMs / 1000).toFixed(1) + ' s'), el('td', {}, s.client || (s.session ? 'not on this member' : 'not granted through this member')),
      el('td', {}, s.keys.length ? el('ul', {}, s.keys.map(k => el('li', {}, k.startsWith('/') ? el('a', { href: '?' + new URLSearchParams({ view: 'tree', path: k }) }, k) : JSON.stringify(k)))) : el('span', { class: 'none' }, 'none'), s.moreKeys ? '…' : ''),
      el('td', {}, revoke)));
  }
  main.append(el('section', { class: 'panel', 'aria-labelledby': 'sessions-title' },
    el('h2', { id: 'sessions-title' }, 'Sessions and leases ', el('span', { class: 'badge' }, out.total)),
    el('p', {}, 'A ZooKeeper session is an etcd lease: one list for both.'),
    el('table', { id: 'sessions' }, el('thead', {}, el('tr', {}, ['lease / session id', 'face', 'TTL', 'left', 'client', 'ephemerals / attached keys', ''].map(h => el('th', { scope: 'col' }, h)))), tbody)));
}

// ---- locks and elections ----

async function locksView(p) {
  const prefix = p.get('prefix') || '';
  const input = el('input', { id: 'lock-prefix', value: prefix, placeholder: '/ (everything)' });
  main.append(el('form', { class: 'inline panel', onsubmit: ev => { ev.preventDefault(); go({ view: 'locks', prefix: input.value }); } },
    el('label', { for: 'lock-prefix' }, 'Under prefix', input), el('button', { type: 'submit' }, 'Find locks')));
  const out = await api('locks', { prefix });
  const tbody = el('tbody');
  for (const l of out.locks) {
    tbody.append(el('tr', { 'data-prefix': l.prefix },
      el('td', {}, l.prefix.startsWith('/') ? el('a', { href: '?' + new URLSearchParams({ view: 'tree', path: l.prefix }) }, l.prefix) : l.prefix),
      el('td', {}, l.recipe), el('td', { class: 'holder' }, l.holder.key), el('td', { class: 'num token' }, l.holder.token),
      el('td', { class: 'num' }, '0x' + BigInt(l.holder.lease).toString(16)),
      el('td', {}, l.waiters.length ? el('ol', { class: 'waiters' }, l.waiters.map(w => el('li', {}, w.key + ' (token ' + w.token + ')'))) : el('span', { class: 'none' }, 'none'))));
  }
  main.append(el('section', { class: 'panel', 'aria-labelledby': 'locks-title' }, el('h2', { id: 'locks-title' }, 'Locks and elections'),
    el('p', {}, 'The fencing token is the holder key\'s create revision (its czxid): it grows with every new holder.'),
    out.locks.length ? el('table', { id: 'locks' }, el('thead', {}, el('tr', {}, ['lock', 'recipe', 'holder', 'fencing token', 'lease', 'waiters in order'].map(h => el('th', { scope: 'col' }, h)))), tbody)
      : el('p', { class: 'none' }, 'No lock or election found.'),
    out.truncated ? el('p', { class: 'err' }, 'Stopped after 200,000 keys: choose a narrower prefix.') : null));
}

// ---- cluster ----

// metricsSample reads the member's own Prometheus counters: proposals
// applied, and the log's fsync and the store's commit durations.
async function metricsSample() {
  const res = await fetch('/metrics');
  const body = await res.text();
  const v = name => { const m = body.match(new RegExp('^' + name + ' ([0-9.e+-]+)$', 'm')); return m ? +m[1] : 0; };
  return { t: performance.now(), applied: v('etcd_server_proposals_applied_total'),
    fsyncSum: v('etcd_disk_wal_fsync_duration_seconds_sum'), fsyncCount: v('etcd_disk_wal_fsync_duration_seconds_count'),
    commitSum: v('etcd_disk_backend_commit_duration_seconds_sum'), commitCount: v('etcd_disk_backend_commit_duration_seconds_count') };
}

// sparkline draws the last values as an SVG line, labelled for screen
// readers with the latest value.
function sparkline(id, title, values, unit) {
  const w = 320, h = 60, max = Math.max(1e-9, ...values);
  const pts = values.map((v, i) => `${(i / Math.max(1, values.length - 1)) * w},${h - (v / max) * (h - 4) - 2}`).join(' ');
  const last = values.length ? values[values.length - 1] : 0;
  const label = `${title}: ${last.toFixed(unit === 'ms' ? 2 : 1)} ${unit} now, ${max.toFixed(unit === 'ms' ? 2 : 1)} ${unit} peak`;
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`); svg.setAttribute('width', w); svg.setAttribute('height', h);
  svg.setAttribute('role', 'img'); svg.setAttribute('aria-label', label);
  const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
  line.setAttribute('points', pts); line.setAttribute('fill', 'none'); line.setAttribute('stroke', '#2457c5'); line.setAttribute('stroke-width', '2');
  svg.append(line);
  return el('figure', { id, class: 'chart' }, svg, el('figcaption', {}, label));
}

async function clusterView() {
  const box = el('section', { class: 'panel', 'aria-labelledby': 'cluster-title' });
  main.append(box);
  let timer = 0, live = true, prev = null;
  const rate = [], fsync = [], commit = [];
  stopView = () => { live = false; clearTimeout(timer); };
  async function draw() {
    const c = await api('cluster');
    try {
      const m = await metricsSample();
      if (prev) {
        const dt = (m.t - prev.t) / 1000;
        const mean = (sum, count, psum, pcount) => count > pcount ? (sum - psum) / (count - pcount) * 1000 : 0;
        rate.push((m.applied - prev.applied) / dt);
        fsync.push(mean(m.fsyncSum, m.fsyncCount, prev.fsyncSum, prev.fsyncCount));
        commit.push(mean(m.commitSum, m.commitCount, prev.commitSum, prev.commitCount));
        for (const a of [rate, fsync, commit]) if (a.length > 60) a.shift();
      }
      prev = m;
    } catch (e) { /* the charts wait for the next sample */ }
    const tbody = el('tbody');
    for (const m of c.members) {
      tbody.append(el('tr', { 'data-member': m.id },
        el('td', {}, m.name || m.id, m.self ? el('span', { class: 'badge' }, 'this member') : null),
        el('td', { class: 'role' }, m.role), el('td', { class: m.up ? 'up health' : 'down health' }, m.up ? 'up' : 'down'),
        el('td', { class: 'num' }, m.epoch || ''), el('td', { class: 'num' }, m.appliedIndex || ''), el('td', { class: 'num' }, m.commitIndex || ''),
        el('td', { class: 'num' }, m.up ? m.lag : ''), el('td', {}, m.etcdURL), el('td', {}, m.zkAddr), el('td', { class: 'err' }, m.error || '')));
    }
    box.replaceChildren(el('h2', { id: 'cluster-title' }, 'Cluster'),
      table('cluster-summary', [['cluster id', c.clusterId], ['leader', c.leaderId === '0' ? 'none' : c.leaderId], ['epoch', c.epoch], ['revision', c.rev],
        ['compacted to', c.compactRev], ['db size', c.dbSize + ' bytes'], ['alarms', c.alarms.length ? c.alarms.join(', ') : 'none']]),
      el('h3', {}, 'Members'),
      el('table', { id: 'members' }, el('thead', {}, el('tr', {}, ['member', 'role', 'health', 'epoch', 'applied', 'committed', 'lag', 'etcd', 'ZooKeeper', 'error'].map(h => el('th', { scope: 'col' }, h)))), tbody),
      el('h3', {}, 'This member, live (every 2 s, from its /metrics)'),
      el('div', { class: 'charts' }, sparkline('chart-throughput', 'Writes applied', rate, 'per s'),
        sparkline('chart-fsync', 'Log fsync, mean', fsync, 'ms'), sparkline('chart-commit', 'Store commit, mean', commit, 'ms')));
  }
  async function loop() {
    try { await draw(); } catch (e) { say(e.message, 'err'); }
    if (live) timer = setTimeout(loop, 2000);
  }
  await draw();
  timer = setTimeout(loop, 2000);
}

// ---- live events ----

// eventsView streams the changes under a prefix, from now on or from a
// chosen past revision. A dropped stream is resumed as EventSource would
// resume it: the next request sends Last-Event-ID, the last revision
// received, and the server continues after it.
async function eventsView(p) {
  const prefix = p.get('prefix') || '';
  const rev = p.get('rev') || '';
  const input = el('input', { id: 'events-prefix', value: prefix, placeholder: '(everything)' });
  const revInput = el('input', { id: 'events-rev', value: rev, inputmode: 'numeric', pattern: '[0-9]*', placeholder: '(now)' });
  const tbody = el('tbody', { id: 'event-rows' });
  const state = el('span', { id: 'events-state', class: 'badge' }, 'connecting');
  main.append(el('form', { class: 'inline panel', onsubmit: ev => { ev.preventDefault(); go(revInput.value ? { view: 'events', prefix: input.value, rev: revInput.value } : { view: 'events', prefix: input.value }); } },
    el('label', { for: 'events-prefix' }, 'Key prefix', input), el('label', { for: 'events-rev' }, 'From revision', revInput), el('button', { type: 'submit' }, 'Watch')),
  el('section', { class: 'panel', 'aria-labelledby': 'events-title' }, el('h2', { id: 'events-title' }, 'Live events ', state),
    el('table', { id: 'events' }, el('thead', {}, el('tr', {}, ['revision', 'key', 'etcd watch event', 'ZooKeeper watch events'].map(h => el('th', { scope: 'col' }, h)))), tbody)));
  const abort = new AbortController();
  let retry = 0;
  stopView = () => { abort.abort(); clearTimeout(retry); };
  let lastId = '';
  // stream reads one connection; it returns true if the page should
  // reconnect. EventSource cannot send the auth token, so the stream is
  // read with fetch and parsed here (text/event-stream).
  async function stream() {
    const headers = authHeaders();
    if (lastId) headers['Last-Event-ID'] = lastId;
    const q = { prefix };
    if (rev) q.rev = rev;
    const res = await fetch('api/events?' + new URLSearchParams(q), { headers, signal: abort.signal });
    if (!res.ok) { state.textContent = 'refused: ' + await res.text(); return false; }
    state.textContent = lastId ? 'live (resumed after revision ' + lastId + ')' : 'live';
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return true;
      buf += value;
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
        let type = 'message', data = '', id = null;
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) type = line.slice(7);
          else if (line.startsWith('data: ')) data += line.slice(6);
          else if (line.startsWith('id: ')) id = line.slice(4);
        }
        if (type === 'change') addEvent(tbody, JSON.parse(data));
        if (id !== null) lastId = id;
        if (type === 'compacted') {
          state.textContent = 'ended: revision ' + rev + ' is compacted (compact_revision ' + JSON.parse(data).compact_revision + ')';
          return false;
        }
        if (type === 'error') { state.textContent = 'ended: ' + JSON.parse(data); return false; }
      }
    }
  }
  (async () => {
    for (let wait = 500; ;) {
      let again;
      try { again = await stream(); } catch (e) {
        if (e.name === 'AbortError') return;
        again = true;
      }
      if (!again || abort.signal.aborted) return;
      state.textContent = 'reconnecting' + (lastId ? ' (after revision ' + lastId + ')' : '');
      await new Promise(ok => { retry = setTimeout(ok, wait); });
      wait = Math.min(wait * 2, 5000);
    }
  })();
}

function addEvent(tbody, ev) {
  const e = ev.etcd;
  tbody.prepend(el('tr', {}, el('td', { class: 'num' }, ev.rev), el('td', {}, ev.key),
    el('td', { class: 'etcd-event' }, e ? e.type + (e.type === 'PUT' ? ' version ' + (e.kv.version || 0) + ' value ' + JSON.stringify(text(unb64(e.kv.value)) ?? hex(unb64(e.kv.value))) : '') : el('span', { class: 'none' }, 'none (implicit parent)')),
    el('td', { class: 'zk-event' }, ev.zk.length ? ev.zk.map(z => z.type + ' ' + z.path).join(', ') : el('span', { class: 'none' }, 'none (not a path)'))));
  while (tbody.children.length > 500) tbody.lastChild.remove();
}

// ---- migration readiness ----

async function migrationView(p) {
  const prefix = p.get('prefix') || '/';
  const input = el('input', { id: 'migration-prefix', value: prefix });
  main.append(el('form', { class: 'inline panel', onsubmit: ev => { ev.preventDefault(); go({ view: 'migration', prefix: input.value }); } },
    el('label', { for: 'migration-prefix' }, 'Subtree or key prefix', input), el('button', { type: 'submit' }, 'Check')));
  const r = await api('migration', { prefix });
  const side = (id, title, findings, cmd) => el('section', { 'aria-labelledby': id + '-title', id },
    el('h3', { id: id + '-title' }, title),
    findings && findings.length
      ? el('table', {}, el('thead', {}, el('tr', {}, ['what', 'nodes', 'why', 'examples'].map(h => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, findings.map(f => el('tr', { 'data-kind': f.kind }, el('td', {}, f.kind), el('td', { class: 'num' }, f.count), el('td', {}, f.why),
          el('td', {}, el('ul', {}, f.examples.map(k => el('li', {}, k))))))))
      : el('p', { class: 'ok' }, 'Nothing here would be lost.'),
    el('p', {}, 'Try it first with:'), el('pre', { class: 'value' }, cmd));
  main.append(el('section', { class: 'panel', 'aria-labelledby': 'migration-title' },
    el('h2', { id: 'migration-title' }, 'Migration readiness of ' + (prefix || 'everything')),
    el('p', {}, r.scanned + ' keys checked at revision ' + r.rev + (r.truncated ? ' (stopped early: choose a narrower prefix)' : '') + '.'),
    el('div', { class: 'two' },
      side('to-etcd', 'Moving to pure etcd would lose', r.toEtcd, r.etcdCommand),
      side('to-zk', 'Moving to pure ZooKeeper would lose', r.toZooKeeper, r.zkCommand))));
}

// ---- start ----

(async () => {
  try {
    const who = await api('whoami');
    if (who.user) userName = who.user;
  } catch (e) {
    if (loginShown) return;
  }
  showWho();
  route();
})();
