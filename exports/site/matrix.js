/* The matrix pages' release chooser (the pages link every release run without this script). */
(function () {
  "use strict";
  var sel = document.getElementById("release-select");
  if (!sel) return;
  sel.parentNode.hidden = false;
  sel.addEventListener("change", function () { window.location.href = sel.value; });
})();
