/* stringdiag's interactive view: pan and zoom, panes shown one at a time (a diagram collapsed or
   expanded, a derivation's steps on a slider, a family's members), and what is under the pointer.
   Written for the pages `stringdiag render/derive/taxonomy/enumerate` write and for notebooks:
   no network, no library; each view (div.sd-view) is set up once, however many times this runs. */
(function () {
  "use strict";

  function setUp(view) {
    if (view.dataset.ready) return;
    view.dataset.ready = "1";
    var canvas = view.querySelector(".sd-canvas"), stage = view.querySelector(".sd-stage");
    var panes = Array.prototype.slice.call(view.querySelectorAll(".sd-pane"));
    var caption = view.querySelector(".sd-caption"), hover = view.querySelector(".sd-hover");
    var slider = view.querySelector(".sd-slider");
    var at = {x: 0, y: 0, k: 1};

    function apply() {
      stage.style.transform = "translate(" + at.x + "px," + at.y + "px) scale(" + at.k + ")";
      view.dataset.zoom = at.k.toFixed(3);
    }
    function current() { return panes.filter(function (p) { return !p.hidden; })[0]; }
    function fit() {
      var pane = current(), svg = pane && pane.querySelector("svg");
      var w = svg ? svg.getBoundingClientRect().width / at.k : 1;
      at = {x: 0, y: 0, k: Math.min(1, Math.max(0.05, (canvas.clientWidth - 8) / Math.max(w, 1)))};
      apply();
    }
    function zoom(factor, cx, cy) {
      var k = Math.min(20, Math.max(0.05, at.k * factor));
      at.x = cx - (cx - at.x) * k / at.k;
      at.y = cy - (cy - at.y) * k / at.k;
      at.k = k;
      apply();
    }
    function show(key) {
      panes.forEach(function (p) { p.hidden = p.dataset.key !== String(key); });
      var pane = current();
      view.dataset.shown = key;
      if (caption && pane) caption.textContent = pane.dataset.caption || "";
      view.querySelectorAll("[data-opens]").forEach(function (e) {
        e.classList.toggle("sd-current", e.dataset.opens === String(key));
      });
      if (slider && slider.value !== String(key) && pane) slider.value = key;
      fit();
    }

    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = canvas.getBoundingClientRect();
      zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - r.left, e.clientY - r.top);
    }, {passive: false});
    var drag = null;
    canvas.addEventListener("mousedown", function (e) { drag = {x: e.clientX - at.x, y: e.clientY - at.y, moved: false}; });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      at.x = e.clientX - drag.x; at.y = e.clientY - drag.y; drag.moved = true;
      apply();
    });
    window.addEventListener("mouseup", function () { setTimeout(function () { drag = null; }, 0); });

    view.addEventListener("click", function (e) {
      var t = e.target.closest("[data-act],[data-opens],.sd-def,.sd-def-frame");
      if (!t || (drag && drag.moved)) return;
      var act = t.dataset.act, r = canvas.getBoundingClientRect();
      if (act === "zoom-in") zoom(1.25, r.width / 2, r.height / 2);
      else if (act === "zoom-out") zoom(0.8, r.width / 2, r.height / 2);
      else if (act === "fit") fit();
      else if (t.dataset.opens !== undefined) show(t.dataset.opens);
      else if (t.classList.contains("sd-def")) show("expanded");
      else if (t.classList.contains("sd-def-frame")) show("collapsed");
    });
    canvas.addEventListener("mouseover", function (e) {
      var t = e.target.closest("[data-info]");
      if (hover) hover.textContent = t ? t.dataset.info : "";
    });
    if (slider) slider.addEventListener("input", function () { show(slider.value); });
    var filter = view.querySelector(".sd-filter");
    if (filter) filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase();
      view.querySelectorAll(".sd-members [data-opens]").forEach(function (b) {
        b.hidden = q !== "" && b.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
    show(view.dataset.first);
  }

  document.querySelectorAll(".sd-view").forEach(setUp);
})();
