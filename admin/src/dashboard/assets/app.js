// RingMQ dashboard: draws the page the path names from the JSON API of the server that
// served it. No libraries, nothing from the network (the machines are offline).
// Every value from the cluster goes into the DOM as text (never as HTML): message
// bodies and keys are whatever producers sent.
'use strict';

const $ = (sel) => document.querySelector(sel);
const SVG_NS = 'http://www.w3.org/2000/svg';

/** An element: attrs (class, id, href, data-*, ...) and children (text, nodes, arrays; null skipped). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'onclick') el.addEventListener('click', v);
    else if (k === 'onsubmit') el.addEventListener('submit', v);
    else el.setAttribute(k, v === true ? '' : String(v));
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

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

/** GET (or POST) a JSON API path; a failure throws with the server's sentence. */
async function api(path, options) {
  let r;
  try {
    r = await fetch(path, Object.assign({ cache: 'no-store' }, options || {}));
  } catch (e) {
    throw new Error(`the dashboard server did not answer ${path}: ${e.message}`);
  }
  let body;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error(`${path}: HTTP ${r.status} with a body that is not JSON`);
  }
  if (!r.ok) throw new Error(body && body.error ? body.error : `${path}: HTTP ${r.status}`);
  return body;
}

function setTitle(text) {
  $('#title').textContent = text;
  document.title = `${text} · RingMQ`;
}

function showError(e) {
  const el = $('#error');
  el.hidden = false;
  el.textContent = e && e.message ? e.message : String(e);
  document.body.dataset.state = 'error';
}

function clearError() {
  const el = $('#error');
  el.hidden = true;
  el.textContent = '';
}

function show(...nodes) {
  $('#content').replaceChildren(...nodes.flat(Infinity).filter((n) => n));
}

function ready() {
  if (document.body.dataset.state !== 'error') document.body.dataset.state = 'ready';
}

/** A table: headers ('#'-prefixed = numeric column), rows of cells; rowAttrs(i) per row. */
function table(headers, rows, rowAttrs) {
  const num = headers.map((x) => x.startsWith('#'));
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map((x, i) => h('th', { class: num[i] ? 'num' : null }, num[i] ? x.slice(1) : x)))),
    h('tbody', {}, rows.map((r, ri) => h('tr', rowAttrs ? rowAttrs(ri) : {},
      r.map((c, i) => (c instanceof Node && c.tagName === 'TD') ? c : h('td', { class: num[i] ? 'num' : null }, c))))));
}

/** A cell with a class (tests and styles find values by it). */
function td(cls, value, numeric) {
  return h('td', { class: [cls, numeric ? 'num' : null].filter(Boolean).join(' ') }, value);
}

function link(href, text) { return h('a', { href }, text); }
function q(params) { return new URLSearchParams(params).toString(); }
function param(name) { return new URLSearchParams(location.search).get(name) || ''; }
function fmtTime(ms) {
  const n = Number(ms);
  if (!n) return '-';
  return new Date(n).toISOString().replace('T', ' ').replace('Z', ' UTC');
}
function fmtRate(v) { return v === null || v === undefined ? '-' : (v >= 100 ? v.toFixed(0) : v.toFixed(1)); }
function fmtUs(v) {
  if (v === null || v === undefined) return '-';
  if (v >= 100000) return `${(v / 1000).toFixed(0)} ms`;
  return v >= 1000 ? `${(v / 1000).toFixed(2)} ms` : `${v.toFixed(0)} µs`;
}
/** A used fraction (runtime info's `commitLogDiskRatio`, 0..1) as a percent. */
function fmtPercent(r) {
  if (r === null || r === undefined || r === '') return '-';
  const n = Number(r);
  return Number.isFinite(n) ? `${(n * 100).toFixed(1)} %` : String(r);
}
/** Java's runtime string `[ d days, h hours, m minutes, s seconds ]` as `1 d 2 h 3 min 4 s`. */
function fmtUptime(text) {
  const n = String(text || '').match(/\d+/g);
  if (!n || n.length !== 4) return text || '-';
  const [d, hr, m, sec] = n.map(Number);
  return [[d, 'd'], [hr, 'h'], [m, 'min'], [sec, 's']].filter(([v], i, all) => v > 0 || i === all.length - 1 || all.slice(0, i).some(([w]) => w > 0)).map(([v, u]) => `${v} ${u}`).join(' ');
}
function badge(text, cls) { return h('span', { class: `badge ${cls || text}` }, text); }
function kpi(k, v, id) { return h('div', { class: 'kpi' }, h('div', { class: 'v', id }, v), h('div', { class: 'k' }, k)); }
function slug(...parts) { return parts.join('-').replace(/[^A-Za-z0-9_%|-]/g, '_'); }

