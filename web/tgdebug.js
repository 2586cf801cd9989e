// tgdebug serve's page: polls /api/state, shows where the run is paused and
// the monitored values (a slice of one at a time, with a histogram drawn
// by d3), the breakpoints, the profile and the outputs; Continue, Step and
// Stop POST to /api/continue, /api/step, /api/stop. The token travels in
// the cookie (named after the port) that the server set when the page was
// opened with ?token=.
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  let last = null;       // the last state
  let viewing = null;    // {kind: 'out'|'in', index, name, shape}
  let viewedPause = -1;  // the pause the viewer's value belongs to

  const fmt = (v) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(6).replace(/\.?0+($|e)/, '$1')) : String(v));
  const shape = (s) => '(' + s.join(', ') + (s.length === 1 ? ',)' : ')');

  // The server writes int64 values exactly; past 2^53 a JavaScript number
  // cannot hold them (9007199254740993 would show as ...992): such an
  // integer stays the text it was written as, where the browser gives the
  // reviver its source (JSON.parse source text access).
  const exact = (k, v, ctx) =>
    (typeof v === 'number' && !Number.isSafeInteger(v) && Number.isInteger(v) && ctx && /^-?\d+$/.test(ctx.source) ? ctx.source : v);
  const parse = (text) => JSON.parse(text, exact);
  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ credentials: 'same-origin', cache: 'no-store' }, opts || {}));
    let body = null;
    try { body = parse(await r.text()); } catch (e) { body = { error: 'not JSON (' + r.status + ')' }; }
    return { status: r.status, body };
  }

  function fillRows(tbody, rows, cells, onclick) {
    const tr = d3.select(tbody).selectAll('tr').data(rows).join('tr');
    tr.selectAll('td').data(cells).join('td').text((d) => d);
    if (onclick) tr.on('click', (ev, d) => onclick(d, ev.currentTarget));
    return tr;
  }

  function render(st) {
    last = st;
    $('title').textContent = st.file + ' — ' + st.function;
    const badge = $('state');
    badge.textContent = st.state + (st.stopped ? ' (stopped)' : '');
    badge.className = 'badge ' + st.state;
    const paused = st.state === 'paused';
    $('btn-continue').disabled = !paused;
    $('btn-step').disabled = !paused;
    $('btn-stop').disabled = !(paused || st.state === 'running');
    $('call').textContent = st.call + ' of ' + st.calls + (st.calls_done ? ' (' + st.calls_done + ' done)' : '');
    const err = $('error');
    err.hidden = !st.error;
    err.textContent = st.error || '';
    if (st.node) {
      $('node').textContent = st.node.key + ' (' + st.node.op + '), ' + st.when + ' it ran';
      $('reason').textContent = st.reason;
      const gr = st.node.gradients || {};
      $('origins').textContent = st.node.origins.map((k) => (gr[k] ? k + ' (' + gr[k] + ')' : k)).join(', ');
      $('trace').textContent = st.node.trace || '—';
    } else {
      for (const id of ['node', 'reason', 'origins', 'trace']) $(id).textContent = '—';
    }
    const vals = st.values || [];
    fillRows($('values').tBodies[0], vals, (v) => [v.name, v.id, v.dtype, shape(v.shape), fmt(v.min), fmt(v.max), fmt(v.mean), v.nan, v.inf],
      (v, row) => { view(v, true); showValue(); })
      .classed('sel', (v) => viewing && v.kind === viewing.kind && v.index === viewing.index)
      .attr('data-name', (v) => v.name);
    if (!paused) { $('viewer').hidden = true; viewedPause = -1; }
    else if (viewing && viewedPause !== st.pauses) {
      const v = vals.find((x) => x.kind === viewing.kind && x.index === viewing.index) || vals[0];
      // The typed slice is kept while it still names the same kind of
      // value (same name and shape); another value gets its default.
      if (v) { view(v, v.name !== viewing.name || shape(v.shape) !== viewing.shape); showValue(); }
    } else if (!viewing && vals.length) {
      view(vals[0], true);
      showValue();
    }
    fillRows($('breakpoints').tBodies[0], st.breakpoints, (b) => [b.node, b.when || '', b.scheduled.join(', ') + (b.note ? ' — ' + b.note : ''), b.hits]);
    fillRows($('outputs').tBodies[0], st.outputs, (o) => [o.id, o.size, fmt(o.min), fmt(o.max), fmt(o.mean), o.nan, o.inf]);
  }

  function defaultSlice(s) { return s.map((n) => (n > 10 ? '0:10' : ':')).join(','); }

  function view(v, resetSlice) {
    viewing = { kind: v.kind, index: v.index, name: v.name, shape: shape(v.shape) };
    if (resetSlice) $('slice').value = defaultSlice(v.shape);
  }

  // Requests for values can overlap (a new pause re-fetches the viewed
  // value while a click asks for another); only the last one asked for
  // is drawn, whatever order the answers come back in.
  let valueSeq = 0;
  async function showValue() {
    if (!last || !last.node || !viewing) return;
    const seq = ++valueSeq;
    viewedPause = last.pauses;
    const q = new URLSearchParams({ node: last.node.key, [viewing.kind]: String(viewing.index), slice: $('slice').value.trim() });
    $('value-npy').href = '/api/value.npy?' + new URLSearchParams({ node: last.node.key, [viewing.kind]: String(viewing.index) }).toString();
    const { status, body } = await api('/api/value?' + q.toString());
    if (seq !== valueSeq) return;
    $('viewer').hidden = false;
    $('viewing').textContent = viewing.name + ' of ' + last.node.key;
    const e = $('value-error');
    e.hidden = status === 200;
    e.textContent = status === 200 ? '' : body.error;
    const holder = d3.select('#value-data');
    holder.selectAll('*').remove();
    if (status !== 200) return;
    const data = body.data;
    // 0-d: one cell; 1-d: one row; 2-d: a grid; more: rows of the flattened last axes.
    let rows;
    if (!Array.isArray(data)) rows = [[data]];
    else if (!data.length || !Array.isArray(data[0])) rows = [data];
    else rows = data.map((r) => (Array.isArray(r) ? r.flat(Infinity) : [r]));
    const table = holder.append('table');
    const tr = table.selectAll('tr').data(rows).join('tr');
    tr.selectAll('td').data((r, i) => r.map((v, j) => ({ v, i, j }))).join('td')
      .attr('data-i', (d) => d.i).attr('data-j', (d) => d.j).text((d) => fmt(d.v));
    drawHist(rows.flat().map((v) => (typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v)).filter((v) => typeof v === 'number'));
  }

  function drawHist(xs) {
    const svg = d3.select('#hist');
    svg.selectAll('*').remove();
    if (!xs.length) return;
    const W = +svg.attr('width'), H = +svg.attr('height');
    // One value (all zeros, a 0-d array): a domain around it, so that its
    // bin has a width to draw.
    let [lo, hi] = d3.extent(xs);
    if (!(hi > lo)) { const d = Math.abs(lo) > 1 ? Math.abs(lo) * 0.05 : 0.5; lo -= d; hi += d; }
    const x = d3.scaleLinear().domain([lo, hi]).nice().range([30, W - 10]);
    // A threshold at the domain's end would make an empty last bin that hides the maximum.
    const bins = d3.bin().domain(x.domain()).thresholds(x.ticks(20).filter((t) => t < x.domain()[1]))(xs);
    const y = d3.scaleLinear().domain([0, d3.max(bins, (b) => b.length)]).range([H - 18, 4]);
    svg.append('g').selectAll('rect').data(bins).join('rect').attr('class', 'bar')
      .attr('x', (b) => x(b.x0) + 0.5).attr('width', (b) => Math.max(0, x(b.x1) - x(b.x0) - 1))
      .attr('y', (b) => y(b.length)).attr('height', (b) => y(0) - y(b.length));
    svg.append('g').attr('transform', 'translate(0,' + (H - 18) + ')').call(d3.axisBottom(x).ticks(6));
  }

  async function drawProfile() {
    const { status, body } = await api('/api/profile');
    if (status !== 200) return;
    const f = body.functions[0];
    $('prof-sum').textContent = fmt(f.time_in_nodes_s) + ' s in nodes over ' + f.calls + ' call(s)';
    const nodes = f.nodes.slice().sort((a, b) => b.time_s - a.time_s).slice(0, 12);
    const svg = d3.select('#prof-bars');
    const H = nodes.length * 18 + 4;
    svg.attr('height', H);
    const x = d3.scaleLinear().domain([0, d3.max(nodes, (n) => n.time_s) || 1]).range([0, 300]);
    const g = svg.selectAll('g.row').data(nodes, (n) => n.key).join((en) => {
      const r = en.append('g').attr('class', 'row');
      r.append('text').attr('x', 0).attr('y', 12);
      r.append('rect').attr('class', 'bar').attr('x', 170).attr('y', 3).attr('height', 12);
      r.append('text').attr('class', 'v').attr('y', 12);
      return r;
    });
    g.attr('transform', (n, i) => 'translate(0,' + i * 18 + ')');
    g.select('text').text((n) => n.key + ' (' + n.op + ')');
    g.select('rect').attr('width', (n) => Math.max(1, x(n.time_s)))
      .classed('hot', (n) => last && last.node && n.key === last.node.key);
    g.select('text.v').attr('x', (n) => 176 + x(n.time_s)).text((n) => (n.time_s * 1e3).toFixed(3) + ' ms');
  }

  async function control(what) {
    const { status, body } = await api('/api/' + what, { method: 'POST' });
    if (status !== 200) { $('error').hidden = false; $('error').textContent = body.error; }
    await poll();
  }

  let polling = false;
  async function poll() {
    if (polling) return;
    polling = true;
    try {
      const { status, body } = await api('/api/state');
      if (status === 200) render(body);
      else { $('error').hidden = false; $('error').textContent = body.error || ('HTTP ' + status); }
      window.tgdebugReady = true;
    } catch (e) {
      $('state').textContent = 'server gone';
      $('state').className = 'badge error';
    } finally { polling = false; }
  }

  $('btn-continue').addEventListener('click', () => control('continue'));
  $('btn-step').addEventListener('click', () => control('step'));
  $('btn-stop').addEventListener('click', () => control('stop'));
  $('btn-slice').addEventListener('click', showValue);
  $('slice').addEventListener('keydown', (e) => { if (e.key === 'Enter') showValue(); });
  document.addEventListener('keydown', (e) => {
    // (Ctrl+C copies a value: only the bare keys continue and step)
    if (e.target.tagName === 'INPUT' || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === 'c' && last && last.state === 'paused') control('continue');
    if (e.key === 's' && last && last.state === 'paused') control('step');
  });
  window.tgdebug = { poll, parse, drawHist, get state() { return last; } };
  poll();
  setInterval(poll, 300);
  drawProfile();
  setInterval(drawProfile, 2000);
})();
