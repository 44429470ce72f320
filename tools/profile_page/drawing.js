// The profile page's canvases and what is drawn on them (the second of three files: data.js
// says how they are joined).

// ---- Canvases ----------------------------------------------------------------
const timeline = document.getElementById("timeline");
const canvas = timeline.querySelector("canvas");
const axisCanvas = document.getElementById("axis");
const minimap = document.getElementById("minimap");
const tooltip = document.getElementById("tooltip");
const context = canvas.getContext("2d");
const axisContext = axisCanvas.getContext("2d");
const minimapContext = minimap.getContext("2d");
let width = 0, plotWidth = 1, minimapImage = null;

function fitCanvas(c, cssWidth, cssHeight) {
  const ratio = window.devicePixelRatio || 1;
  c.style.height = cssHeight + "px";
  c.width = Math.max(1, Math.round(cssWidth * ratio));
  c.height = Math.max(1, Math.round(cssHeight * ratio));
  const ctx = c.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
}
function layout() {
  width = Math.max(LABEL_WIDTH + 100, timeline.clientWidth);
  plotWidth = width - LABEL_WIDTH;
  fitCanvas(canvas, width, contentHeight);
  fitCanvas(axisCanvas, width, 26);
  fitCanvas(minimap, minimap.clientWidth || width, 44);
  minimapImage = null;
}
const xOf = (t) => LABEL_WIDTH + (t - state.t0) * plotWidth / (state.t1 - state.t0);
const timeAt = (x) => state.t0 + (x - LABEL_WIDTH) * (state.t1 - state.t0) / plotWidth;

function lowerBound(sorted, value) {
  let lo = 0, hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] < value) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// ---- Drawing -----------------------------------------------------------------
// What is narrower than a pixel is summed per pixel column (`cover`, per
// kind) and drawn as a column whose opacity follows the time it covers.
let cover = new Float32Array(0), coverHit = new Float32Array(0);
function resetCover() {
  const size = Math.ceil(plotWidth) + 2;
  if (cover.length !== size * 4) {
    cover = new Float32Array(size * 4);
    coverHit = new Float32Array(size);
  } else {
    cover.fill(0);
    coverHit.fill(0);
  }
}
function addCover(x0, x1, kind, hit) {
  const a = Math.max(0, x0 - LABEL_WIDTH), b = Math.min(plotWidth, x1 - LABEL_WIDTH);
  if (b < a) return;
  const first = Math.floor(a), last = Math.floor(b);
  for (let p = first; p <= last; ++p) {
    const amount = p === first && p === last ? Math.max(b - a, 0.05)
      : p === first ? first + 1 - a : p === last ? b - last : 1;
    cover[p * 4 + kind] += amount;
    if (hit) coverHit[p] += amount;
  }
}
function drawCover(y, height, colours, dimmed) {
  const ctx = context;
  for (let p = 0; p < plotWidth; ++p) {
    const base = p * 4;
    const total = cover[base] + cover[base + 1] + cover[base + 2] + cover[base + 3];
    if (total <= 0) continue;
    let kind = 0;
    for (let k = 1; k < 4; ++k) if (cover[base + k] > cover[base + kind]) kind = k;
    const density = Math.min(1, total);
    ctx.globalAlpha = dimmed ? 0.12 + 0.2 * density : 0.3 + 0.7 * density;
    ctx.fillStyle = colours[kind];
    ctx.fillRect(LABEL_WIDTH + p, y, 1, height);
    if (coverHit[p] > 0) {
      ctx.globalAlpha = 1;
      ctx.fillRect(LABEL_WIDTH + p, y, 1, height);
    }
  }
  ctx.globalAlpha = 1;
}

function visibleOp(i) {
  return state.visible[KINDS[kindOf[i]]];
}

