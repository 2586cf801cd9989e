/* tgviz's page. The data (one or two drawings, laid out by Graphviz's dot
 * in tgviz) is inlined in #tgviz-data; nothing is fetched. A drawing is
 * {nodes, edges, width, height}; a node has id, kind, label, fill, shape,
 * x, y (centre), w, h and, for apply nodes, op, family, attrs, inputs,
 * outputs, trace, origins, time_s, share, body (a drawing of its nested
 * graph) and, for a fused node, fused (what each body node stands for). What the page shows is derived from the data and the user's
 * state (drags, expanded bodies, collapsed families, renamed labels) by
 * visible(); update() draws the part of it that is in view, as SVG
 * elements or, zoomed far out, as a picture on a canvas (see "what is in
 * view" below); tests drive it through window.tgviz. */
(function () {
  'use strict';
  const t0 = performance.now();
  const PAD = 14, HEAD = 20;
  const $ = (s) => document.querySelector(s);
  let data = null;
  let panes = [];          // {name, drawing, svg, root, zoom, vis, ...}: see makePane
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
    if (!collapsed.size) return parent;
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
      if (of.size && of.has(n.id)) continue;
      const v = { id: n.id, src: n, x: n.x + (n._dx || 0), y: n.y + (n._dy || 0), w: n.w, h: n.h, bx: n.x, by: n.y };
      if (n._expanded && n.body && n.body.nodes && n.body.nodes.length) {
        v.body = visible(n.body);
        for (const b of v.body.nodes) b.parent = v;
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
    // Edges, and on each node the edges that meet it (v.adj, absent when
    // none). Edges into or out of a group are kept once per variable; only
    // those can repeat.
    const vedges = [], seen = new Set();
    for (const e of d.edges) {
      const s = of.has(e.source) ? of.get(e.source) : e.source;
      const t = of.has(e.target) ? of.get(e.target) : e.target;
      if (s === t || !byId.has(s) || !byId.has(t)) continue;
      if (s !== e.source || t !== e.target) {
        const k = s + '\u0000' + t + '\u0000' + e.var;
        if (seen.has(k)) continue;
        seen.add(k);
      }
      const ve = { e, s: byId.get(s), t: byId.get(t) };
      vedges.push(ve);
      if (ve.s.adj) ve.s.adj.push(ve); else ve.s.adj = [ve];
      if (ve.t.adj) ve.t.adj.push(ve); else ve.t.adj = [ve];
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

  // An edge's cubic Bezier, from the bottom of its source to the top of its
  // target, into q: [sx, sy, c1x, c1y, c2x, c2y, tx, ty] (q is reused by
  // callers that go through many edges).
  function edgeCurve(ve, q) {
    const s = ve.s, t = ve.t;
    const sx = s.x, sy = s.y + s.h / 2, tx = t.x, ty = t.y - t.h / 2 - 2;
    q[0] = sx; q[1] = sy; q[6] = tx; q[7] = ty;
    if (ty > sy) { q[2] = sx; q[3] = q[5] = (sy + ty) / 2; q[4] = tx; return q; }
    // Upward (an update back to its shared variable): loop around the side.
    const side = Math.max(s.w, t.w) / 2 + 30;
    q[2] = sx + side; q[3] = sy + 60; q[4] = tx + side; q[5] = ty - 60;
    return q;
  }
  const curve = new Float64Array(8);

  function edgePath(ve) {
    const c = edgeCurve(ve, curve);
    ve.mx = (c[0] + c[6]) / 2; ve.my = (c[1] + c[7]) / 2;
    return `M${c[0]},${c[1]} C${c[2]},${c[3]} ${c[4]},${c[5]} ${c[6]},${c[7]}`;
  }

  function nodeLabel(n) { return n._label !== undefined ? n._label : n.label || n.id; }

  /* ---- what is in view ----
   * A drawing of 100,000 nodes cannot be 100,000 SVG groups: the browser
   * takes minutes to build them and hundreds of MB to hold them. So a
   * pane's top level is drawn by update(), after every zoom or pan (at
   * most once a frame), and only the nodes and edges whose boxes meet the
   * region around the view (the view and half a screen on each side, so
   * that a pan shows what was already there) have elements; a spatial
   * index (grid*, below) finds them without looking at the rest.
   * Level of detail: when more than LOD_NODES nodes or LOD_EDGES edges lie
   * in that region, the labels cannot be read anyway, so the pane removes
   * its SVG elements and paints the nodes as plain rectangles and the
   * edges as lines on a <canvas> under the SVG (paint()). A canvas needs
   * no DOM and its picture is made again in tens of ms even for 100,000
   * nodes and 150,000 edges, so the overview of any size stays fast; the
   * price is no hover or click while zoomed out, which come back with the
   * SVG when zooming in. Search still marks its matches. The pane goes back to
   * SVG only below LOD_BACK of the limits, so that zooming or panning at
   * the boundary does not flip between the two every frame. Expanded
   * bodies, at any depth, go the same way: layout() lists every level's
   * nodes and edges in one index, each with the offset of its level in
   * the pane (v.ox, v.oy: a body's coordinates are its own), so a body of
   * 5,000 nodes costs what 5,000 nodes at the top level cost. A body
   * node's element still lies in its frame's element (addFrame makes the
   * frame's layers; sync() keeps the frames of what it draws), so that
   * the frame stays under its body. */
  const LOD_NODES = 3000, LOD_EDGES = 6000, LOD_BACK = 0.7, FRESH_MAX = 200;

  /* A uniform grid over the boxes of items (a drawing's nodes or edges),
   * in compressed rows: cell c holds items[at[start[c]]] to
   * items[at[start[c + 1] - 1]]. An item is in every cell its box meets,
   * except those spanning more than GRID_BIG cells (long edges), which go
   * into one list (big) that every query scans. boxOf(item, box, o) writes
   * the item's [x0, y0, x1, y1] to box[o..o+3]. Items that moved after the
   * grid was built (a dragged node and its edges) are listed in moved and
   * tested with their live boxes. */
  const GRID_BIG = 64;
  function gridNew(items, boxOf) {
    const n = items.length, box = new Float64Array(4 * n);
    let X0 = Infinity, Y0 = Infinity, X1 = -Infinity, Y1 = -Infinity;
    for (let i = 0; i < n; i++) {
      items[i]._gi = i;
      boxOf(items[i], box, 4 * i);
      // Comparisons, not Math.min: an item without a place (NaN) is left
      // out of the extent, and then out of every cell.
      if (box[4 * i] < X0) X0 = box[4 * i];
      if (box[4 * i + 1] < Y0) Y0 = box[4 * i + 1];
      if (box[4 * i + 2] > X1) X1 = box[4 * i + 2];
      if (box[4 * i + 3] > Y1) Y1 = box[4 * i + 3];
    }
    if (!(X0 <= X1)) X0 = Y0 = X1 = Y1 = 0;
    // Square cells, about two items to a cell.
    const s = Math.max(1, Math.sqrt(Math.max(X1 - X0, 1) * Math.max(Y1 - Y0, 1) / Math.max(1, n / 2)));
    const cols = Math.floor((X1 - X0) / s) + 1, rows = Math.floor((Y1 - Y0) / s) + 1;
    const g = { items, boxOf, box, X0, Y0, X1, Y1, s, cols, rows, start: new Int32Array(cols * rows + 1), at: null,
      big: [], moved: [], isMoved: new Uint8Array(n), stamp: new Uint32Array(n), q: 0 };
    const isBig = new Uint8Array(n);
    let fill = null;
    // Two passes: count the entries of each cell, then place them.
    for (let pass = 0; pass < 2; pass++) {
      for (let i = 0; i < n; i++) {
        if (isBig[i]) continue;
        const c0 = gridCol(g, box[4 * i]), r0 = gridRow(g, box[4 * i + 1]);
        const c1 = gridCol(g, box[4 * i + 2]), r1 = gridRow(g, box[4 * i + 3]);
        if ((c1 - c0 + 1) * (r1 - r0 + 1) > GRID_BIG) { isBig[i] = 1; g.big.push(i); continue; }
        for (let r = r0; r <= r1; r++)
          for (let c = c0; c <= c1; c++) {
            if (pass === 0) g.start[r * cols + c + 1]++;
            else g.at[fill[r * cols + c]++] = i;
          }
      }
      if (pass === 0) {
        for (let c = 0; c < cols * rows; c++) g.start[c + 1] += g.start[c];
        g.at = new Int32Array(g.start[cols * rows]);
        fill = g.start.slice(0, cols * rows);
      }
    }
    return g;
  }
  function gridCol(g, x) { return Math.min(g.cols - 1, Math.max(0, Math.floor((x - g.X0) / g.s))); }
  function gridRow(g, y) { return Math.min(g.rows - 1, Math.max(0, Math.floor((y - g.Y0) / g.s))); }

  // The items whose boxes meet [x0, x1] x [y0, y1], once each: a new array,
  // or the grid's own list of items when that is all of them.
  function gridQuery(g, x0, y0, x1, y1) {
    const out = [];
    const { items, box, start, at, stamp, isMoved, cols } = g;
    const q = ++g.q;
    const meets = (i) => box[4 * i] <= x1 && box[4 * i + 2] >= x0 && box[4 * i + 1] <= y1 && box[4 * i + 3] >= y0;
    // Zoomed out over all of it: no cells to look at.
    if (x0 <= g.X0 && y0 <= g.Y0 && x1 >= g.X1 && y1 >= g.Y1) {
      if (!g.moved.length) return items;
      for (let i = 0; i < items.length; i++) if (!isMoved[i] || (g.boxOf(items[i], box, 4 * i), meets(i))) out.push(items[i]);
      return out;
    }
    const c0 = gridCol(g, x0), c1 = gridCol(g, x1), r1 = gridRow(g, y1);
    for (let r = gridRow(g, y0); r <= r1; r++)
      for (let c = c0; c <= c1; c++)
        for (let j = start[r * cols + c], e = start[r * cols + c + 1]; j < e; j++) {
          const i = at[j];
          if (stamp[i] === q) continue;
          stamp[i] = q;
          if (!isMoved[i] && meets(i)) out.push(items[i]);
        }
    for (const i of g.big) if (!isMoved[i] && meets(i)) out.push(items[i]);
    for (const i of g.moved) { g.boxOf(items[i], box, 4 * i); if (meets(i)) out.push(items[i]); }
    return out;
  }
  function gridMove(g, item) {
    if (!g.isMoved[item._gi]) { g.isMoved[item._gi] = 1; g.moved.push(item._gi); }
  }

  // Boxes in the pane's coordinates: a node's (x, y) is in its level's.
  function nodeBox(v, b, o) {
    const x = v.x + v.ox, y = v.y + v.oy;
    b[o] = x - v.w / 2; b[o + 1] = y - v.h / 2; b[o + 2] = x + v.w / 2; b[o + 3] = y + v.h / 2;
  }
  // A Bezier curve lies in the hull of its control points.
  function edgeBox(ve, b, o) {
    const c = edgeCurve(ve, curve), ox = ve.s.ox, oy = ve.s.oy;
    b[o] = ox + Math.min(c[0], c[2], c[4], c[6]); b[o + 1] = oy + Math.min(c[1], c[3], c[5], c[7]);
    b[o + 2] = ox + Math.max(c[0], c[2], c[4], c[6]); b[o + 3] = oy + Math.max(c[1], c[3], c[5], c[7]);
  }

  // A pane's derived drawing, its index and empty layers; update() fills
  // them. The index holds the nodes and edges of every level: the top
  // level's and those of the expanded bodies in it, at any depth, each
  // node with its level's offset in the pane (ox, oy) and depth.
  function layout(p) {
    p.vis = visible(p.drawing);
    const nodes = [], edges = [];
    p.byId = new Map(); p.depth = 0;
    const walk = (vis, ox, oy, depth) => {
      if (depth > p.depth) p.depth = depth;
      for (const v of vis.nodes) { v.ox = ox; v.oy = oy; v.depth = depth; nodes.push(v); p.byId.set(v.id, v); }
      for (const ve of vis.edges) { ve.depth = depth; edges.push(ve); }
      for (const v of vis.nodes) {
        if (!v.body) continue;
        const [bx, by] = bodyOffset(v);
        walk(v.body, ox + v.x - v.w / 2 + bx, oy + v.y - v.h / 2 + by, depth + 1);
      }
    };
    walk(p.vis, 0, 0, 0);
    p.nodeGrid = gridNew(nodes, nodeBox);
    p.edgeGrid = gridNew(edges, edgeBox);
    p.root.selectAll('*').remove();
    const eg = p.root.append('g').attr('class', 'edges');
    // paths under their labels; an expanded node's frame holds its body's
    p.layers = { edge: eg.append('g'), label: eg.append('g'), node: p.root.append('g').attr('class', 'nodes') };
    p.shown = new Set(); p.shownEdges = new Set();
    p.lod = false; p.dirty = true;
  }

  function schedule(p) {
    if (!p.raf) p.raf = requestAnimationFrame(() => { p.raf = 0; if (panes.includes(p)) update(p); });
  }

  // Draws what lies in the region around pane p's view (see above).
  function update(p) {
    const t = d3.zoomTransform(p.svg.node());
    if (!p.dirty && p.drawn && p.drawn.k === t.k && p.drawn.x === t.x && p.drawn.y === t.y) return;
    const t1 = performance.now();
    p.dirty = false; p.drawn = t;
    const mx = p.W / 2 / t.k, my = p.H / 2 / t.k;
    const x0 = -t.x / t.k - mx, y0 = -t.y / t.k - my, x1 = (p.W - t.x) / t.k + mx, y1 = (p.H - t.y) / t.k + my;
    let ns = gridQuery(p.nodeGrid, x0, y0, x1, y1), es = gridQuery(p.edgeGrid, x0, y0, x1, y1);
    const f = p.lod ? LOD_BACK : 1;
    p.lod = ns.length > LOD_NODES * f || es.length > LOD_EDGES * f;
    if (p.lod) { sync(p, [], []); paint(p, ns, es, t); } else {
      paint(p, null);
      // A jump (a search, a zoom into the overview) brings hundreds of new
      // nodes at once: then this frame makes those on the screen, and the
      // next one those in the margin.
      let fresh = 0;
      for (const v of ns) if (!v.el) fresh++;
      p.screenOnly = fresh > FRESH_MAX && !p.screenOnly;
      if (p.screenOnly) {
        const sx0 = -t.x / t.k, sy0 = -t.y / t.k, sx1 = sx0 + p.W / t.k, sy1 = sy0 + p.H / t.k;
        // the boxes the query just tested (in the pane's coordinates)
        const on = (b, i) => b[4 * i + 2] >= sx0 && b[4 * i] <= sx1 && b[4 * i + 3] >= sy0 && b[4 * i + 1] <= sy1;
        const nb = p.nodeGrid.box, eb = p.edgeGrid.box;
        ns = ns.filter((v) => v.el || on(nb, v._gi));
        es = es.filter((ve) => ve.path || on(eb, ve._gi));
        p.dirty = true; schedule(p);
      }
      sync(p, ns, es);
      for (const v of p.shown) if (v.body) clipFrame(v, x0, y0, x1, y1);
    }
    // Drawn as SVG: the elements there are (body nodes and the frames
    // that hold them included); on the canvas: what it painted.
    p.stats = { mode: p.lod ? 'canvas' : 'svg', nodes: p.lod ? ns.length : p.shown.size,
      edges: p.lod ? es.length : p.shownEdges.size, ms: performance.now() - t1 };
  }

  // Gives the nodes ns and edges es elements, and takes them from the
  // rest. A body node's or edge's element lies in its frame's, so the
  // frames (and theirs, up to the top) of what is drawn are drawn too,
  // first: a node dragged out of its frame can be in view without it.
  function sync(p, ns, es) {
    const gen = p.gen = (p.gen || 0) + 1;
    // Marks v and the frames that hold it (a marked node's are marked).
    const keep = (v) => { for (; v && v._gen !== gen; v = v.parent) v._gen = gen; };
    for (const v of ns) keep(v);
    for (const ve of es) { ve._gen = gen; keep(ve.s.parent); }
    // A frame's elements go with it: what it holds is unmarked too.
    for (const v of p.shown) if (v._gen !== gen) { unlinkNode(v); p.shown.delete(v); }
    for (const ve of p.shownEdges) if (ve._gen !== gen) { unlinkEdge(ve); p.shownEdges.delete(ve); }
    const need = (v) => {
      if (!v || v.el) return;
      need(v.parent);
      addNode(p, v); p.shown.add(v);
    };
    for (const ve of es) if (!ve.path) { need(ve.s.parent); addEdge(ve.s.parent ? ve.s.parent.layers : p.layers, ve); p.shownEdges.add(ve); }
    for (const v of ns) need(v);
  }
  /* A frame's outline is dashed, and the browser dashes all of it at every
   * frame it paints, in view or not: the frame of a body of 5,000 nodes
   * is 300,000 points tall, and dashing it took 0.6-1 s per wheel step.
   * So its rectangle is cut to the region drawn, [x0, x1] x [y0, y1] in
   * the pane's coordinates (its cut sides lie in the margin, out of the
   * screen), by multiples of the dashes' period, so that the dashes of
   * the sides in view stay where they were. */
  const FRAME_DASH = 8;  // tgviz.css: g.container > rect.frame, 5 + 3
  function clipFrame(v, x0, y0, x1, y1) {
    const fx = v.x + v.ox - v.w / 2, fy = v.y + v.oy - v.h / 2;
    const cut = (d) => Math.max(0, Math.floor(d / FRAME_DASH) * FRAME_DASH);
    const a = cut(x0 - fx), b = cut(y0 - fy), c = cut(fx + v.w - x1), d = cut(fy + v.h - y1);
    const key = a + ' ' + b + ' ' + c + ' ' + d;
    if (v.clip === key) return;
    v.clip = key;
    v.rect.setAttribute('x', a); v.rect.setAttribute('y', b);
    v.rect.setAttribute('width', Math.max(0, v.w - a - c)); v.rect.setAttribute('height', Math.max(0, v.h - b - d));
  }
  function unlinkNode(v) { if (v.el) { v.el.remove(); v.el = null; v.layers = null; v.clip = undefined; } }
  function unlinkEdge(ve) { if (ve.path) { ve.path.remove(); ve.text.remove(); ve.path = ve.text = null; } }

  /* The overview, painted pixel by pixel into one ImageData: the edges as
   * lines (a curve as a few straight pieces), the nodes over them as
   * rectangles of their fill, at least a pixel and outlined from 5 pixels
   * up; then, with the canvas API, rings around search matches and the
   * pinned node. Why by hand: in Chrome's software rasteriser every
   * fillRect or path segment costs a microsecond or two, over 0.3 s for
   * 100,000 nodes and 150,000 edges, while pixels written into an array
   * cost what the pixels cost: a few ms for a screen. While searching,
   * what does not match is faded. With expanded bodies, level by level
   * (its edges, then its nodes: a frame under its body). ns === null
   * clears the canvas. */
  const EDGE_COLOURS = { plain: '#94a3b8', view: '#2563eb', destroy: '#dc2626' };
  const rgbaOf = new Map();
  // A colour as the 32-bit little-endian RGBA of an ImageData pixel; faded:
  // a quarter of it over the page's background (#f8fafc).
  function rgba(col, fade) {
    const key = fade ? col + ' faded' : col;
    let u = rgbaOf.get(key);
    if (u === undefined) {
      const c = d3.rgb(col), f = fade ? 0.25 : 1;
      const r = Math.round(f * c.r + (1 - f) * 248), g = Math.round(f * c.g + (1 - f) * 250), b = Math.round(f * c.b + (1 - f) * 252);
      u = ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
      rgbaOf.set(key, u);
    }
    return u;
  }
  // The pixels of the line (x0, y0)-(x1, y1), clipped to the image
  // (Liang-Barsky), so that a long edge costs only its part in view.
  function pixLine(img, x0, y0, x1, y1, u) {
    const w = img.width, dx = x1 - x0, dy = y1 - y0;
    // The line is inside where p * t <= q for each side.
    let a = 0, b = 1;
    const clip = (p, q) => {
      if (p === 0) return q >= 0;
      const r = q / p;
      if (p < 0) { if (r > b) return false; if (r > a) a = r; } else { if (r < a) return false; if (r < b) b = r; }
      return true;
    };
    if (!clip(-dx, x0) || !clip(dx, w - 1 - x0) || !clip(-dy, y0) || !clip(dy, img.height - 1 - y0)) return;
    const n = Math.ceil(Math.max(Math.abs(dx), Math.abs(dy)) * (b - a));
    const sx = x0 + a * dx, sy = y0 + a * dy, ix = n ? (b - a) * dx / n : 0, iy = n ? (b - a) * dy / n : 0;
    for (let i = 0; i <= n; i++) img.px[Math.round(sy + i * iy) * w + Math.round(sx + i * ix)] = u;
  }
  // The pixels of [x0, x1) x [y0, y1), at least one, clipped to the image.
  function pixRect(img, x0, y0, x1, y1, u) {
    const w = img.width;
    let xa = Math.round(x0), ya = Math.round(y0);
    let xb = Math.max(xa + 1, Math.round(x1)), yb = Math.max(ya + 1, Math.round(y1));
    xa = Math.max(0, xa); ya = Math.max(0, ya); xb = Math.min(w, xb); yb = Math.min(img.height, yb);
    if (xa >= xb) return;
    const px = img.px;
    for (let y = ya; y < yb; y++) {
      if (xb - xa > 16) px.fill(u, y * w + xa, y * w + xb);
      else for (let i = y * w + xa, e = y * w + xb; i < e; i++) px[i] = u;  // a call costs more than a few pixels
    }
  }

  function paint(p, ns, es, t) {
    const c = p.canvas, dpr = window.devicePixelRatio || 1;
    if (!ns && !p.painted) return;
    const cw = Math.max(1, Math.round(p.W * dpr)), ch = Math.max(1, Math.round(p.H * dpr));
    if (c.width !== cw || c.height !== ch) { c.width = cw; c.height = ch; p.image = null; }
    const ctx = c.getContext('2d');
    p.painted = !!ns;
    if (!ns) { ctx.clearRect(0, 0, cw, ch); return; }
    if (!p.image) {
      const data = ctx.createImageData(cw, ch);
      p.image = { data, px: new Uint32Array(data.data.buffer), width: cw, height: ch };
    }
    const img = p.image;
    img.px.fill(0);
    // Screen pixels: X(x), Y(y).
    const k = t.k * dpr, X = (x) => t.x * dpr + x * k, Y = (y) => t.y * dpr + y * k;
    const searching = !!$('#search').value.trim();
    const border = rgba('#475569', searching), marked = [];
    // The items of each depth, in order; one list when nothing is expanded.
    const byDepth = (items) => {
      if (!p.depth) return [items];
      const out = [];
      for (let d = 0; d <= p.depth; d++) out.push([]);
      for (const it of items) out[it.depth].push(it);
      return out;
    };
    const esd = byDepth(es), nsd = byDepth(ns);
    for (let d = 0; d < nsd.length; d++) { paintEdges(esd[d]); paintNodes(nsd[d]); }
    function paintEdges(es) {
      for (const ve of es) {
        const q = edgeCurve(ve, curve), u = rgba(EDGE_COLOURS[ve.e.mode] || EDGE_COLOURS.plain, searching);
        const ox = ve.s.ox, oy = ve.s.oy;
        for (let i = 0; i < 8; i += 2) { q[i] = X(q[i] + ox); q[i + 1] = Y(q[i + 1] + oy); }
        // Pieces of about 6 pixels of the control polygon, 1 to 16 of them.
        let len = 0;
        for (let i = 2; i < 8; i += 2) len += Math.abs(q[i] - q[i - 2]) + Math.abs(q[i + 1] - q[i - 1]);
        const n = Math.max(1, Math.min(16, Math.ceil(len / 6)));
        let px = q[0], py = q[1];
        for (let i = 1; i <= n; i++) {
          const s = i / n, r = 1 - s, a = r * r * r, b = 3 * r * r * s, d = 3 * r * s * s, e = s * s * s;
          const x = a * q[0] + b * q[2] + d * q[4] + e * q[6], y = a * q[1] + b * q[3] + d * q[5] + e * q[7];
          pixLine(img, px, py, x, y, u);
          px = x; py = y;
        }
      }
    }
    function paintNodes(ns) {
      for (const v of ns) {
        const pinned = selected && selected.n === v.src;
        if (v.match || pinned) marked.push(v);
        const u = rgba(v.body ? '#f1f5f9' : v.colour || (v.colour = fillOf(v.src)), searching && !v.match);
        const cx = v.x + v.ox, cy = v.y + v.oy;
        const x0 = X(cx - v.w / 2), y0 = Y(cy - v.h / 2), x1 = X(cx + v.w / 2), y1 = Y(cy + v.h / 2);
        if (x1 - x0 >= 5 && y1 - y0 >= 5) {
          pixRect(img, x0, y0, x1, y1, v.match ? rgba('#475569', false) : border);
          pixRect(img, x0 + 1, y0 + 1, x1 - 1, y1 - 1, u);
        } else pixRect(img, x0, y0, x1, y1, u);
      }
    }
    ctx.putImageData(img.data, 0, 0);
    // Matches and the pinned node: a ring of at least 8 pixels.
    ctx.lineWidth = 2.5 * dpr;
    for (const v of marked) {
      const w = Math.max(8 * dpr, v.w * k), h = Math.max(8 * dpr, v.h * k);
      ctx.strokeStyle = selected && selected.n === v.src ? '#f59e0b' : '#db2777';
      ctx.strokeRect(X(v.x + v.ox) - w / 2, Y(v.y + v.oy) - h / 2, w, h);
    }
  }

  // One edge's path and label, in layers L (its level's: p.layers or its
  // frame's).
  function addEdge(L, ve) {
    const path = L.edge.append('path').datum(ve)
      .attr('class', 'edge' + (ve.e.mode ? ' ' + ve.e.mode : ''))
      .attr('marker-end', `url(#arrow-${ve.e.mode || 'plain'})`)
      .attr('d', edgePath(ve));
    path.append('title').text(`${ve.e.var}: ${ve.e.label}${ve.e.mode ? ' (' + ve.e.mode + ')' : ''}`);
    ve.path = path.node();
    ve.text = L.label.append('text').attr('class', 'elabel').attr('text-anchor', 'middle')
      .attr('x', ve.mx + 3).attr('y', ve.my).text(ve.e.label).node();
  }

  // The offset of an expanded node's body drawing from its frame's corner.
  function bodyOffset(v) {
    return [PAD - v.body.x0 + (v.w - 2 * PAD - v.body.width) / 2, PAD + HEAD - v.body.y0];
  }
  // Where a node of the derived drawing lies in its pane's coordinates
  // (a node of an expanded body lies inside its parent's frame: layout()
  // gave it the offset of its level).
  function absPos(v) { return [v.x + v.ox, v.y + v.oy]; }

  // A node's group (or an expanded node's empty frame) in its level's
  // layer: the top level's, or its frame's (which must have an element).
  function addNode(pane, v) {
    const ng = (v.parent ? v.parent.layers : pane.layers).node;
    if (v.body) return addFrame(ng, v, pane);
    const sel = ng.append('g').datum(v)
      .attr('class', `node kind-${v.src.kind}` + (v.src.kind === 'group' ? ' group' : '') + (isHot(v.src) ? ' hot' : '') +
        (v.match ? ' match' : '') + (selected && selected.n === v.src ? ' sel' : ''))
      .attr('data-id', v.id).attr('data-view', pane.name)
      .attr('transform', `translate(${v.x},${v.y})`);
    v.el = sel.node();
    shapePath(sel, v);
    const lines = nodeLabel(v.src).split('\n');
    const dy = lines.length > 1 ? -2 : 3.5;
    sel.append('text').attr('class', 'l1').attr('text-anchor', 'middle').attr('y', dy).text(lines[0]);
    if (lines.length > 1) sel.append('text').attr('class', 'l2').attr('text-anchor', 'middle').attr('y', dy + 11).text(lines.slice(1).join(' '));
    sel.on('mouseenter', () => { show(v.src, pane); light(v, true); linkOrigins(v.src, pane, true); })
      .on('mouseleave', () => { light(v, false); linkOrigins(v.src, pane, false); if (selected) show(selected.n, selected.pane); })
      .on('click', (ev) => { ev.stopPropagation(); pin(v.src, pane); })
      .on('dblclick', (ev) => {
        ev.stopPropagation();
        const n = v.src;
        if (n.kind === 'group') { opened.add(v.id); redraw(); }
        else if (n.body && n.body.nodes && n.body.nodes.length) { n._expanded = true; redraw(); }
        else rename(n, v.el);
      })
      .call(pane.drag);
  }

  // Dragging a node (of any level in the pane): its edges follow. The node
  // and its edges leave the index's cells for its list of moved items, and
  // the pane is drawn again when the drag ends (edges that were out of
  // view may have come in).
  function makeDrag(pane) {
    return d3.drag().clickDistance(4)
      .on('start', (ev, v) => {
        gridMove(pane.nodeGrid, v);
        for (const ve of v.adj || []) gridMove(pane.edgeGrid, ve);
      })
      .on('drag', (ev, v) => {
        v.x += ev.dx; v.y += ev.dy;
        const members = v.src.kind === 'group' ? v.src.members : [v.src];
        for (const m of members) { m._dx = (m._dx || 0) + ev.dx; m._dy = (m._dy || 0) + ev.dy; }
        v.el.setAttribute('transform', `translate(${v.x},${v.y})`);
        for (const ve of v.adj || []) {
          if (!ve.path) continue;
          ve.path.setAttribute('d', edgePath(ve));
          ve.text.setAttribute('x', ve.mx + 3); ve.text.setAttribute('y', ve.my);
        }
      })
      .on('end', () => { pane.dirty = true; schedule(pane); });
  }

  // An expanded node: a frame, and in it the layers of its body, which
  // sync() fills with the body's nodes and edges that are in view (its
  // level's offset, v.body's nodes' ox and oy, is where they lie).
  function addFrame(ng, v, pane) {
    const c = ng.append('g').datum(v).attr('class', 'container' + (v.match ? ' match' : '')).attr('data-id', v.id).attr('data-view', pane.name)
      .attr('transform', `translate(${v.x - v.w / 2},${v.y - v.h / 2})`);
    v.el = c.node();
    v.rect = c.append('rect').attr('class', 'frame').attr('width', v.w).attr('height', v.h).attr('rx', 8).node();
    c.append('text').attr('class', 'head').attr('x', 8).attr('y', 14)
      .text(`\u25be ${v.src.op || ''} ${v.src.key || v.id}`).append('title').text('double-click the frame to collapse');
    const [ox, oy] = bodyOffset(v);
    const g = c.append('g').attr('transform', `translate(${ox},${oy})`);
    const eg = g.append('g').attr('class', 'edges');
    v.layers = { edge: eg.append('g'), label: eg.append('g'), node: g.append('g').attr('class', 'nodes') };
    c.on('dblclick', (ev) => { if (ev.target.closest('g.node')) return; ev.stopPropagation(); v.src._expanded = false; redraw(); })
      .on('mouseenter', () => show(v.src, pane)).on('click', (ev) => { if (!ev.target.closest('g.node')) { ev.stopPropagation(); pin(v.src, pane); } });
  }

  function light(v, on) {
    for (const ve of v.adj || []) if (ve.path) ve.path.classList.toggle('lit', on);
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
    for (const p of panes) { layout(p); update(p); }
    applySearch();
  }

  /* ---- panes, zoom, fit ---- */
  function makePane(name, drawing) {
    const div = d3.select('#main').append('div').attr('class', 'pane').attr('data-view', name);
    if (mode === 'side') div.append('div').attr('class', 'pname').text(name);
    const canvas = div.append('canvas').node();
    const svg = div.append('svg').attr('data-view', name);
    const defs = svg.append('defs');
    for (const [k, c] of [['plain', '#94a3b8'], ['view', '#2563eb'], ['destroy', '#dc2626']])
      defs.append('marker').attr('id', 'arrow-' + k).attr('viewBox', '0 0 10 10').attr('refX', 9).attr('refY', 5)
        .attr('markerUnits', 'userSpaceOnUse').attr('markerWidth', 9).attr('markerHeight', 9).attr('orient', 'auto')
        .append('path').attr('d', 'M0,0 L10,5 L0,10 z').attr('fill', c);
    const root = svg.append('g').attr('class', 'viewport');
    const p = { name, drawing, svg, root, canvas, W: 50, H: 50, raf: 0 };
    p.drag = makeDrag(p);
    // The extent is the pane's size as last measured: d3's default reads
    // the SVG's size, which makes the browser lay out every element drawn
    // since the last frame, at every wheel step.
    p.zoom = d3.zoom().scaleExtent([0.02, 6]).extent(() => [[0, 0], [p.W, p.H]]).on('zoom', (ev) => {
      root.attr('transform', ev.transform);
      svg.classed('far', ev.transform.k < 0.6).classed('veryfar', ev.transform.k < 0.22);
      schedule(p);
    });
    svg.call(p.zoom).on('dblclick.zoom', null).on('click', () => { selected = null; panelHint(); });
    return p;
  }

  function fit(p) {
    const box = p.svg.node().getBoundingClientRect(), vis = p.vis;
    const W = p.W = Math.max(box.width, 50), H = p.H = Math.max(box.height, 50);
    const k = Math.min(1.4, 0.92 * Math.min(W / Math.max(vis.width, 1), H / Math.max(vis.height, 1)));
    // A huge drawing fits at a scale below the usual least one: let the
    // user zoom out that far and a little more.
    p.zoom.scaleExtent([Math.min(0.02, k / 2), 6]);
    const x = (W - vis.width * k) / 2 - vis.x0 * k, y = Math.max(30, (H - vis.height * k) / 2) - vis.y0 * k;
    p.dirty = true;
    p.svg.call(p.zoom.transform, d3.zoomIdentity.translate(x, y).scale(k));
  }

  function build() {
    d3.select('#main').selectAll('*').remove();
    panes = [];
    const v = data.views || {};
    const names = mode === 'side' ? ['original', 'optimized'].filter((n) => v[n]) : [mode];
    for (const n of names) panes.push(makePane(n, v[n]));
    // Drawn now, not at the next frame, so that the first frame is complete.
    for (const p of panes) { layout(p); fit(p); update(p); }
    d3.selectAll('#views button').classed('on', function () { return this.dataset.mode === mode; });
    legend();
    applySearch();
  }

  /* ---- panel ---- */
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
  // "float32 (784, ?)"; a shape not known is "?", not "()" (a scalar's).
  function typeStr(t) {
    if (!t) return '';
    if (!Array.isArray(t.shape)) return t.dtype ? t.dtype + ' ?' : '?';
    const sh = t.shape.map((d) => (d === null ? '?' : d));
    return `${t.dtype || '?'} (${sh.join(', ')}${sh.length === 1 ? ',' : ''})`;
  }
  function attrsText(a) {
    return JSON.stringify(a, (k, v) => (k === 'body' && v && typeof v === 'object'
      ? `{body: ${(v.nodes || []).length} nodes; double-click the node to expand it}` : v), 2);
  }
  function panelHint() {
    $('#panel').innerHTML = '<div class="hint">Hover or click a node for its details.<br>Double-click a node with a body to expand it; double-click another node (or press F2) to rename it.<br>Drag to move, scroll to zoom. Zoomed far out, a large graph is drawn as plain boxes: zoom in for labels and details.</div>';
  }
  function pin(n, pane) {
    selected = { n, pane };
    d3.selectAll('g.node').classed('sel', function () { return d3.select(this).datum().src === n; });
    for (const p of panes) if (p.lod) { p.dirty = true; schedule(p); }
    show(n, pane);
  }
  /* A node of a gradient's expansion names no node of the file: which
   * derivative it takes part in ("grad gx, differentiating r (sqrt)"). */
  function gradText(g) {
    return `${g.by_op} ${g.by}` + (g.of ? `, differentiating ${g.of} (${g.of_op})` : '');
  }
  function show(n, pane) {
    let h = `<h2>${esc(n.op || n.kind)}</h2><div class="sub">${esc(nodeLabel(n).split('\n').join(' \u00b7 '))}</div>`;
    const rows = [['kind', n.kind + (n.family ? ' \u00b7 ' + n.family : '')], ['key', n.key], ['name', n.name],
      ['in file', n.location], ['view', pane && pane.name]];
    if (n.view_of !== undefined) rows.push(['output 0 views', 'input ' + n.view_of]);
    if (n.inplace && Object.keys(n.inplace).length) rows.push(['destroys', Object.entries(n.inplace).map(([o, i]) => `output ${o} overwrites input ${i}`).join('; ')]);
    if (n.update_of) rows.push(['updates', n.update_of]);
    if (n.gradient) rows.push(['gradient', gradText(n.gradient)]);
    if (n.copies) rows.push(['drawn', `beside each of its ${n.copies} readers (copy ${n.copy})`]);
    if (n.value !== undefined) rows.push(['value', n.value]);
    if (n.dtype) rows.push(['type', typeStr({ dtype: n.dtype, shape: n.type_shape })]);
    h += '<table>' + rows.filter((r) => r[1] !== undefined && r[1] !== null).map((r) => `<tr><td class="k">${r[0]}</td><td>${esc(r[1])}</td></tr>`).join('') + '</table>';
    if (n.share !== undefined) {
      h += `<h3>Profile</h3><table><tr><td class="k">time</td><td class="prof-time">${(n.time_s * 1e3).toFixed(3)} ms</td></tr>` +
        `<tr><td class="k">share</td><td class="prof-share">${(n.share * 100).toFixed(1)} %</td></tr></table>` +
        `<div class="bar-share"><div style="width:${Math.min(100, n.share * 100)}%"></div></div>` +
        (n.profile_via ? `<div class="hint prof-via">time of the optimized node${n.profile_via.length > 1 ? 's' : ''} ${esc(n.profile_via.join(', '))} that ${n.profile_via.length > 1 ? 'stand' : 'stands'} for it</div>` : '');
    }
    if (n.members) h += '<h3>Collapsed nodes</h3>' + n.members.map((m) => `<span class="chip">${esc(m.op)} ${esc(m.key)}</span>`).join('');
    const io = (name, list) => (list && list.length ? `<h3>${name}</h3><table>` + list.map((v, i) =>
      `<tr><td class="k">${i}: ${esc(v.id !== undefined ? v.id : 'inline')}</td><td>${v.dtype ? esc(typeStr(v)) : v.value !== undefined ? esc(JSON.stringify(v.value)) : '<span class="hint">type unknown</span>'}</td></tr>`).join('') + '</table>' : '');
    h += io('Inputs', n.inputs) + io('Outputs', n.outputs);
    if (n.attrs && Object.keys(n.attrs).length) h += `<h3>Attributes</h3><pre>${esc(attrsText(n.attrs))}</pre>`;
    if (n.origins) {
      const og = n.origin_gradients || {};
      h += '<h3>Stands for (original nodes)</h3>' + n.origins.map((k) => `<span class="chip" data-key="${esc(k)}"` +
        (og[k] ? ` title="${esc(gradText(og[k]))}">${esc(k)} <span class="grad-of">\u2202${esc(og[k].of || og[k].by)}</span>` : `>${esc(k)}`) + '</span>').join('');
    }
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
    for (const c of panel.querySelectorAll('.chip[data-key]')) c.onclick = () => { if (mode !== 'side' && data.views.original) setMode('original'); findKey(c.dataset.key); };
  }

  /* ---- renaming in place ---- */
  function rename(n, el) {
    const r = el.getBoundingClientRect();
    const inp = document.createElement('input');
    inp.className = 'rename';
    inp.value = nodeLabel(n).split('\n').join(' | '); /* (every line: an input holds one) */
    inp.style.left = r.left + 'px'; inp.style.top = (r.top + r.height / 2 - 12) + 'px';
    inp.style.width = Math.max(140, r.width) + 'px';
    document.body.appendChild(inp);
    inp.focus(); inp.select();
    let done = false;
    const finish = (ok) => {
      if (done) return; done = true;
      if (ok) { n._label = inp.value.split(' | ').join('\n'); delete n._hay; }
      inp.remove();
      if (ok) relabel(n);
    };
    inp.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') finish(true); if (ev.key === 'Escape') finish(false); ev.stopPropagation(); });
    inp.addEventListener('blur', () => finish(true));
  }

  // A renamed node's element made again (at any level); the layout stays.
  // (An expanded node's frame shows no label.)
  function relabel(n) {
    let found = false;
    for (const p of panes) {
      const v = p.byId.get(n.id);
      if (!v || v.src !== n) continue;
      found = true;
      if (v.el && !v.body) { unlinkNode(v); addNode(p, v); }
    }
    if (found) applySearch(); else redraw();
  }

  /* ---- search ----
   * Over the data, not the DOM, so that it finds nodes that are not drawn:
   * the derived drawings (nodes of expanded bodies included), and the
   * nodes a drawn node holds without showing them, in its collapsed body
   * (at any depth) or, for a group, its members' bodies. Each node of the
   * data that matches is a hit; v.match marks the drawn node that shows
   * it or holds it, for the elements made later and for the overview. A
   * node is found by its id, key, name, op, variable, label and the keys
   * of the original nodes it stands for (origins). */
  // A collapsed group is found by what it holds: its members' keys and ops.
  function hay(n) {
    if (n._hay === undefined) {
      const own = [n.id, n.key, n.name, n.op, n.var, nodeLabel(n)].concat(n.origins || []);
      for (const m of n.members || []) own.push(m.key, m.op);
      n._hay = own.filter(Boolean).join('\n').toLowerCase();
    }
    return n._hay;
  }
  // The hits in the data nodes a drawn node v holds, hidden: body nodes
  // (hits name the data node n; v is what is marked and centred).
  function hiddenHits(q, body, p, v, hits) {
    for (const n of (body && body.nodes) || []) {
      if (hay(n).includes(q)) hits.push({ p, v, n });
      hiddenHits(q, n.body, p, v, hits);
    }
  }
  function applySearch(jump) {
    const q = $('#search').value.trim().toLowerCase();
    searchHits = [];
    for (const p of panes) {
      const walk = (vis) => {
        for (const v of vis.nodes) {
          if (v.body) {
            // an expanded node: its frame is marked when it matches itself
            v.match = !!q && hay(v.src).includes(q);
            if (v.match) searchHits.push({ p, v, n: v.src });
            walk(v.body);
            continue;
          }
          const before = searchHits.length;
          if (q && hay(v.src).includes(q)) searchHits.push({ p, v, n: v.src });
          if (q && v.src.members) for (const m of v.src.members) hiddenHits(q, m.body, p, v, searchHits);
          else if (q && v.src.body) hiddenHits(q, v.src.body, p, v, searchHits);
          v.match = searchHits.length > before;
        }
      };
      walk(p.vis);
      p.svg.classed('searching', !!q);
      p.svg.selectAll('g.node, g.container').classed('match', (v) => v.match);
      if (p.lod && (q || p.searched)) { p.dirty = true; schedule(p); }
      p.searched = !!q;
    }
    $('#matches').textContent = q ? `${searchHits.length} match${searchHits.length === 1 ? '' : 'es'}` : '';
    if (jump && searchHits.length) next();
  }
  // The node whose key is `key` (an origin chip's), centred and pinned: the
  // original view's first, or the group that holds it; a search for the
  // key's text stepped on from the last hit and could land on another
  // node whose key contains it (gW1.2 found gW1.20).
  function findKey(key) {
    $('#search').value = key;
    applySearch(false);
    const exact = (h) => (h.n === h.v.src && h.n.key === key) || (h.v.src.members || []).some((m) => m.key === key);
    let at = searchHits.findIndex((h) => exact(h) && h.p.name === 'original');
    if (at < 0) at = searchHits.findIndex(exact);
    searchAt = (at < 0 ? 0 : at) - 1;
    next();
  }
  // Centres the next hit (update() draws it when it comes into view), or
  // the node that holds it, and shows the hit in the panel.
  function next() {
    if (!searchHits.length) return;
    searchAt = (searchAt + 1) % searchHits.length;
    const { p, v, n } = searchHits[searchAt];
    const k = Math.max(d3.zoomTransform(p.svg.node()).k, 0.9);
    const [x, y] = absPos(v);
    p.svg.transition().duration(350).call(p.zoom.transform, d3.zoomIdentity.translate(p.W / 2 - x * k, p.H / 2 - y * k).scale(k));
    pin(n || v.src, p);
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

  // A view writes each distinct nested body once, in its `bodies`, with
  // \u0001 where its owner's key goes; a node with that body holds
  // {ref, key}. Each becomes the node's own copy, with its key in every
  // string (ids, edges), before anything reads the nodes: the page then
  // works on what it always had, one drawing per node, each expanded and
  // moved on its own.
  function instantiate(t, key) {
    if (typeof t === 'string') return t.indexOf('\u0001') < 0 ? t : t.split('\u0001').join(key);
    if (Array.isArray(t)) return t.map((x) => instantiate(x, key));
    if (t && typeof t === 'object') {
      const o = {};
      for (const k of Object.keys(t)) o[k] = instantiate(t[k], key);
      return o;
    }
    return t;
  }
  // A fused node's body nodes get what they stand for from their own
  // node's `fused` (the drawing is shared): origins, and the creation
  // trace of the original node.
  function resolveBodies(nodes, table) {
    for (const n of nodes || []) {
      if (n.body && n.body.ref !== undefined && !n.body.nodes) {
        const t = table && table[n.body.ref];
        n.body = t ? instantiate(t, n.body.key) : undefined;
      }
      if (!n.body) continue;
      for (const b of n.fused ? n.body.nodes || [] : []) {
        const f = b.kind === 'apply' && n.fused[b.key];
        if (!f) continue;
        b.origins = f.origins;
        if (f.trace && !(b.trace && b.trace.length)) b.trace = f.trace;
      }
      resolveBodies(n.body.nodes, table);
    }
  }

  function load(d) {
    data = d;
    for (const view of Object.values(data.views || {})) {
      resolveBodies(view.nodes, view.bodies);
      delete view.bodies;
    }
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
    // What each pane drew last: mode 'svg' or 'canvas', the nodes and edges
    // drawn (as SVG: the elements, at every level, frames included; on the
    // canvas: those painted, the region around the view), and how long
    // update() took.
    // pending: another update is due (the margin after a jump, say).
    stats() { return panes.map((p) => Object.assign({ name: p.name, pending: !!p.raf }, p.stats)); },
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