// ---- pages ----

async function clusterPage() {
  setTitle('Cluster');
  const d = await api('/api/cluster');
  if (!d.brokers.length) {
    show(h('p', { class: 'note' }, 'The NameServer knows no broker yet.'));
    return;
  }
  const out = [];
  for (const c of d.clusters) {
    const brokers = d.brokers.filter((b) => b.cluster === c);
    out.push(h('h2', {}, `Cluster ${c}`));
    out.push(table(['Broker', '#BID', 'Role', 'Address', 'Version', '#In msg/s (10 s)', '#Out msg/s (10 s)', '#Messages stored', '#Disk used', 'Uptime', 'Status'],
      brokers.map((b) => [b.brokerName, String(b.brokerId), badge(b.role), h('span', { class: 'mono' }, b.addr), b.version, td('in', b.inTps, true), td('out', b.outTps, true),
        td('stored', b.storeMessages, true), fmtPercent(b.diskRatio), fmtUptime(b.uptime), b.error ? h('span', { class: 'badge bad' }, b.error) : h('span', { class: 'ok' }, 'answering')]),
      (i) => ({ id: slug('broker', brokers[i].brokerName, brokers[i].brokerId) })));
    for (const b of brokers) {
      if (!b.shards.length) continue;
      out.push(h('h2', {}, `Shards of ${b.brokerName} (${b.addr}, ${b.shardCount} shards, ${b.flushType} flush)`));
      out.push(table(['Shard', '#Messages put', '#Messages delivered', '#Messages stored', '#Bytes put', '#Flush behind (bytes)', '#Disk used', '#Suspended pulls', '#Forwarded in', '#Read errors'],
        b.shards.map((x) => [`shard ${x.id}`, x.putTotal, x.getTotal, x.storeMessages, x.putBytes, x.flushBehindBytes, fmtPercent(x.diskRatio), x.suspendedPulls, x.forwardedIn, x.readErrors]),
        (i) => ({ id: slug('shard', b.brokerName, b.brokerId, b.shards[i].id) })));
    }
  }
  show(out);
}

async function topicsPage() {
  setTitle('Topics');
  const d = await api('/api/topics');
  show(
    h('p', { class: 'note' }, `${d.topics.length} topics known to the NameServer.`),
    table(['Topic', 'Kind', '#Queues', '#Messages', 'Brokers', 'Last stored'],
      d.topics.map((t) => [link(`/topic?${q({ t: t.topic })}`, t.topic), badge(t.kind),
        t.queues === undefined ? '-' : String(t.queues),
        t.error ? h('span', { class: 'badge bad' }, t.error) : (t.messages === undefined ? '-' : String(t.messages)),
        (t.brokers || []).join(', '), fmtTime(t.lastUpdate)]),
      (i) => ({ id: slug('topic', d.topics[i].topic) })));
}

