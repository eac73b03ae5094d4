/* The coupling graph view: the focus's neighbourhood (depth, kinds) drawn with cytoscape.js.
   State in the address: #focus=t:<id>&depth=N&kinds=a,b. Deterministic grouped layout (no physics): the focus on
   the left, one column per depth, a column's nodes grouped under a title by the coupling kind that reached them,
   labels beside the nodes; kinds differ by line style and colour. window.optkgGraph exposes the drawing to tests. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var byId = {};
  data.nodes.forEach(function (n) { byId[n.id] = n; });
  var form = document.getElementById("graph-form");
  var fFocus = document.getElementById("g-focus"), fDepth = document.getElementById("g-depth");
  var status = document.getElementById("g-status"), list = document.getElementById("g-edges");
  var tip = document.getElementById("tip");
  form.hidden = false;
  var KIND_COLOUR = data.colours;
  var STYLES = data.styles;
  var ROW = 30, LABEL_PX = 7.2, GAP = 70, PER_COL = 24;
  var cy = cytoscape({
    container: document.getElementById("cy"), elements: [], minZoom: 0.2, maxZoom: 3,
    style: [
      {selector: "node", style: {"label": "data(label)", "font-size": 12, "color": "#1a1a1a", "text-valign": "center",
        "text-halign": "right", "text-margin-x": 5, "background-color": "#5b7fb5", "width": 14, "height": 14,
        "text-background-color": "#ffffff", "text-background-opacity": 0.9, "text-background-padding": 1}},
      {selector: "node[type = 'property']", style: {"shape": "round-rectangle", "background-color": "#9a9a9a"}},
      {selector: "node.focus", style: {"background-color": "#c2410c", "width": 22, "height": 22, "font-weight": "bold"}},
      {selector: "node.title", style: {"shape": "rectangle", "width": 1, "height": 1, "background-opacity": 0,
        "text-halign": "right", "font-size": 12, "font-weight": "bold", "color": "data(colour)",
        "text-margin-x": -4, "events": "no"}},
      {selector: "edge", style: {"curve-style": "bezier", "arrow-scale": 1.0, "opacity": 0.9}},
      {selector: "edge.same", style: {"curve-style": "unbundled-bezier", "control-point-distances": "data(bend)",
        "control-point-weights": 0.5}}
    ].concat(Object.keys(STYLES).map(function (k) {  /* one selector per kind: line style, width, arrow, colour */
      var st = STYLES[k], css = {"line-style": st.line, "width": st.width, "target-arrow-shape": st.arrow,
                                 "line-color": data.colours[k], "target-arrow-color": data.colours[k]};
      if (st.dash) css["line-dash-pattern"] = st.dash;
      return {selector: "edge[kind = '" + k + "']", style: css};
    })).concat([{selector: "edge.hover", style: {"width": 6, "opacity": 1}}])
  });
  window.optkgGraph = cy;
  /* the grouped layout: x by depth column (sub-columns of PER_COL rows), y by row; titles take a row */
  function layout(nb, focus) {
    var pos = {}, titles = [], cols = {};
    nb.order.forEach(function (id) {
      var d = nb.level[id];
      if (!cols[d]) cols[d] = [];
      cols[d].push(id);
    });
    pos[focus] = {x: 0, y: 0};
    var x = LABEL_PX * label(focus).length + GAP + 40;
    Object.keys(cols).map(Number).sort(function (a, b) { return a - b; }).forEach(function (d) {
      if (d === 0) return;
      var ids = cols[d].slice().sort(function (a, b) {
        var ka = nb.via[a] || "", kb = nb.via[b] || "";
        return ka < kb ? -1 : ka > kb ? 1 : (label(a) < label(b) ? -1 : label(a) > label(b) ? 1 : 0);
      });
      var rows = [], last = null;
      ids.forEach(function (id) {
        if (nb.via[id] !== last) { rows.push({title: nb.via[id]}); last = nb.via[id]; }
        rows.push({id: id});
      });
      for (var start = 0; start < rows.length; start += PER_COL) {
        var chunk = rows.slice(start, start + PER_COL), width = 0;
        var top = -((chunk.length - 1) * ROW) / 2;
        chunk.forEach(function (r, i) {
          var y = top + i * ROW;
          if (r.title) {
            titles.push({id: "title:" + d + ":" + start + ":" + i, label: r.title.replace("_", " "), x: x, y: y,
                         colour: data.colours[r.title] || "#1a1a1a"});
            width = Math.max(width, LABEL_PX * r.title.length);
          } else {
            pos[r.id] = {x: x, y: y};
            width = Math.max(width, LABEL_PX * label(r.id).length + 20);
          }
        });
        x += width + GAP;
      }
    });
    return {pos: pos, titles: titles};
  }
  function parseHash() {
    var out = {};
    (window.location.hash || "").replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }
  function kinds() {
    var k = [];
    form.querySelectorAll("input[name=kind]").forEach(function (c) { if (c.checked) k.push(c.value); });
    return k;
  }
  function neighbourhood(focus, depth, ks) {
    var level = {}, order = [focus], frontier = [focus], edges = {}, cut = 0, via = {};
    level[focus] = 0;
    for (var d = 1; d <= depth; d++) {
      var next = [];
      data.edges.forEach(function (e) {
        if (ks.indexOf(e.kind) < 0) return;
        var a = e.source, b = e.target, other = null;
        if (frontier.indexOf(a) >= 0 && !(b in level)) other = b;
        else if (frontier.indexOf(b) >= 0 && !(a in level)) other = a;
        if (other === null || next.indexOf(other) >= 0) return;
        if (order.length + next.length >= data.max_nodes) { cut++; return; }
        next.push(other);
        via[other] = e.kind;
      });
      next.sort();
      next.forEach(function (n) { level[n] = d; order.push(n); });
      frontier = next;
    }
    data.edges.forEach(function (e) {
      if (ks.indexOf(e.kind) >= 0 && (e.source in level) && (e.target in level)) edges[e.key] = e;
    });
    return {level: level, order: order, via: via, cut: cut,
            edges: Object.keys(edges).sort().map(function (k) { return edges[k]; })};
  }
  function label(id) { var n = byId[id]; return n ? (n.type === "technique" ? n.short : n.name) : id; }
  function href(id) { var n = byId[id]; return n && n.type === "technique" ? "technique-" + n.tid + ".html" : null; }
  function describe(e) {
    return label(e.source) + " " + e.kind.replace("_", " ") + " " + label(e.target) +
      "\ncondition: " + (e.condition || "always") + (e.mechanism ? "\n" + e.mechanism : "");
  }
  function showTip(text, x, y) {
    tip.textContent = text; tip.hidden = false;
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  function hideTip() { tip.hidden = true; }
  function draw() {
    var h = parseHash();
    var focus = h.focus && byId[h.focus] ? h.focus : (h.focus && byId["t:" + h.focus] ? "t:" + h.focus : data["default"]);
    var depth = Math.max(1, Math.min(3, parseInt(h.depth || fDepth.value || "1", 10) || 1));
    if (h.kinds) {
      var want = h.kinds.split(",");
      form.querySelectorAll("input[name=kind]").forEach(function (c) { c.checked = want.indexOf(c.value) >= 0; });
    }
    fFocus.value = focus; fDepth.value = String(depth);
    var nb = neighbourhood(focus, depth, kinds());
    var lay = layout(nb, focus);
    var els = nb.order.map(function (id) {
      var n = byId[id];
      return {group: "nodes", data: {id: id, label: label(id), type: n.type, depth: nb.level[id]},
              position: lay.pos[id], classes: id === focus ? "focus" : ""};
    });
    lay.titles.forEach(function (t) {
      els.push({group: "nodes", data: {id: t.id, label: t.label, type: "title", colour: t.colour},
                position: {x: t.x, y: t.y}, classes: "title"});
    });
    nb.edges.forEach(function (e) {
      var a = lay.pos[e.source], b = lay.pos[e.target], same = a && b && a.x === b.x;
      /* two nodes of one column: bend the edge out to the left, clear of the nodes and labels between them */
      els.push({group: "edges", classes: same ? "same" : "",
                data: {id: e.key, source: e.source, target: e.target, kind: e.kind,
                       bend: same ? (a.y < b.y ? 1 : -1) * Math.min(160, 24 + Math.abs(a.y - b.y) / 3) : 0}});
    });
    cy.elements().remove();
    cy.add(els);
    cy.layout({name: "preset", animate: false}).run();
    cy.fit(undefined, 24);
    var name = byId[focus].name;
    status.textContent = "Focus: " + name + " · depth " + depth + " · " + nb.order.length + " nodes, " +
      nb.edges.length + " couplings drawn" + (nb.cut ? " · " + nb.cut + " more neighbours not drawn (lower the depth or untick kinds)" : "");
    status.setAttribute("data-focus", focus);
    list.textContent = "";
    nb.edges.forEach(function (e) {
      var li = document.createElement("li");
      li.tabIndex = 0;
      li.setAttribute("data-edge", e.key);
      [e.source, e.target].forEach(function (id, i) {
        var u = href(id), el = document.createElement(u ? "a" : "span");
        if (u) el.href = u;
        el.textContent = byId[id].name;
        li.appendChild(el);
        if (i === 0) li.appendChild(document.createTextNode(" " + e.kind.replace("_", " ") + " "));
      });
      var c = document.createElement("div");
      c.className = "muted";
      c.textContent = "condition: " + (e.condition || "always");
      li.appendChild(c);
      li.addEventListener("mouseenter", function () { cy.getElementById(e.key).addClass("hover"); });
      li.addEventListener("mouseleave", function () { cy.getElementById(e.key).removeClass("hover"); });
      li.addEventListener("focus", function () { cy.getElementById(e.key).addClass("hover"); });
      li.addEventListener("blur", function () { cy.getElementById(e.key).removeClass("hover"); });
      list.appendChild(li);
    });
  }
  var edgeOf = {};
  data.edges.forEach(function (e) { edgeOf[e.key] = e; });
  cy.on("mouseover", "edge", function (ev) {
    var e = edgeOf[ev.target.id()], p = ev.renderedPosition, r = cy.container().getBoundingClientRect();
    ev.target.addClass("hover");
    showTip(describe(e), window.scrollX + r.left + p.x + 12, window.scrollY + r.top + p.y + 12);
  });
  cy.on("mouseout", "edge", function (ev) { ev.target.removeClass("hover"); hideTip(); });
  cy.on("tap", "node", function (ev) { setHash(ev.target.id()); });
  function setHash(focus) {
    window.location.hash = "focus=" + encodeURIComponent(focus) + "&depth=" + fDepth.value + "&kinds=" + kinds().join(",");
  }
  form.addEventListener("change", function () { setHash(fFocus.value); });
  window.addEventListener("hashchange", draw);
  draw();
})();
