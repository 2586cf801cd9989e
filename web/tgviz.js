/* tgviz's page. The data (one or two drawings, laid out by Graphviz's dot
 * in tgviz) is inlined in #tgviz-data; nothing is fetched. A drawing is
 * {nodes, edges, width, height}; a node has id, kind, label, fill, shape,
 * x, y (centre), w, h and, for apply nodes, op, family, attrs, inputs,
 * outputs, trace, origins, time_s, share and body (a drawing of its nested
 * graph). What the page shows is derived from the data and the user's
 * state (drags, expanded bodies, collapsed families, renamed labels) by
 * visible(), and drawn by draw(); tests drive it through window.tgviz. */
(function () {
  'use strict';
  const t0 = performance.now();
  const PAD = 14, HEAD = 20;
  const $ = (s) => document.querySelector(s);
  let data = null;
  let panes = [];          // {name, drawing, svg, root, zoom, vis}
  let mode = 'optimized';  // 'optimized' | 'original' | 'side'
  let collapsed = new Set();
  let opened = new Set();   // groups the user expanded again (by id)
  let profileOn = false, maxShare = 0;
  let selected = null;     // the data node pinned in the panel
  let searchHits = [], searchAt = -1;

  /* ---- derived drawing ---- */
  function pos(n) { return [n.x + (n._dx || 0), n.y + (n._dy || 0)]; }

  // Connected components of apply nodes of one collapsed family.
  function groups(d) {
    const parent = new Map();
    const find = (a) => { while (parent.get(a) !== a) { parent.set(a, parent.get(parent.get(a))); a = parent.get(a); } return a; };
    const byId = new Map(d.nodes.map((n) => [n.id, n]));
    for (const n of d.nodes) if (n.kind === 'apply' && collapsed.has(n.family)) parent.set(n.id, n.id);
    for (const e of d.edges) {
      if (!parent.has(e.source) || !parent.has(e.target)) continue;
      if (byId.get(e.source).family !== byId.get(e.target).family) continue;
      const a = find(e.source), b = find(e.target);
      if (a !== b) parent.set(a, b);
    }
    const comp = new Map();
    for (const id of parent.keys()) { const r = find(id); if (!comp.has(r)) comp.set(r, []); comp.get(r).push(byId.get(id)); }
    const of = new Map();
    for (const members of comp.values()) {
      if (members.length < 2) continue;
      const gid = 'g:' + members[0].id;
      if (opened.has(gid)) continue;
      for (const m of members) of.set(m.id, gid);
      of.set(gid, members);
    }
    return of;
  }

  function visible(d) {
    const of = groups(d);
    const vnodes = [], byId = new Map();
    for (const n of d.nodes) {
      if (of.has(n.id)) continue;
      const [x, y] = pos(n);
      const v = { id: n.id, src: n, x, y, w: n.w, h: n.h, bx: n.x, by: n.y };
      if (n._expanded && n.body && n.body.nodes && n.body.nodes.length) {
        v.body = visible(n.body);
        v.w = Math.max(n.w, v.body.width + 2 * PAD);
        v.h = Math.max(n.h, v.body.height + 2 * PAD + HEAD);
      }
      vnodes.push(v); byId.set(v.id, v);
    }
    for (const [gid, members] of of) {
      if (!Array.isArray(members)) continue;
      let sx = 0, sy = 0, w = 0, h = 0, t = 0, s = 0, prof = false;
      for (const m of members) {
        const [x, y] = pos(m); sx += x; sy += y; w = Math.max(w, m.w); h = Math.max(h, m.h);
        if (m.share !== undefined) { prof = true; t += m.time_s; s += m.share; }
      }
      const fam = members[0].family;
      const g = { id: gid, kind: 'group', family: fam, members, fill: members[0].fill, shape: 'box',
        label: fam + ' \u00d7 ' + members.length + '\ncollapsed (double-click)', w: Math.max(w, 110), h: Math.max(h, 30) };
      if (prof) { g.time_s = t; g.share = s; }
      const v = { id: gid, src: g, x: sx / members.length, y: sy / members.length, w: g.w, h: g.h, bx: sx / members.length, by: sy / members.length };
      vnodes.push(v); byId.set(gid, v);
    }
    // Make room for expanded bodies: push what lies below down, and what
    // lies beside on the same rank sideways (Graphviz placed the rest).
    for (const e of vnodes) {
      if (!e.body) continue;
      const src = e.src, dh = e.h - src.h, dw = (e.w - src.w) / 2;
      for (const o of vnodes) {
        if (o === e) continue;
        if (o.by > e.by + src.h / 2) o.y += dh;
        else if (Math.abs(o.by - e.by) <= src.h / 2) o.x += o.bx > e.bx ? dw : -dw;
      }
      e.y += dh / 2;
    }
    const vedges = [], seen = new Set();
    for (const e of d.edges) {
      const s = of.has(e.source) ? of.get(e.source) : e.source;
      const t = of.has(e.target) ? of.get(e.target) : e.target;
      if (s === t || !byId.has(s) || !byId.has(t)) continue;
      const k = s + '\u0000' + t + '\u0000' + e.var;
      if ((s !== e.source || t !== e.target) && seen.has(k)) continue;
      seen.add(k);
      vedges.push({ e, s: byId.get(s), t: byId.get(t) });
    }
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const v of vnodes) {
      x0 = Math.min(x0, v.x - v.w / 2); x1 = Math.max(x1, v.x + v.w / 2);
      y0 = Math.min(y0, v.y - v.h / 2); y1 = Math.max(y1, v.y + v.h / 2);
    }
    if (!vnodes.length) x0 = y0 = x1 = y1 = 0;
    return { nodes: vnodes, edges: vedges, byId, x0, y0, width: x1 - x0, height: y1 - y0 };
  }

  /* ---- drawing ---- */
  const shade = (s) => d3.interpolateRgb('#ffffff', '#7f0000')(maxShare > 0 ? Math.min(1, s / maxShare) : 0);
  function fillOf(n) {
    if (profileOn && (n.kind === 'apply' || n.kind === 'group')) return shade(n.share || 0);
    return n.fill || '#f1f5f9';
  }
  function isHot(n) { return profileOn && maxShare > 0 && (n.share || 0) / maxShare > 0.55; }

  function shapePath(sel, v) {
    const n = v.src, w = v.w, h = v.h;
    sel.selectAll('.shape').remove();
    let s;
    if (n.shape === 'ellipse') s = sel.insert('ellipse', ':first-child').attr('rx', w / 2).attr('ry', h / 2);
    else if (n.shape === 'cylinder') {
      const e = Math.min(6, h / 4);
      s = sel.insert('path', ':first-child').attr('d',
        `M${-w / 2},${-h / 2 + e} A${w / 2},${e} 0 0 0 ${w / 2},${-h / 2 + e} A${w / 2},${e} 0 0 0 ${-w / 2},${-h / 2 + e}` +
        ` V${h / 2 - e} A${w / 2},${e} 0 0 0 ${w / 2},${h / 2 - e} V${-h / 2 + e}`);
    } else if (n.shape === 'invhouse')
      s = sel.insert('polygon', ':first-child').attr('points',
        `${-w / 2},${-h / 2} ${w / 2},${-h / 2} ${w / 2},${h / 6} 0,${h / 2} ${-w / 2},${h / 6}`);
    else s = sel.insert('rect', ':first-child').attr('x', -w / 2).attr('y', -h / 2).attr('width', w).attr('height', h)
      .attr('rx', n.kind === 'apply' || n.kind === 'group' ? 6 : 2);
    s.attr('class', 'shape').attr('fill', fillOf(n));
  }

  function edgePath(ve) {
    const s = ve.s, t = ve.t;
    const sx = s.x, sy = s.y + s.h / 2, tx = t.x, ty = t.y - t.h / 2 - 2;
    const my = (sy + ty) / 2;
    ve.mx = (sx + tx) / 2; ve.my = my;
    if (ty > sy) return `M${sx},${sy} C${sx},${my} ${tx},${my} ${tx},${ty}`;
    // Upward (an update back to its shared variable): loop around the side.
    const side = Math.max(s.w, t.w) / 2 + 30;
    return `M${sx},${sy} C${sx + side},${sy + 60} ${tx + side},${ty - 60} ${tx},${ty}`;
  }

  function nodeLabel(n) { return n._label !== undefined ? n._label : n.label || n.id; }

  function drawGraph(g, vis, pane) {
    const eg = g.append('g').attr('class', 'edges');
    const byNode = new Map();
    const paths = eg.selectAll('path').data(vis.edges).join('path')
      .attr('class', (ve) => 'edge' + (ve.e.mode ? ' ' + ve.e.mode : ''))
      .attr('marker-end', (ve) => `url(#arrow-${ve.e.mode || 'plain'})`)
      .attr('d', edgePath);
    paths.append('title').text((ve) => `${ve.e.var}: ${ve.e.label}${ve.e.mode ? ' (' + ve.e.mode + ')' : ''}`);
    const labels = eg.selectAll('text').data(vis.edges).join('text').attr('class', 'elabel')
      .attr('text-anchor', 'middle').attr('x', (ve) => ve.mx + 3).attr('y', (ve) => ve.my).text((ve) => ve.e.label);
    const labelEls = labels.nodes();
    paths.each(function (ve, i) {
      ve.path = this; ve.text = labelEls[i];
      for (const v of [ve.s, ve.t]) { if (!byNode.has(v.id)) byNode.set(v.id, []); byNode.get(v.id).push(ve); }
    });
    const ng = g.append('g').attr('class', 'nodes');
    const nodes = ng.selectAll('g.node').data(vis.nodes.filter((v) => !v.body)).join('g')
      .attr('class', (v) => `node kind-${v.src.kind}` + (v.src.kind === 'group' ? ' group' : '') + (isHot(v.src) ? ' hot' : ''))
      .attr('data-id', (v) => v.id).attr('data-view', pane.name)
      .attr('transform', (v) => `translate(${v.x},${v.y})`);
    nodes.each(function (v) {
      v.el = this;
      const sel = d3.select(this);
      shapePath(sel, v);
      const lines = nodeLabel(v.src).split('\n');
      const dy = lines.length > 1 ? -2 : 3.5;
      sel.append('text').attr('class', 'l1').attr('text-anchor', 'middle').attr('y', dy).text(lines[0]);
      if (lines.length > 1) sel.append('text').attr('class', 'l2').attr('text-anchor', 'middle').attr('y', dy + 11).text(lines.slice(1).join(' '));
    });
    // Expanded bodies: a frame with the body drawn inside.
    for (const v of vis.nodes.filter((v) => v.body)) {
      const c = ng.append('g').attr('class', 'container').attr('data-id', v.id).attr('data-view', pane.name)
        .attr('transform', `translate(${v.x - v.w / 2},${v.y - v.h / 2})`);
      v.el = c.node();
      c.append('rect').attr('class', 'frame').attr('width', v.w).attr('height', v.h).attr('rx', 8);
      c.append('text').attr('class', 'head').attr('x', 8).attr('y', 14)
        .text(`\u25be ${v.src.op || ''} ${v.src.key || v.id}`).append('title').text('double-click the frame to collapse');
      const inner = c.append('g').attr('transform', `translate(${PAD - v.body.x0 + (v.w - 2 * PAD - v.body.width) / 2},${PAD + HEAD - v.body.y0})`);
      drawGraph(inner, v.body, pane);
      c.on('dblclick', (ev) => { if (ev.target.closest('g.node')) return; ev.stopPropagation(); v.src._expanded = false; redraw(); })
        .on('mouseenter', () => show(v.src, pane)).on('click', (ev) => { if (!ev.target.closest('g.node')) { ev.stopPropagation(); pin(v.src, pane); } });
    }
    nodes.on('mouseenter', (ev, v) => { show(v.src, pane); light(v, byNode, true); linkOrigins(v.src, pane, true); })
      .on('mouseleave', (ev, v) => { light(v, byNode, false); linkOrigins(v.src, pane, false); if (selected) show(selected.n, selected.pane); })
      .on('click', (ev, v) => { ev.stopPropagation(); pin(v.src, pane); })
      .on('dblclick', (ev, v) => {
        ev.stopPropagation();
        const n = v.src;
        if (n.kind === 'group') { opened.add(v.id); redraw(); }
        else if (n.body && n.body.nodes && n.body.nodes.length) { n._expanded = true; redraw(); }
        else rename(n, v.el);
      })
      .call(d3.drag().clickDistance(4)
        .on('drag', function (ev, v) {
          v.x += ev.dx; v.y += ev.dy;
          const members = v.src.kind === 'group' ? v.src.members : [v.src];
          for (const m of members) { m._dx = (m._dx || 0) + ev.dx; m._dy = (m._dy || 0) + ev.dy; }
          d3.select(this).attr('transform', `translate(${v.x},${v.y})`);
          for (const ve of byNode.get(v.id) || []) {
            ve.path.setAttribute('d', edgePath(ve));
            ve.text.setAttribute('x', ve.mx + 3); ve.text.setAttribute('y', ve.my);
          }
        }));
  }

  function light(v, byNode, on) {
    for (const ve of byNode.get(v.id) || []) ve.path.classList.toggle('lit', on);
  }

  // Before and after: the original nodes an optimized node stands for,
  // and the optimized nodes an original one went into.
  function linkOrigins(n, pane, on) {
    if (n.kind !== 'apply') return;
    for (const p of panes) {
      if (p === pane) continue;
      p.svg.selectAll('g.node').classed('origin', function () {
        if (!on) return false;
        const o = d3.select(this).datum().src;
        if (o.kind !== 'apply') return false;
        if (pane.name === 'optimized') return (n.origins || [n.key]).includes(o.key);
        return (o.origins || [o.key]).includes(n.key);
      });
    }
  }

  function redraw() {
    for (const p of panes) {
      const t = d3.zoomTransform(p.svg.node());
      p.root.selectAll('*').remove();
      p.vis = visible(p.drawing);
      drawGraph(p.root, p.vis, p);
      p.svg.call(p.zoom.transform, t);
    }
    applySearch();
  }

  /* ---- panes, zoom, fit ---- */
  function makePane(name, drawing) {
    const div = d3.select('#main').append('div').attr('class', 'pane').attr('data-view', name);
    if (mode === 'side') div.append('div').attr('class', 'pname').text(name);
    const svg = div.append('svg').attr('data-view', name);
    const defs = svg.append('defs');
    for (const [k, c] of [['plain', '#94a3b8'], ['view', '#2563eb'], ['destroy', '#dc2626']])
      defs.append('marker').attr('id', 'arrow-' + k).attr('viewBox', '0 0 10 10').attr('refX', 9).attr('refY', 5)
        .attr('markerUnits', 'userSpaceOnUse').attr('markerWidth', 9).attr('markerHeight', 9).attr('orient', 'auto')
        .append('path').attr('d', 'M0,0 L10,5 L0,10 z').attr('fill', c);
    const root = svg.append('g').attr('class', 'viewport');
    const p = { name, drawing, svg, root };
    p.zoom = d3.zoom().scaleExtent([0.02, 6]).on('zoom', (ev) => {
      root.attr('transform', ev.transform);
      svg.classed('far', ev.transform.k < 0.6).classed('veryfar', ev.transform.k < 0.22);
    });
    svg.call(p.zoom).on('dblclick.zoom', null).on('click', () => { selected = null; panelHint(); });
    return p;
  }

  function fit(p) {
    const box = p.svg.node().getBoundingClientRect(), vis = p.vis;
    const W = Math.max(box.width, 50), H = Math.max(box.height, 50);
    const k = Math.min(1.4, 0.92 * Math.min(W / Math.max(vis.width, 1), H / Math.max(vis.height, 1)));
    const x = (W - vis.width * k) / 2 - vis.x0 * k, y = Math.max(30, (H - vis.height * k) / 2) - vis.y0 * k;
    p.svg.call(p.zoom.transform, d3.zoomIdentity.translate(x, y).scale(k));
  }

  function build() {
    d3.select('#main').selectAll('*').remove();
    panes = [];
    const v = data.views || {};
    const names = mode === 'side' ? ['original', 'optimized'].filter((n) => v[n]) : [mode];
    for (const n of names) panes.push(makePane(n, v[n]));
    for (const p of panes) { p.vis = visible(p.drawing); drawGraph(p.root, p.vis, p); fit(p); }
    d3.selectAll('#views button').classed('on', function () { return this.dataset.mode === mode; });
    legend();
    applySearch();
  }

  /* ---- panel ---- */
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
  function typeStr(t) {
    if (!t) return '';
    const sh = (t.shape || []).map((d) => (d === null ? '?' : d));
    return `${t.dtype || '?'} (${sh.join(', ')}${sh.length === 1 ? ',' : ''})`;
  }
  function attrsText(a) {
    return JSON.stringify(a, (k, v) => (k === 'body' && v && typeof v === 'object'
      ? `{body: ${(v.nodes || []).length} nodes; double-click the node to expand it}` : v), 2);
  }
  function panelHint() {
    $('#panel').innerHTML = '<div class="hint">Hover or click a node for its details.<br>Double-click a node with a body to expand it; double-click another node (or press F2) to rename it.<br>Drag to move, scroll to zoom.</div>';
  }
  function pin(n, pane) {
    selected = { n, pane };
    d3.selectAll('g.node').classed('sel', function () { return d3.select(this).datum().src === n; });
    show(n, pane);
  }
  function show(n, pane) {
    let h = `<h2>${esc(n.op || n.kind)}</h2><div class="sub">${esc(nodeLabel(n).replace('\n', ' \u00b7 '))}</div>`;
    const rows = [['kind', n.kind + (n.family ? ' \u00b7 ' + n.family : '')], ['key', n.key], ['name', n.name],
      ['in file', n.location], ['view', pane && pane.name]];
    if (n.view_of !== undefined) rows.push(['output 0 views', 'input ' + n.view_of]);
    if (n.inplace && Object.keys(n.inplace).length) rows.push(['destroys', Object.entries(n.inplace).map(([o, i]) => `output ${o} overwrites input ${i}`).join('; ')]);
    if (n.update_of) rows.push(['updates', n.update_of]);
    if (n.value !== undefined) rows.push(['value', n.value]);
    if (n.dtype) rows.push(['type', typeStr(n)]);
    h += '<table>' + rows.filter((r) => r[1] !== undefined && r[1] !== null).map((r) => `<tr><td class="k">${r[0]}</td><td>${esc(r[1])}</td></tr>`).join('') + '</table>';
    if (n.share !== undefined) {
      h += `<h3>Profile</h3><table><tr><td class="k">time</td><td class="prof-time">${(n.time_s * 1e3).toFixed(3)} ms</td></tr>` +
        `<tr><td class="k">share</td><td class="prof-share">${(n.share * 100).toFixed(1)} %</td></tr></table>` +
        `<div class="bar-share"><div style="width:${Math.min(100, n.share * 100)}%"></div></div>` +
        (n.profile_via ? `<div class="hint prof-via">time of the optimized node${n.profile_via.length > 1 ? 's' : ''} ${esc(n.profile_via.join(', '))} that ${n.profile_via.length > 1 ? 'stand' : 'stands'} for it</div>` : '');
    }
    if (n.members) h += '<h3>Collapsed nodes</h3>' + n.members.map((m) => `<span class="chip">${esc(m.op)} ${esc(m.key)}</span>`).join('');
    const io = (name, list) => (list && list.length ? `<h3>${name}</h3><table>` + list.map((v, i) =>
      `<tr><td class="k">${i}: ${esc(v.id !== undefined ? v.id : 'inline')}</td><td>${v.dtype ? esc(typeStr(v)) : esc(JSON.stringify(v.value))}</td></tr>`).join('') + '</table>' : '');
    h += io('Inputs', n.inputs) + io('Outputs', n.outputs);
    if (n.attrs && Object.keys(n.attrs).length) h += `<h3>Attributes</h3><pre>${esc(attrsText(n.attrs))}</pre>`;
    if (n.origins) h += '<h3>Stands for (original nodes)</h3>' + n.origins.map((k) => `<span class="chip" data-key="${esc(k)}">${esc(k)}</span>`).join('');
    h += '<h3>Creation trace</h3>';
    if (n.trace && n.trace.length) {
      h += '<div class="trace">' + n.trace.map((f) => `<div class="frame"><div class="loc">${esc(f.file || '?')}:${esc(f.line !== undefined ? f.line : '?')}` +
        `${f.function ? ' in ' + esc(f.function) : ''}</div>${f.code ? `<pre>${esc(f.code)}</pre>` : ''}</div>`).join('') + '</div>';
    } else h += '<div class="hint">none recorded in the file</div>';
    h += '<button id="rename">Rename label (F2)</button>';
    const panel = $('#panel');
    panel.innerHTML = h;
    panel.querySelector('#rename').onclick = () => {
      const el = document.querySelector(`g.node[data-id="${CSS.escape(n.id)}"]`);
      if (el) rename(n, el);
    };
    for (const c of panel.querySelectorAll('.chip[data-key]')) c.onclick = () => { $('#search').value = c.dataset.key; if (mode !== 'side' && data.views.original) setMode('original'); applySearch(true); };
  }

  /* ---- renaming in place ---- */
  function rename(n, el) {
    const r = el.getBoundingClientRect();
    const inp = document.createElement('input');
    inp.className = 'rename';
    inp.value = nodeLabel(n).replace('\n', ' | ');
    inp.style.left = r.left + 'px'; inp.style.top = (r.top + r.height / 2 - 12) + 'px';
    inp.style.width = Math.max(140, r.width) + 'px';
    document.body.appendChild(inp);
    inp.focus(); inp.select();
    let done = false;
    const finish = (ok) => {
      if (done) return; done = true;
      if (ok) n._label = inp.value.split(' | ').join('\n');
      inp.remove();
      if (ok) redraw();
    };
    inp.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') finish(true); if (ev.key === 'Escape') finish(false); ev.stopPropagation(); });
    inp.addEventListener('blur', () => finish(true));
  }

  /* ---- search ---- */
  function applySearch(jump) {
    const q = $('#search').value.trim().toLowerCase();
    searchHits = [];
    for (const p of panes) {
      p.svg.classed('searching', !!q);
      p.svg.selectAll('g.node').classed('match', function () {
        if (!q) return false;
        const n = d3.select(this).datum().src;
        const hay = [n.id, n.key, n.name, n.op, n.var, nodeLabel(n)].filter(Boolean).join('\n').toLowerCase();
        const hit = hay.includes(q);
        if (hit) searchHits.push({ p, v: d3.select(this).datum() });
        return hit;
      });
    }
    $('#matches').textContent = q ? `${searchHits.length} match${searchHits.length === 1 ? '' : 'es'}` : '';
    if (jump && searchHits.length) next();
  }
  function next() {
    if (!searchHits.length) return;
    searchAt = (searchAt + 1) % searchHits.length;
    const { p, v } = searchHits[searchAt];
    const box = p.svg.node().getBoundingClientRect();
    const k = Math.max(d3.zoomTransform(p.svg.node()).k, 0.9);
    const m = d3.select(v.el).attr('transform').match(/translate\(([-\d.e]+),([-\d.e]+)\)/);
    let x = v.x, y = v.y;
    // A node inside an expanded body: its screen position gives its place.
    if (v.el.ownerSVGElement) {
      const ctm = v.el.getCTM(), root = p.root.node().getCTM();
      if (ctm && root) { const inv = root.inverse().multiply(ctm); x = inv.e; y = inv.f; }
    } else if (m) { x = +m[1]; y = +m[2]; }
    p.svg.transition().duration(350).call(p.zoom.transform, d3.zoomIdentity.translate(box.width / 2 - x * k, box.height / 2 - y * k).scale(k));
    pin(v.src, p);
  }

  /* ---- legend ---- */
  function legend() {
    const fams = new Map(), kinds = new Map();
    const walk = (d) => { for (const n of d.nodes) { if (n.kind === 'apply') fams.set(n.family, n.fill); else kinds.set(n.kind, n.fill); if (n.body) walk(n.body); } };
    for (const p of panes) walk(p.drawing);
    let h = '<span class="title">Nodes</span>';
    const order = ['input', 'constant', 'shared', 'output'];
    for (const k of order) if (kinds.has(k)) h += `<span class="it"><span class="sw" style="background:${kinds.get(k)}${k === 'constant' ? ';border-style:dashed' : ''};border-radius:${k === 'input' ? '6px' : '3px'}"></span>${k}</span>`;
    for (const [f, c] of [...fams].sort()) h += `<span class="it"><span class="sw" style="background:${profileOn ? '#fff' : c}"></span>${f}</span>`;
    h += '<span class="title">Edges (dtype, shape)</span><span class="it"><span class="ln" style="border-color:#94a3b8"></span>value</span>' +
      '<span class="it"><span class="ln" style="border-color:#2563eb"></span>view of the input</span>' +
      '<span class="it"><span class="ln" style="border-color:#dc2626"></span>input destroyed (in place)</span>';
    if (profileOn) h += `<span class="title">Share of the time</span><span class="it">0 %<span class="grad"></span>${(maxShare * 100).toFixed(1)} %</span>`;
    const lg = $('#legend');
    lg.innerHTML = h;
    // A click on the legend folds it away to its first title, and back.
    lg.onclick = () => lg.classList.toggle('folded');
  }

  /* ---- controls ---- */
  function setMode(m) { mode = m; selected = null; build(); }
  function syncCollapse() {
    for (const o of $('#collapse').options) if (o.value) o.textContent = (collapsed.has(o.value) ? '\u2713 ' : '') + o.value;
  }
  function allBodies(d, on) { for (const n of d.nodes) if (n.body) { n._expanded = on; allBodies(n.body, on); } }
  function resetAll(d) { for (const n of d.nodes) { delete n._dx; delete n._dy; n._expanded = false; if (n.body) resetAll(n.body); } }

  function load(d) {
    data = d;
    const v = data.views || {};
    mode = data.side_by_side && v.original && v.optimized ? 'side' : (v[data.start] ? data.start : Object.keys(v)[0]);
    collapsed = new Set(); opened = new Set(); selected = null;
    $('#title').textContent = `${data.file || ''} \u00b7 ${data.function || ''}`;
    document.title = `tgviz \u00b7 ${data.file || ''} \u00b7 ${data.function || ''}`;
    const seg = d3.select('#views').html('');
    const modes = ['optimized', 'original'].filter((n) => v[n]);
    if (modes.length === 2) modes.push('side');
    for (const m of modes) seg.append('button').attr('data-mode', m).text(m === 'side' ? 'side by side' : m).on('click', () => setMode(m));
    // The original graph shows the time of the optimized nodes that stand
    // for it (a profile names the nodes of the compiled function).
    if (v.original && v.optimized) {
      const via = new Map();
      for (const o of v.optimized.nodes)
        if (o.kind === 'apply' && o.share !== undefined)
          for (const k of o.origins || [o.key]) { if (!via.has(k)) via.set(k, []); via.get(k).push(o); }
      for (const n of v.original.nodes) {
        if (n.kind !== 'apply' || n.share !== undefined || !via.has(n.key)) continue;
        const os = via.get(n.key);
        n.share = os.reduce((a, o) => a + o.share, 0);
        n.time_s = os.reduce((a, o) => a + o.time_s, 0);
        n.profile_via = os.map((o) => o.key);
      }
    }
    maxShare = 0;
    const fams = new Set();
    const walk = (dr) => { for (const n of dr.nodes) { if (n.share !== undefined) maxShare = Math.max(maxShare, n.share); if (n.kind === 'apply') fams.add(n.family); if (n.body) walk(n.body); } };
    for (const k of Object.keys(v)) walk(v[k]);
    profileOn = maxShare > 0 || !!data.profile;
    $('#profwrap').style.display = data.profile ? 'inline-flex' : 'none';
    $('#prof').checked = profileOn;
    const sel = d3.select('#collapse');
    sel.selectAll('option.f').remove();
    for (const f of [...fams].sort()) sel.append('option').attr('class', 'f').attr('value', f).text(f);
    panelHint();
    build();
  }

  $('#search').addEventListener('input', () => { searchAt = -1; applySearch(false); });
  $('#search').addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { if (searchAt < 0) applySearch(true); else next(); } });
  $('#collapse').addEventListener('change', (ev) => {
    const f = ev.target.value; ev.target.value = '';
    if (!f) return;
    if (collapsed.has(f)) collapsed.delete(f); else collapsed.add(f);
    opened.clear(); syncCollapse(); redraw();
  });
  $('#bodies').addEventListener('click', () => {
    const on = $('#bodies').textContent.startsWith('Expand');
    for (const p of panes) allBodies(p.drawing, on);
    $('#bodies').textContent = on ? 'Collapse bodies' : 'Expand bodies';
    redraw();
  });
  $('#prof').addEventListener('change', (ev) => { profileOn = ev.target.checked; redraw(); legend(); });
  $('#fit').addEventListener('click', () => panes.forEach(fit));
  $('#reset').addEventListener('click', () => {
    for (const p of panes) resetAll(p.drawing);
    collapsed.clear(); opened.clear(); syncCollapse();
    $('#bodies').textContent = 'Expand bodies';
    redraw(); panes.forEach(fit);
  });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'F2' && selected) {
      const el = document.querySelector(`g.node[data-id="${CSS.escape(selected.n.id)}"]`);
      if (el) { ev.preventDefault(); rename(selected.n, el); }
    }
    if (ev.key === '/' && document.activeElement !== $('#search')) { ev.preventDefault(); $('#search').focus(); }
  });
  window.addEventListener('resize', () => panes.forEach(fit));

  // The test and scripting surface.
  window.tgviz = {
    load, setMode, redraw,
    get data() { return data; },
    get panes() { return panes; },
    expand(id, on = true) {
      const find = (d) => { for (const n of d.nodes) { if (n.id === id) return n; if (n.body) { const r = find(n.body); if (r) return r; } } return null; };
      for (const p of panes) { const n = find(p.drawing); if (n) { n._expanded = on; redraw(); return true; } }
      return false;
    },
    collapseFamily(f, on = true) { if (on) collapsed.add(f); else collapsed.delete(f); opened.clear(); syncCollapse(); redraw(); },
  };

  const raw = document.getElementById('tgviz-data').textContent;
  if (raw && raw.trim().charAt(0) === '{') load(JSON.parse(raw));
  // Ready after the first frame has been painted.
  requestAnimationFrame(() => requestAnimationFrame(() => {
    window.tgvizRenderMs = performance.now() - t0;
    window.tgvizReadyMs = performance.now();
    window.tgvizReady = true;
  }));
})();