async function topicPage() {
  const t = param('t');
  setTitle(`Topic ${t}`);
  if (!t) throw new Error('no topic given: open a topic from the Topics page');
  const d = await api(`/api/topic?${q({ t })}`);
  const total = d.queues.reduce((n, x) => n + Math.max(0, x.maxOffset - x.minOffset), 0);
  show(
    h('div', { class: 'kpis' }, kpi('queues', String(d.queues.length)), kpi('messages stored', String(total), 'topic-messages'), kpi('kind', d.kind)),
    h('h2', {}, 'Route'),
    table(['Broker', 'Master address', '#Read queues', '#Write queues', '#Perm'],
      d.queueData.map((x) => [x.brokerName, d.brokers[x.brokerName] || '-', String(x.readQueueNums), String(x.writeQueueNums), String(x.perm)])),
    h('h2', {}, 'Queue offsets'),
    table(['Broker', '#Queue', '#Min offset', '#Max offset', '#Messages', 'Last stored'],
      d.queues.map((x) => [x.brokerName, String(x.queueId), td('min', String(x.minOffset), true), td('max', String(x.maxOffset), true),
        String(Math.max(0, x.maxOffset - x.minOffset)), fmtTime(x.lastUpdateTimestamp)]),
      (i) => ({ id: slug('q', d.queues[i].brokerName, d.queues[i].queueId) })),
    h('h2', {}, 'Consumer groups'),
    d.groupsError ? h('div', { class: 'error' }, d.groupsError)
      : (d.groups.length ? h('ul', {}, d.groups.map((g) => h('li', {}, link(`/group?${q({ g })}`, g)))) : h('p', { class: 'note' }, 'No group consumes this topic.')),
    h('p', {}, link(`/messages?${q({ t, mode: 'time' })}`, 'Search messages of this topic')));
}

async function groupsPage() {
  setTitle('Consumer groups');
  const d = await api('/api/groups');
  const out = [h('p', { class: 'note' }, `${d.groups.length} groups (subscription groups and groups with committed offsets).`)];
  for (const e of d.scanErrors) out.push(h('div', { class: 'error' }, e));
  out.push(table(['Group', 'Topics', '#Queues', '#Lag (messages)'],
    d.groups.map((g) => [link(`/group?${q({ g: g.group })}`, g.group),
      g.error ? h('span', { class: 'badge bad' }, g.error) : g.topics.join(', '),
      g.queues === undefined ? '-' : String(g.queues),
      td(`lag${g.lag > 0 ? ' lag-positive' : ''}`, g.lag === undefined ? '-' : String(g.lag), true)]),
    (i) => ({ id: slug('group', d.groups[i].group) })));
  show(out);
}

async function groupPage() {
  const g = param('g');
  setTitle(`Consumer group ${g}`);
  if (!g) throw new Error('no group given: open a group from the Consumer groups page');
  const d = await api(`/api/group?${q({ g })}`);
  const conns = d.connection && d.connection.connectionSet ? d.connection.connectionSet : [];
  show(
    h('div', { class: 'kpis' }, kpi('total lag (messages)', String(d.lagTotal), 'lag-total'), kpi('queues', String(d.queues.length)), kpi('clients online', String(conns.length))),
    h('h2', {}, 'Lag per queue'),
    table(['Topic', 'Broker', '#Queue', '#Broker offset', '#Consumer offset', '#Lag', 'Last consumed'],
      d.queues.map((x) => [link(`/topic?${q({ t: x.topic })}`, x.topic), x.brokerName, String(x.queueId), String(x.brokerOffset), String(x.consumerOffset),
        td(`lag${x.diff > 0 ? ' lag-positive' : ''}`, String(x.diff), true), fmtTime(x.lastTimestamp)]),
      (i) => ({ id: slug('lag', d.queues[i].topic, d.queues[i].brokerName, d.queues[i].queueId) })),
    h('h2', {}, 'Clients'),
    conns.length
      ? table(['Client id', 'Address', 'Language', '#Version'], conns.map((c) => [c.clientId, c.clientAddr, String(c.language), String(c.version)]))
      : h('p', { class: 'note' }, `No client online${d.connectionError ? ` (${d.connectionError})` : ''}.`),
    h('p', {}, link(`/dlq?${q({ g })}`, 'Dead letters of this group')));
}

// ---- live ----

