/* The matrix pages: the release chooser, and the grid's tooltip (a cell's condition, rule and evidence) on hover
   and on keyboard focus; the pages link every release run and every cell's row without this script. */
(function () {
  "use strict";
  var sel = document.getElementById("release-select");
  if (sel) {
    sel.parentNode.hidden = false;
    sel.addEventListener("change", function () { window.location.href = sel.value; });
  }
  var tip = document.getElementById("tip");
  if (!tip) return;
  function show(a) {
    var text = a.getAttribute("data-title") || a.getAttribute("title");
    if (a.hasAttribute("title")) { a.setAttribute("data-title", text); a.removeAttribute("title"); }
    tip.textContent = text;
    tip.hidden = false;
    var r = a.getBoundingClientRect();
    tip.style.left = (window.scrollX + r.right + 8) + "px";
    tip.style.top = (window.scrollY + r.bottom + 4) + "px";
  }
  function hide() { tip.hidden = true; }
  document.querySelectorAll("table.grid td.v a").forEach(function (a) {
    a.addEventListener("mouseenter", function () { show(a); });
    a.addEventListener("focus", function () { show(a); });
    a.addEventListener("mouseleave", hide);
    a.addEventListener("blur", hide);
  });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") hide(); });
})();
