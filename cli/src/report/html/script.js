(function () {
  'use strict';
  var W = 1200;
  function fit(g, x, w) {
    var r = g.querySelector('rect'), t = g.querySelector('text');
    r.setAttribute('x', x.toFixed(2));
    r.setAttribute('width', Math.max(w - 0.5, 0).toFixed(2));
    if (!t) { return; }
    var label = g.getAttribute('data-label') || '';
    var n = Math.floor((w - 6) / 6.6);
    t.setAttribute('x', (x + 3).toFixed(2));
    t.textContent = n < 3 ? '' : (label.length > n ? label.slice(0, n - 1) + '\u2026' : label);
  }
  function zoom(svg, target) {
    var x0 = +target.getAttribute('data-x'), w0 = +target.getAttribute('data-w');
    var d0 = +target.getAttribute('data-d');
    svg.querySelectorAll('g.node').forEach(function (g) {
      var x = +g.getAttribute('data-x'), w = +g.getAttribute('data-w'), d = +g.getAttribute('data-d');
      var inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9 && d >= d0;
      var above = d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9;
      if (inside) {
        g.style.display = '';
        fit(g, (x - x0) / w0 * W, w / w0 * W);
      } else if (above) {
        g.style.display = '';
        fit(g, 0, W);
      } else {
        g.style.display = 'none';
      }
    });
  }
  document.querySelectorAll('svg.flame').forEach(function (svg) {
    svg.addEventListener('click', function (e) {
      var g = e.target.closest ? e.target.closest('g.node') : null;
      if (g) { zoom(svg, g); }
    });
  });
  document.querySelectorAll('table.legend-table').forEach(function (table) {
    var svg = document.getElementById(table.getAttribute('data-for'));
    if (!svg) { return; }
    var pinned = null;
    function show(id) {
      svg.querySelectorAll('.band').forEach(function (b) {
        b.classList.toggle('dim', id !== null && b.getAttribute('data-band') !== id);
      });
      table.querySelectorAll('tr.legend').forEach(function (tr) {
        tr.classList.toggle('hl', tr.getAttribute('data-band') === id);
      });
    }
    table.querySelectorAll('tr.legend').forEach(function (tr) {
      var id = tr.getAttribute('data-band');
      tr.addEventListener('mouseenter', function () { if (pinned === null) { show(id); } });
      tr.addEventListener('mouseleave', function () { if (pinned === null) { show(null); } });
      tr.addEventListener('click', function () { pinned = pinned === id ? null : id; show(pinned); });
    });
  });
  // Reached only when everything above ran: the browser test looks for it.
  document.documentElement.setAttribute('data-script', 'ready');
})();
