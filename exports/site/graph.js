/* The coupling graph view: the focus's neighbourhood (depth, kinds) drawn with cytoscape.js.
   State in the address: #focus=t:<id>&depth=N&kinds=a,b. Deterministic: breadthfirst layout, sorted input. */
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
  var cy = cytoscape({
    container: document.getElementById("cy"), elements: [], minZoom: 0.2, maxZoom: 3,
    style: [
      {selector: "node", style: {"label": "data(label)", "font-size": 11, "color": "#1a1a1a", "text-valign": "bottom",
        "text-margin-y": 3, "background-color": "#5b7fb5", "width": 18, "height": 18,
        "text-background-color": "#ffffff", "text-background-opacity": 0.85, "text-background-padding": 1}},
      {selector: "node[type = 'property']", style: {"shape": "round-rectangle", "background-color": "#b0b0b0"}},
      {selector: "node.focus", style: {"background-color": "#c2410c", "width": 28, "height": 28, "font-weight": "bold"}},
      {selector: "edge", style: {"width": 1.6, "curve-style": "bezier", "target-arrow-shape": "triangle",
        "line-color": "data(colour)", "target-arrow-color": "data(colour)", "arrow-scale": 0.9}},
      {selector: "edge.hover", style: {"width": 4}}
    ]
  });
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
    var level = {}, order = [focus], frontier = [focus], edges = {}, cut = 0;
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
      });
      next.sort();
      next.forEach(function (n) { level[n] = d; order.push(n); });
      frontier = next;
    }
    data.edges.forEach(function (e) {
      if (ks.indexOf(e.kind) >= 0 && (e.source in level) && (e.target in level)) edges[e.key] = e;
    });
    return {level: level, order: order, edges: Object.keys(edges).sort().map(function (k) { return edges[k]; }), cut: cut};
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
    var els = nb.order.map(function (id) {
      var n = byId[id];
      return {group: "nodes", data: {id: id, label: label(id), type: n.type, depth: nb.level[id]}, classes: id === focus ? "focus" : ""};
    });
    nb.edges.forEach(function (e) {
      els.push({group: "edges", data: {id: e.key, source: e.source, target: e.target, colour: KIND_COLOUR[e.kind] || "#4a4a4a"}});
    });
    cy.elements().remove();
    cy.add(els);
    cy.layout({name: "breadthfirst", roots: [focus], directed: false, circle: true, spacingFactor: 1.1,
               animate: false, avoidOverlap: true}).run();
    cy.fit(undefined, 30);
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