/** A line chart of series {name, cls, points: [[t, v|null]]} with a y axis in `unit`. */
function lineChart(id, title, series, format) {
  const W = 1100, H = 250, R = 16, T = 30, B = 34;
  const all = series.flatMap((x) => x.points.filter((p) => p[1] !== null && p[1] !== undefined));
  const ts = series.flatMap((x) => x.points.map((p) => p[0]));
  const t0 = Math.min(...ts), t1 = Math.max(...ts);
  let ymax = Math.max(1, ...all.map((p) => p[1]));
  const mag = Math.pow(10, Math.floor(Math.log10(ymax)));
  ymax = Math.ceil(ymax / mag * 1.1) * mag;
  // The y axis is as wide as its widest label (about 7.5 px a character at this size),
  // so a spike's "12345.00 ms" is not cut to "345.00 ms".
  const widest = Math.max(...[0, 1, 2, 3, 4].map((i) => format(ymax * i / 4).length));
  const L = Math.max(70, Math.ceil(14 + widest * 7.5));
  const x = (t) => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);
  const parts = [s('text', { x: L, y: 18, class: 'title' }, title)];
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    parts.push(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    parts.push(s('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, format(v)));
  }
  parts.push(s('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis' }));
  parts.push(s('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis' }));
  if (ts.length) {
    const clock = (t) => new Date(t).toISOString().slice(11, 19);
    parts.push(s('text', { x: L, y: H - 12 }, clock(t0)));
    parts.push(s('text', { x: W - R, y: H - 12, 'text-anchor': 'end' }, `${clock(t1)} UTC`));
  }
  let lx = W - R - 10;
  for (const se of series.slice().reverse()) {
    // A gap (no value) splits the line rather than dropping to zero.
    let run = [];
    const flush = () => { if (run.length) parts.push(s('polyline', { class: se.cls, points: run.join(' ') })); run = []; };
    for (const [t, v] of se.points) {
      if (v === null || v === undefined) flush(); else run.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    }
    flush();
    const last = se.points.length ? se.points[se.points.length - 1][1] : null;
    const label = `${se.name}: ${last === null || last === undefined ? '-' : format(last)}`;
    parts.push(s('text', { x: lx, y: 18, 'text-anchor': 'end', class: `legend-${se.cls.slice(2)}` }, label));
    lx -= 16 + label.length * 7;
  }
  return h('div', { class: 'chart', id, 'data-points': String(ts.length ? series[0].points.length : 0) },
    s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title }, parts));
}

function liveView(d) {
  const pts = d.points;
  const last = pts.length ? pts[pts.length - 1] : null;
  const out = [];
  if (d.error) out.push(h('div', { class: 'error' }, `Sampling failed: ${d.error}`));
  out.push(h('div', { class: 'kpis' },
    kpi('in msg/s', last ? fmtRate(last.inRate) : '-', 'live-in'),
    kpi('out msg/s', last ? fmtRate(last.outRate) : '-', 'live-out'),
    kpi('send p99', last ? fmtUs(last.p99Us) : '-', 'live-p99'),
    kpi('points', String(pts.length), 'live-points')));
  out.push(lineChart('chart-throughput', 'Throughput (messages/s, all brokers)', [
    { name: 'in', cls: 's-in', points: pts.map((p) => [p.t, p.inRate]) },
    { name: 'out', cls: 's-out', points: pts.map((p) => [p.t, p.outRate]) }], fmtRate));
  out.push(lineChart('chart-latency', 'Send latency (broker: request arrival to answer)', [
    { name: 'p50', cls: 's-p50', points: pts.map((p) => [p.t, p.p50Us]) },
    { name: 'p99', cls: 's-p99', points: pts.map((p) => [p.t, p.p99Us]) },
    { name: 'mean', cls: 's-mean', points: pts.map((p) => [p.t, p.meanUs]) }], fmtUs));
  out.push(h('h2', {}, 'Brokers (their own averages: 10 s, 1 min, 10 min)'));
  out.push(table(['Broker', 'Address', 'In msg/s', 'Out msg/s', 'Status'],
    d.brokers.map((b) => [b.brokerName, b.addr, b.putTps, b.getTps, b.error ? h('span', { class: 'badge bad' }, b.error) : h('span', { class: 'ok' }, 'answering')])));
  out.push(h('p', { class: 'note' }, `Sampled every ${d.intervalMs} ms from GET_BROKER_RUNTIME_INFO; the last ${pts.length} intervals.`));
  return out;
}

async function livePage() {
  setTitle('Live');
  const tick = async () => {
    try {
      const d = await api('/api/stats');
      clearError();
      show(liveView(d));
      ready();
    } catch (e) {
      showError(e);
    }
  };
  await tick();
  setInterval(tick, 1000);
}

// ---- messages ----

