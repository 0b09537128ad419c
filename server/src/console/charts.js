// --- Charts (charts.js) ------------------------------------------------------
//
// Time-series line charts drawn on a <canvas> (no library, no SVG): a y axis
// from 0 to a rounded maximum with formatted labels, a time axis over the
// samples, one line per series and a legend of text elements. The canvas
// says what it drew in data-series and data-points (points not null), for
// tests and for people reading the DOM.

const COLORS = ["#2356a8", "#d9822b", "#1e7b34", "#b3261e", "#7a3fb0", "#0e8a8a", "#a8326e", "#6b6b00"];

// A "nice" maximum at or above `v`: 1, 2, 2.5 or 5 times a power of ten.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// Draws `series` ([{name, values}], values aligned with `times`, null =
// no point) on `canvas`; `format` renders a y value; `legend` is the
// element that lists the series.
function drawChart(canvas, legend, times, series, format) {
  const dpr = window.devicePixelRatio || 1;
  const width = Math.max(200, canvas.clientWidth);
  const height = Math.max(100, canvas.clientHeight);
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, width, height);
  g.font = "11px system-ui, sans-serif";
  let max = 0;
  series.forEach((s) => s.values.forEach((v) => { if (v !== null && v > max) max = v; }));
  const top = niceMax(max);
  const left = Math.max(...[0, 0.5, 1].map((f) => g.measureText(format(top * f)).width)) + 12;
  const plot = { x: left, y: 8, w: width - left - 10, h: height - 30 };
  // Grid and y labels.
  g.strokeStyle = "#dde2e7";
  g.fillStyle = "#66707a";
  g.lineWidth = 1;
  g.textAlign = "right";
  g.textBaseline = "middle";
  [0, 0.5, 1].forEach((f) => {
    const y = plot.y + plot.h * (1 - f);
    g.beginPath(); g.moveTo(plot.x, y); g.lineTo(plot.x + plot.w, y); g.stroke();
    g.fillText(format(top * f), plot.x - 6, y);
  });
  // Time labels: the first and last sample.
  const t0 = times.length ? times[0] : 0;
  const t1 = times.length ? times[times.length - 1] : 1;
  const span = Math.max(1, t1 - t0);
  g.textBaseline = "top";
  if (times.length) {
    g.textAlign = "left";
    g.fillText(new Date(t0).toLocaleTimeString("en-GB"), plot.x, plot.y + plot.h + 6);
    g.textAlign = "right";
    g.fillText(new Date(t1).toLocaleTimeString("en-GB"), plot.x + plot.w, plot.y + plot.h + 6);
  }
  const x = (t) => plot.x + plot.w * ((t - t0) / span);
  const y = (v) => plot.y + plot.h * (1 - v / top);
  let points = 0;
  series.forEach((s, i) => {
    g.strokeStyle = COLORS[i % COLORS.length];
    g.fillStyle = g.strokeStyle;
    g.lineWidth = 1.5;
    g.beginPath();
    let drawing = false;
    s.values.forEach((v, j) => {
      if (v === null || v === undefined) { drawing = false; return; }
      points++;
      if (drawing) g.lineTo(x(times[j]), y(v));
      else g.moveTo(x(times[j]), y(v));
      drawing = true;
    });
    g.stroke();
    // A lone point (one sample so far) as a dot.
    const last = s.values.length - 1;
    if (last >= 0 && s.values[last] !== null && (last === 0 || s.values[last - 1] === null)) {
      g.beginPath(); g.arc(x(times[last]), y(s.values[last]), 2.5, 0, 2 * Math.PI); g.fill();
    }
  });
  canvas.dataset.series = String(series.length);
  canvas.dataset.points = String(points);
  legend.replaceChildren(...series.map((s, i) => {
    const item = el("span", "", "legend-item");
    const swatch = el("span", "", "swatch");
    swatch.classList.add(`c${i % COLORS.length}`);
    const lastValue = [...s.values].reverse().find((v) => v !== null && v !== undefined);
    item.append(swatch, el("span", `${s.name} ${lastValue === undefined ? "" : format(lastValue)}`));
    return item;
  }));
  if (!series.length) legend.replaceChildren(el("span", "no data yet", "muted"));
}