function drawOpRow(row) {
  const ctx = context;
  const y = row.y + 3, height = row.height - 6;
  const first = lowerBound(row.reach, state.t0);
  const highlight = state.highlight;
  resetCover();
  ctx.font = "11px system-ui, 'DejaVu Sans', sans-serif";
  ctx.textBaseline = "middle";
  for (let n = first; n < row.items.length; ++n) {
    const i = row.items[n];
    if (begin[i] > state.t1) break;
    if (end[i] < state.t0 || !visibleOp(i)) continue;
    const x0 = xOf(begin[i]), x1 = xOf(end[i]);
    const lit = highlight === null || highlight.has(i);
    if (x1 - x0 < 2) {
      addCover(x0, x1, kindOf[i], highlight !== null && lit);
      continue;
    }
    const solidEnd = ret[i] >= 0 ? xOf(ret[i]) : x1;
    ctx.globalAlpha = lit ? 1 : 0.18;
    ctx.fillStyle = colourOf(i);
    ctx.fillRect(x0, y, Math.max(1, solidEnd - x0), height);
    if (solidEnd < x1) {  // in flight after its closure returned
      ctx.globalAlpha = lit ? 0.35 : 0.1;
      ctx.fillRect(solidEnd, y + height / 4, x1 - solidEnd, height / 2);
    }
    ctx.globalAlpha = 1;
    if (ops.failed[i]) {
      ctx.strokeStyle = SELECT_COLOUR;
      ctx.lineWidth = 2;
      ctx.strokeRect(x0 + 1, y + 1, x1 - x0 - 2, height - 2);
    }
    const visibleWidth = Math.min(solidEnd, width) - Math.max(x0, LABEL_WIDTH);
    if (visibleWidth > 30 && lit) {
      const text = data.names[nameOf[i]];
      const fits = Math.floor((visibleWidth - 6) / 6.2);
      if (fits > 1) {
        ctx.fillStyle = "#fff";
        ctx.fillText(text.length > fits ? text.slice(0, fits - 1) + "\u2026" : text,
                     Math.max(x0, LABEL_WIDTH) + 3, y + height / 2 + 0.5);
      }
    }
  }
  drawCover(y, height, KIND_COLOURS.concat(["#000"]), highlight !== null);
}

function drawWaitRow(row) {
  if (!state.visible.wait) return;
  const ctx = context;
  const y = row.y + 5, height = row.height - 10;
  const first = lowerBound(row.reach, state.t0);
  resetCover();
  ctx.fillStyle = WAIT_COLOUR;
  for (let n = first; n < row.items.length; ++n) {
    const w = row.items[n];
    if (waitBegin[w] > state.t1) break;
    if (waitEnd[w] < state.t0) continue;
    const x0 = xOf(waitBegin[w]), x1 = xOf(waitEnd[w]);
    if (x1 - x0 < 2) {
      addCover(x0, x1, 3, false);
    } else {
      ctx.fillRect(x0, y, x1 - x0, height);
    }
  }
  drawCover(y, height, ["#000", "#000", "#000", WAIT_COLOUR], false);
}

function drawCounterRow(row) {
  const isMemory = row.counter.kind === "allocation";
  if (isMemory && !state.visible.allocation) return;
  const ctx = context;
  const base = row.y + row.height - 3, top = row.y + 4;
  const scale = row.max > 0 ? (base - top) / row.max : 0;
  ctx.fillStyle = isMemory ? MEMORY_COLOUR : QUEUE_COLOUR;
  ctx.globalAlpha = 0.75;
  // Per pixel column, the highest value it shows.
  let n = Math.max(0, lowerBound(row.t, state.t0 + 1e-9) - 1);
  let value = n < row.t.length && row.t[n] <= state.t0 ? row.v[n] : 0;
  if (n < row.t.length && row.t[n] <= state.t0) ++n;
  for (let p = 0; p < plotWidth; ++p) {
    const columnEnd = timeAt(LABEL_WIDTH + p + 1);
    let highest = value;
    while (n < row.t.length && row.t[n] < columnEnd) {
      value = row.v[n++];
      highest = Math.max(highest, value);
    }
    if (highest > 0) ctx.fillRect(LABEL_WIDTH + p, base - highest * scale, 1, highest * scale);
    if (n >= row.t.length && value === 0) break;
  }
  ctx.globalAlpha = 1;
}