function messageRows(list, topic) {
  return table(['Message id (offset)', 'Topic', '#Queue', '#Offset', 'Tags', 'Keys', 'Stored', 'Body'],
    list.map((m) => [link(`/message?${q({ id: m.offsetMsgId, t: topic || m.topic })}`, h('span', { class: 'mono' }, m.offsetMsgId)), m.topic,
      String(m.queueId), String(m.queueOffset), m.tags, m.keys, fmtTime(m.storeTimestamp), td('body', m.body + (m.bodyTruncated ? ' …' : ''))]),
    (i) => ({ id: slug('msg', list[i].offsetMsgId) }));
}

function searchForms() {
  const t = param('t');
  const toMs = (v) => (v ? new Date(v).getTime() : NaN);
  const local = (ms) => { const d = new Date(Number(ms) - new Date().getTimezoneOffset() * 60000); return d.toISOString().slice(0, 19); };
  const now = Date.now();
  const begin = param('begin') || String(now - 3600 * 1000);
  const end = param('end') || String(now);
  return h('div', { class: 'panel' },
    h('form', { class: 'search', action: '/messages', method: 'get' },
      h('strong', {}, 'By key'),
      h('label', {}, 'Topic', h('input', { name: 't', value: t, required: true })),
      h('label', {}, 'Key', h('input', { name: 'key', value: param('key'), required: true })),
      h('button', { type: 'submit' }, 'Search')),
    h('form', { class: 'search', action: '/message', method: 'get' },
      h('strong', {}, 'By id'),
      h('label', {}, 'Message id (offset id, or producer id with a topic)', h('input', { name: 'id', value: param('id'), required: true, size: 40 })),
      h('label', {}, 'Topic (optional)', h('input', { name: 't', value: t })),
      h('button', { type: 'submit' }, 'Show')),
    h('form', {
      class: 'search', onsubmit: (e) => {
        e.preventDefault();
        const f = e.target;
        const b = toMs(f.elements.b.value), en = toMs(f.elements.e.value);
        if (Number.isNaN(b) || Number.isNaN(en)) { showError(new Error('give a begin and an end time')); return; }
        location.href = `/messages?${q({ t: f.elements.t.value, begin: b, end: en })}`;
      },
    },
    h('strong', {}, 'By time'),
    h('label', {}, 'Topic', h('input', { name: 't', value: t, required: true })),
    h('label', {}, 'From (local time)', h('input', { name: 'b', type: 'datetime-local', step: '1', value: local(begin) })),
    h('label', {}, 'To', h('input', { name: 'e', type: 'datetime-local', step: '1', value: local(end) })),
    h('button', { type: 'submit' }, 'Search')));
}

async function messagesPage() {
  setTitle('Messages');
  const t = param('t');
  const forms = searchForms();
  show(forms);
  if (t && param('key')) {
    const d = await api(`/api/message/by-key?${q({ t, key: param('key') })}`);
    show(forms, h('h2', {}, `Key ${d.key} in ${d.topic}: ${d.messages.length} found`), d.messages.length ? messageRows(d.messages, t) : h('p', { class: 'note' }, 'No message has this key.'));
  } else if (t && param('begin') && param('end')) {
    const d = await api(`/api/message/by-time?${q({ t, begin: param('begin'), end: param('end') })}`);
    show(forms, h('h2', {}, `${d.topic} from ${fmtTime(d.begin)} to ${fmtTime(d.end)}: ${d.messages.length} found${d.truncated ? ' (first ones only)' : ''}`),
      d.messages.length ? messageRows(d.messages, t) : h('p', { class: 'note' }, 'No message stored in that time.'));
  }
}

