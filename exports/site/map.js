/* The coordinate map's filters and tooltips (the page is complete without this script). */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("map-data").textContent);
  var T = data.techniques, E = data.engines;
  var form = document.getElementById("filters");
  var count = document.getElementById("count");
  var tip = document.getElementById("tip");
  form.hidden = false;
  function val(name) { return document.getElementById("f-" + name).value; }
  function keep(id, f) {
    var t = T[id];
    if (!t) return false;
    if (f.layer && t.l.indexOf(f.layer) < 0) return false;
    if (f.dimension && t.d !== f.dimension) return false;
    if (f.tag && t.tg.indexOf(f.tag) < 0) return false;
    if (f.status && t.ss !== f.status) return false;
    if (f.engine) {
      var rels = t.e[f.engine];
      if (!rels) return false;
      if (f.release !== "" && f.release !== null && E[f.engine].releases.length && rels.indexOf(f.release) < 0) return false;
    }
    return true;
  }
  function apply() {
    var f = {stage: val("stage"), layer: val("layer"), dimension: val("dimension"), tag: val("tag"),
             status: val("status"), engine: val("engine"), release: null};
    var rel = val("release");
    if (rel) {
      var parts = rel.split("|");
      f.engine = parts[0];
      document.getElementById("f-engine").value = parts[0];
      f.release = parseInt(parts[1], 10);
    }
    var shown = {}, cells = 0;
    document.querySelectorAll("section.panel").forEach(function (p) {
      var st = p.getAttribute("data-stage");
      var on = f.stage ? st === f.stage : st === "combined";
      p.hidden = !on;
      p.querySelectorAll("tr[data-layer]").forEach(function (tr) {
        tr.hidden = !!(f.layer && tr.getAttribute("data-layer") !== f.layer);
      });
      p.querySelectorAll("[data-dim]").forEach(function (c) {
        c.hidden = !!(f.dimension && c.getAttribute("data-dim") !== f.dimension);
      });
      p.querySelectorAll("td.cell").forEach(function (td) {
        var chips = td.querySelectorAll("li[data-t]");
        if (!chips.length) return;
        var n = 0;
        chips.forEach(function (li) {
          var k = keep(li.getAttribute("data-t"), f);
          li.hidden = !k;
          if (k) { n++; if (on) shown[li.getAttribute("data-t")] = 1; }
        });
        td.querySelector(".none").hidden = n > 0;
        td.classList.toggle("filtered-out", n === 0);
        if (on && n > 0 && !td.hidden && !td.parentNode.hidden) cells++;
      });
    });
    count.textContent = "Showing " + Object.keys(shown).length + " of " + Object.keys(T).length +
      " techniques in " + cells + " cells.";
  }
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  document.getElementById("f-engine").addEventListener("change", function () {
    document.getElementById("f-release").value = "";
  });
  function names(td) {
    var out = [];
    td.querySelectorAll("li[data-t]").forEach(function (li) {
      if (!li.hidden) out.push(T[li.getAttribute("data-t")].n);
    });
    return out;
  }
  function show(td) {
    var list = names(td);
    var head = td.getAttribute("data-label");
    var gap = td.getAttribute("data-gap");
    var text = head + "\n" + (list.length ? list.join("\n") : (gap ? "empty: gap #" + gap + " in optkg gaps" : "no technique"));
    tip.textContent = text;
    tip.hidden = false;
    var r = td.getBoundingClientRect();
    tip.style.left = (window.scrollX + r.left) + "px";
    tip.style.top = (window.scrollY + r.bottom + 4) + "px";
  }
  function hide() { tip.hidden = true; }
  document.querySelectorAll("td.cell").forEach(function (td) {
    td.addEventListener("mouseenter", function () { show(td); });
    td.addEventListener("mouseleave", hide);
    td.addEventListener("focus", function () { show(td); });
    td.addEventListener("blur", hide);
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") hide(); });
  // arrow keys move between the visible cells of a panel (Tab still walks cells and links in order)
  var STEP = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]};
  document.querySelectorAll("table.map").forEach(function (tbl) {
    tbl.addEventListener("keydown", function (ev) {
      var td = ev.target.closest ? ev.target.closest("td.cell") : null;
      if (!td || ev.target !== td || !STEP[ev.key]) return;
      var rows = [].filter.call(tbl.querySelectorAll("tbody tr"), function (tr) { return !tr.hidden; });
      var grid = rows.map(function (tr) {
        return [].filter.call(tr.querySelectorAll("td.cell"), function (c) { return !c.hidden; });
      });
      var r = -1, c = -1;
      grid.forEach(function (cells, i) { var j = cells.indexOf(td); if (j >= 0) { r = i; c = j; } });
      if (r < 0) return;
      var nr = r + STEP[ev.key][0], nc = c + STEP[ev.key][1];
      if (nr < 0 || nr >= grid.length || nc < 0 || nc >= grid[nr].length) return;
      ev.preventDefault();
      grid[nr][nc].focus();
    });
  });
  apply();
})();