function rowCentre(i) {
  const row = rows[rowOfTrack[trackOf[i]]];
  return row.y + row.height / 2;
}
function arrow(x0, y0, x1, y1, colour) {
  const ctx = context;
  const bend = Math.max(24, Math.abs(x1 - x0) / 2);
  ctx.strokeStyle = colour;
  ctx.fillStyle = colour;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.bezierCurveTo(x0 + bend, y0, x1 - bend, y1, x1, y1);
  ctx.stroke();
  ctx.beginPath();
  ctx.moveTo(x1, y1);
  ctx.lineTo(x1 - 7, y1 - 4);
  ctx.lineTo(x1 - 7, y1 + 4);
  ctx.closePath();
  ctx.fill();
}
function drawArrows() {
  if (state.critical) {
    for (let n = 1; n < data.critical.length; ++n) {
      const from = data.critical[n - 1], to = data.critical[n];
      arrow(xOf(end[from]), rowCentre(from), xOf(begin[to]), rowCentre(to), SELECT_COLOUR);
    }
  }
  const i = state.selected;
  if (i < 0) return;
  for (const p of producersOf[i]) {
    arrow(xOf(end[p]), rowCentre(p), xOf(begin[i]), rowCentre(i), "#2f3b52");
  }
  for (const c of consumersOf[i]) {
    arrow(xOf(end[i]), rowCentre(i), xOf(begin[c]), rowCentre(c), "#8a5cb8");
  }
  const y = rows[rowOfTrack[trackOf[i]]].y + 1;
  const x0 = xOf(begin[i]), x1 = xOf(end[i]);
  context.strokeStyle = SELECT_COLOUR;
  context.lineWidth = 2;
  context.strokeRect(x0 - 1, y, Math.max(2, x1 - x0 + 2), ROW_HEIGHT - 2);
}

function tickStep() {
  const target = (state.t1 - state.t0) * 110 / plotWidth;
  const power = Math.pow(10, Math.floor(Math.log10(Math.max(target, 1e-3))));
  for (const m of [1, 2, 5, 10]) if (m * power >= target) return m * power;
  return 10 * power;
}
function tickLabel(t, step) {
  // The unit of the largest time shown, with the digits the step needs.
  const [scale, name] = unitFor(Math.max(Math.abs(state.t0), Math.abs(state.t1), step));
  const digits = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / scale) + 1e-9)));
  return (t / scale).toFixed(digits) + " " + name;
}

function drawAxis(step) {
  const ctx = axisContext;
  ctx.clearRect(0, 0, width, 26);
  ctx.fillStyle = "#f6f8fa";
  ctx.fillRect(0, 0, width, 26);
  ctx.fillStyle = "#5f6b7a";
  ctx.font = "11px system-ui, 'DejaVu Sans', sans-serif";
  ctx.textBaseline = "middle";
  ctx.fillText("time from the trace's start", 6, 13);
  ctx.strokeStyle = "#9aa5b1";
  ctx.beginPath();
  for (let t = Math.ceil(state.t0 / step) * step; t <= state.t1; t += step) {
    const x = Math.round(xOf(t)) + 0.5;
    ctx.moveTo(x, 18);
    ctx.lineTo(x, 26);
    ctx.fillText(tickLabel(t, step), x + 3, 10);
  }
  ctx.stroke();
  const range = document.getElementById("axis-range");
  range.dataset.startNs = String(Math.round(state.t0));
  range.dataset.endNs = String(Math.round(state.t1));
  range.textContent = tickLabel(state.t0, step / 10) + " \u2013 " +
    tickLabel(state.t1, step / 10) + "  (" + formatTime(state.t1 - state.t0) + " shown)";
}