async function messagePage() {
  const id = param('id');
  setTitle(`Message ${id}`);
  if (!id) throw new Error('no message id given');
  const d = await api(`/api/message/by-id?${q({ id, t: param('t') })}`);
  const m = d.message;
  const fields = [['Offset message id', m.offsetMsgId], ['Message id (UNIQ_KEY)', m.msgId], ['Topic', link(`/topic?${q({ t: m.topic })}`, m.topic)],
    ['Tags', m.tags], ['Keys', m.keys], ['Queue', String(m.queueId)], ['Queue offset', String(m.queueOffset)], ['CommitLog offset', String(m.commitLogOffset)],
    ['Reconsume times', String(m.reconsumeTimes)], ['Born', `${fmtTime(m.bornTimestamp)} at ${m.bornHost}`], ['Stored', `${fmtTime(m.storeTimestamp)} at ${m.storeHost}`],
    ['System flag', String(m.sysFlag)], ['Body size', `${m.bodyBytes} bytes${m.bodyTruncated ? ' (preview below is cut)' : ''}`]];
  if (m.bodyCompression) {
    fields.push(['Body compression', m.bodyError ? `${m.bodyCompression}, ${m.storedBodyBytes} bytes stored; shown as stored: ${m.bodyError}`
      : `${m.bodyCompression}, ${m.storedBodyBytes} bytes stored`]);
  }
  show(
    h('dl', { class: 'fields', id: 'message-fields' }, fields.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
    h('h2', {}, 'Properties'),
    table(['Name', 'Value'], m.properties.map((p) => [p.name, p.value]), (i) => ({ id: slug('prop', m.properties[i].name) })),
    h('h2', {}, 'Body'),
    h('pre', { id: 'body' }, m.body));
}

// ---- dead letters ----

async function resend(id, cell, button) {
  button.disabled = true;
  cell.textContent = 'sending…';
  try {
    const r = await api(`/api/dlq/resend?${q({ id })}`, { method: 'POST' });
    cell.replaceChildren(h('span', { class: 'ok' }, `resent to ${r.topic} as `), link(`/message?${q({ id: r.offsetMsgId, t: r.topic })}`, r.msgId));
  } catch (e) {
    cell.replaceChildren(h('span', { class: 'badge bad' }, e.message));
    button.disabled = false;
  }
}

async function dlqPage() {
  const g = param('g');
  if (!g) {
    setTitle('Dead-letter queues');
    const d = await api('/api/dlq');
    show(d.dlq.length
      ? table(['Group', 'Topic', '#Dead letters'], d.dlq.map((x) => [link(`/dlq?${q({ g: x.group })}`, x.group), x.topic, x.error ? h('span', { class: 'badge bad' }, x.error) : String(x.messages)]),
        (i) => ({ id: slug('dlq', d.dlq[i].group) }))
      : h('p', { class: 'note' }, 'No group has dead letters.'));
    return;
  }
  setTitle(`Dead letters of ${g}`);
  const d = await api(`/api/dlq?${q({ g })}`);
  show(
    h('p', { class: 'note' }, `${d.total} dead letters in ${d.topic}; the newest ${d.messages.length} below. Resend sends a copy to the topic the message came from (its RETRY_TOPIC).`),
    table(['Message id (offset)', 'Original topic', 'Keys', 'Tags', '#Reconsumed', 'Stored', 'Body', 'Resend'],
      d.messages.map((m) => {
        const status = h('span', { class: 'resend-status' });
        const button = h('button', { type: 'button', 'data-id': m.offsetMsgId }, 'Resend');
        button.addEventListener('click', () => resend(m.offsetMsgId, status, button));
        return [link(`/message?${q({ id: m.offsetMsgId })}`, h('span', { class: 'mono' }, m.offsetMsgId)), td('origin', m.originTopic || '-'), m.keys, m.tags,
          String(m.reconsumeTimes), fmtTime(m.storeTimestamp), td('body', m.body), h('td', {}, m.originTopic ? button : '-', ' ', status)];
      }),
      (i) => ({ id: slug('dlq', d.messages[i].offsetMsgId) })));
}

const PAGES = {
  '/': clusterPage, '/cluster': clusterPage, '/topics': topicsPage, '/topic': topicPage, '/groups': groupsPage, '/group': groupPage,
  '/live': livePage, '/messages': messagesPage, '/message': messagePage, '/dlq': dlqPage,
};

async function main() {
  const path = location.pathname;
  const page = PAGES[path];
  const section = { '/': 'cluster', '/topic': 'topics', '/group': 'groups', '/message': 'messages' }[path] || path.slice(1);
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === section);
  if (!page) {
    setTitle('Not found');
    showError(new Error(`no page at ${path}`));
    return;
  }
  try {
    await page();
    ready();
  } catch (e) {
    showError(e);
  }
}

main();