function drawMinimap() {
  const w = minimap.clientWidth || width, h = 44;
  if (minimapImage === null) {
    // Busy operations per pixel column over the whole run, per kind.
    const bins = KINDS.map(() => new Float32Array(Math.ceil(w) + 1));
    const scale = w / span;
    for (let i = 0; i < opCount; ++i) {
      const a = (begin[i] - extentLo) * scale, b = (end[i] - extentLo) * scale;
      const bin = bins[kindOf[i]];
      for (let p = Math.floor(a); p <= Math.floor(b) && p < bin.length; ++p) {
        bin[p] += Math.min(b, p + 1) - Math.max(a, p);
      }
    }
    const tracks = Math.max(1, data.tracks.length);
    const off = document.createElement("canvas");
    off.width = minimap.width;
    off.height = minimap.height;
    const ctx = off.getContext("2d");
    const ratio = off.width / w;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.fillStyle = "#fbfcfd";
    ctx.fillRect(0, 0, w, h);
    for (let p = 0; p < w; ++p) {
      let y = h;
      for (let k = 0; k < KINDS.length; ++k) {
        const height = Math.min(h, (bins[k][p] / tracks) * h);
        if (height <= 0) continue;
        ctx.fillStyle = KIND_COLOURS[k];
        ctx.fillRect(p, y - height, 1, height);
        y -= height;
      }
    }
    minimapImage = off;
  }
  const ctx = minimapContext;
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.drawImage(minimapImage, 0, 0);
  const ratio = minimap.width / w;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  const x0 = Math.max(0, (state.t0 - extentLo) / span * w);
  const x1 = Math.min(w, (state.t1 - extentLo) / span * w);
  ctx.fillStyle = "rgba(29,35,48,0.10)";
  ctx.fillRect(0, 0, x0, h);
  ctx.fillRect(x1, 0, w - x1, h);
  ctx.strokeStyle = SELECT_COLOUR;
  ctx.lineWidth = 1.5;
  ctx.strokeRect(x0, 0.75, Math.max(2, x1 - x0), h - 1.5);
}

function drawNow() {
  const ctx = context;
  ctx.clearRect(0, 0, width, contentHeight);
  const step = tickStep();
  rows.forEach((row, r) => {
    if (row.type === "header") {
      ctx.fillStyle = "#e9edf2";
      ctx.fillRect(0, row.y, width, row.height);
    } else if (r % 2 === 0) {
      ctx.fillStyle = "#fafbfc";
      ctx.fillRect(0, row.y, width, row.height);
    }
  });
  // Grid lines at the axis' ticks.
  ctx.strokeStyle = "#eef1f4";
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let t = Math.ceil(state.t0 / step) * step; t <= state.t1; t += step) {
    const x = Math.round(xOf(t)) + 0.5;
    ctx.moveTo(x, 0);
    ctx.lineTo(x, contentHeight);
  }
  ctx.stroke();
  ctx.save();
  ctx.beginPath();
  ctx.rect(LABEL_WIDTH, 0, plotWidth, contentHeight);
  ctx.clip();
  for (const row of rows) {
    if (row.type === "ops") drawOpRow(row);
    else if (row.type === "waits") drawWaitRow(row);
    else if (row.type === "counter") drawCounterRow(row);
  }
  drawArrows();
  ctx.restore();
  // Labels last, over a plain column.
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, LABEL_WIDTH - 1, contentHeight);
  ctx.fillStyle = "#d8dde4";
  ctx.fillRect(LABEL_WIDTH - 1, 0, 1, contentHeight);
  ctx.textBaseline = "middle";
  for (const row of rows) {
    if (row.type === "header") {
      ctx.fillStyle = "#e9edf2";
      ctx.fillRect(0, row.y, LABEL_WIDTH - 1, row.height);
      ctx.font = "600 12px system-ui, 'DejaVu Sans', sans-serif";
      ctx.fillStyle = "#1d2330";
      ctx.fillText(row.label, 8, row.y + row.height / 2);
      continue;
    }
    ctx.font = "12px system-ui, 'DejaVu Sans', sans-serif";
    ctx.fillStyle = "#1d2330";
    ctx.fillText(row.label, 16, row.y + (row.type === "counter" ? 11 : row.height / 2));
    if (row.type === "counter") {
      ctx.font = "11px system-ui, 'DejaVu Sans', sans-serif";
      ctx.fillStyle = "#5f6b7a";
      const peak = row.counter.unit === "bytes" ? formatBytes(row.max) : String(row.max);
      ctx.fillText("peak " + peak, 16, row.y + 25);
    }
  }
  drawAxis(step);
  drawMinimap();
}
let drawPending = false;
function requestDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    drawNow();
  });
}
