// The profile page's script (Note [The profile page], tools/profile_page.h):
// draws the trace's data on canvases and answers the reader's clicks. Plain
// JavaScript, no library, nothing fetched.
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("tagflow-data").textContent);
  const KINDS = ["compute", "copy", "communication"];
  const LABEL_WIDTH = 200;
  const ROW_HEIGHT = 22;
  const HEADER_HEIGHT = 20;
  const COUNTER_HEIGHT = 36;
  const MIN_RANGE_NS = 50;

  // ---- The data, as typed arrays -------------------------------------------
  const ops = data.ops;
  const opCount = ops.seq.length;
  const column = (name) => Float64Array.from(ops[name]);
  const begin = column("begin"), end = column("end"), ret = column("ret");
  const pushed = column("push"), ready = column("ready"), started = column("start");
  const stopped = column("stop");
  const kindOf = Int8Array.from(ops.kind), trackOf = Int32Array.from(ops.track);
  const nameOf = Int32Array.from(ops.name), deviceOf = Int32Array.from(ops.device);
  const waits = data.waits;
  const waitCount = waits.begin.length;
  const waitBegin = Float64Array.from(waits.begin), waitEnd = Float64Array.from(waits.end);
  // The times the page covers, from where the text report's span starts
  // (negative for waits and allocations before it).
  const extentLo = data.extent_begin_ns;
  const span = Math.max(1, data.extent_end_ns - extentLo);

  // Producers and consumers of each operation (the flows), as lists.
  const producersOf = Array.from({ length: opCount }, () => []);
  const consumersOf = Array.from({ length: opCount }, () => []);
  for (let f = 0; f < data.flows.from.length; ++f) {
    producersOf[data.flows.to[f]].push(data.flows.from[f]);
    consumersOf[data.flows.from[f]].push(data.flows.to[f]);
  }
  const waitsOn = Array.from({ length: opCount }, () => []);
  for (let w = 0; w < waitCount; ++w) {
    if (waits.for[w] >= 0) waitsOn[waits.for[w]].push(w);
  }
  const criticalSet = new Set(data.critical);

  // ---- Rows ------------------------------------------------------------------
  // Host threads first, then each device: its tracks, then its counters.
  const rows = [];
  const rowOfTrack = new Array(data.tracks.length);
  function sortedBy(items, key) {
    const order = Int32Array.from(items);
    order.sort((a, b) => key[a] - key[b]);
    return order;
  }
  // A row's items by start, with the latest end so far at each: the first
  // item that can reach a time t is the first whose running end is >= t.
  function intervalRow(row, items, beginOf, endOf) {
    row.items = sortedBy(items, beginOf);
    row.begins = Float64Array.from(row.items, (i) => beginOf[i]);
    row.reach = new Float64Array(row.items.length);
    let reach = -Infinity;
    row.items.forEach((i, n) => {
      reach = Math.max(reach, endOf[i]);
      row.reach[n] = reach;
    });
    return row;
  }
  if (data.threads.length > 0) {
    rows.push({ type: "header", label: "host" });
    const byThread = data.threads.map(() => []);
    for (let w = 0; w < waitCount; ++w) byThread[waits.thread[w]].push(w);
    data.threads.forEach((label, t) => {
      rows.push(intervalRow({ type: "waits", label }, byThread[t], waitBegin, waitEnd));
    });
  }
  const byTrack = data.tracks.map(() => []);
  for (let i = 0; i < opCount; ++i) byTrack[trackOf[i]].push(i);
  data.devices.forEach((device, d) => {
    rows.push({ type: "header", label: device, device: d });
    data.tracks.forEach((track, t) => {
      if (track.device !== d) return;
      rowOfTrack[t] = rows.length;
      rows.push(intervalRow({ type: "ops", label: track.name }, byTrack[t], begin, end));
    });
    for (const counter of data.counters) {
      if (counter.device !== d) continue;
      let max = 0;
      for (const v of counter.v) max = Math.max(max, v);
      rows.push({
        type: "counter", label: counter.name, counter, max,
        t: Float64Array.from(counter.t), v: Float64Array.from(counter.v),
      });
    }
  });
  let contentHeight = 0;
  for (const row of rows) {
    row.y = contentHeight;
    row.height = row.type === "header" ? HEADER_HEIGHT
      : row.type === "counter" ? COUNTER_HEIGHT : ROW_HEIGHT;
    contentHeight += row.height;
  }

  // ---- State -----------------------------------------------------------------
  const state = {
    t0: extentLo, t1: extentLo + span,
    visible: { compute: true, copy: true, communication: true, wait: true, allocation: true },
    selected: -1,        // an operation's index
    highlight: null,     // a Set of operation indices, or null
    critical: false,
    query: "",
    matches: [],
    nextMatch: 0,
    pointer: null,       // the pointer's time over the timeline, for keyboard zoom
  };

  // ---- Formatting -------------------------------------------------------------
  const UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "\u00b5s"], [1, "ns"]];
  function unitFor(ns) {
    const a = Math.abs(ns);
    for (const [scale, name] of UNITS) if (a >= scale) return [scale, name];
    return [1, "ns"];
  }
  function formatTime(ns) {
    if (Math.abs(ns) < 0.5) return "0 ns";  // no "-0"
    const [scale, name] = unitFor(ns);
    const value = ns / scale;
    const digits = Math.abs(value) >= 100 ? 1 : Math.abs(value) >= 10 ? 2 : 3;
    return value.toFixed(scale === 1 ? 0 : digits) + " " + name;
  }
  function formatBytes(bytes) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let u = 0;
    while (Math.abs(bytes) >= 1024 && u < units.length - 1) { bytes /= 1024; ++u; }
    return (u === 0 ? bytes.toFixed(0) : bytes.toFixed(1)) + " " + units[u];
  }
  // Seqs count per process: in a trace of several, "#1:42" is process 1's 42.
  const merged = data.processes.length > 0;
  function seqLabel(i) {
    return merged ? ops.process[i] + ":" + ops.seq[i] : String(ops.seq[i]);
  }
  function opLabel(i) {
    return data.names[nameOf[i]] + " #" + seqLabel(i);
  }

  // ---- Colours ---------------------------------------------------------------
  const HUES = { 0: 212, 1: 30, 2: 120 };
  const colourCache = new Map();
  function colourOf(i) {
    const key = nameOf[i] * 3 + kindOf[i];
    let colour = colourCache.get(key);
    if (colour === undefined) {
      // Names differ in lightness and a little in hue, kinds in hue.
      const name = data.names[nameOf[i]];
      let hash = 2166136261;
      for (let c = 0; c < name.length; ++c) hash = Math.imul(hash ^ name.charCodeAt(c), 16777619);
      hash >>>= 0;
      const hue = HUES[kindOf[i]] + (hash % 17) - 8;
      const light = 38 + ((hash >>> 8) % 22);
      colour = "hsl(" + hue + ",55%," + light + "%)";
      colourCache.set(key, colour);
    }
    return colour;
  }
  const style = getComputedStyle(document.documentElement);
  const KIND_COLOURS = KINDS.map((k) => style.getPropertyValue("--" + k).trim());
  const WAIT_COLOUR = style.getPropertyValue("--wait").trim();
  const MEMORY_COLOUR = style.getPropertyValue("--allocation").trim();
  const QUEUE_COLOUR = style.getPropertyValue("--queue").trim();
  const SELECT_COLOUR = style.getPropertyValue("--select").trim();

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

  // ---- The view ------------------------------------------------------------------
  function setView(t0, t1) {
    let range = Math.max(MIN_RANGE_NS, t1 - t0);
    const margin = span * 0.02;
    range = Math.min(range, span + 2 * margin);
    const centre = (t0 + t1) / 2;
    let a = centre - range / 2;
    a = Math.max(extentLo - margin, Math.min(a, extentLo + span + margin - range));
    state.t0 = a;
    state.t1 = a + range;
    requestDraw();
  }
  function resetView() {
    const margin = span * 0.01;
    setView(extentLo - margin, extentLo + span + margin);
  }
  function zoom(factor, at) {
    const t = at === undefined || at === null ? (state.t0 + state.t1) / 2 : at;
    setView(t - (t - state.t0) * factor, t + (state.t1 - t) * factor);
  }
  function pan(fraction) {
    const shift = (state.t1 - state.t0) * fraction;
    setView(state.t0 + shift, state.t1 + shift);
  }
  function scrollToRow(row) {
    const top = row.y, bottom = row.y + row.height;
    if (top < timeline.scrollTop || bottom > timeline.scrollTop + timeline.clientHeight) {
      timeline.scrollTop = Math.max(0, top - timeline.clientHeight / 2);
    }
  }
  function zoomToOp(i) {
    const length = Math.max(end[i] - begin[i], 1);
    const range = Math.max(length / 0.3, MIN_RANGE_NS);
    const centre = (begin[i] + end[i]) / 2;
    setView(centre - range / 2, centre + range / 2);
    scrollToRow(rows[rowOfTrack[trackOf[i]]]);
    const box = timeline.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) timeline.scrollIntoView({ block: "center" });
    drawNow();
  }

  // ---- Finding what is under the pointer --------------------------------------------
  function rowAt(y) {
    for (const row of rows) if (y >= row.y && y < row.y + row.height) return row;
    return null;
  }
  function hit(x, y) {
    const row = rowAt(y);
    if (row === null || x < LABEL_WIDTH || (row.type !== "ops" && row.type !== "waits")) return null;
    const isOps = row.type === "ops";
    if (!isOps && !state.visible.wait) return null;
    const t = timeAt(x), tolerance = 3 * (state.t1 - state.t0) / plotWidth;
    const starts = isOps ? begin : waitBegin, ends = isOps ? end : waitEnd;
    let best = -1, bestDistance = Infinity;
    for (let n = lowerBound(row.reach, t - tolerance); n < row.items.length; ++n) {
      const i = row.items[n];
      if (starts[i] > t + tolerance) break;
      if (isOps && !visibleOp(i)) continue;
      const distance = t < starts[i] ? starts[i] - t : t > ends[i] ? t - ends[i] : 0;
      if (distance > tolerance) continue;
      if (distance < bestDistance ||
          (distance === bestDistance && ends[i] - starts[i] < ends[best] - starts[best])) {
        best = i;
        bestDistance = distance;
      }
    }
    return best < 0 ? null : { type: isOps ? "op" : "wait", index: best };
  }

  // ---- Details ----------------------------------------------------------------------
  const details = {
    name: document.getElementById("details-name"),
    hint: document.getElementById("details-hint"),
    fields: document.getElementById("details-fields"),
    producers: document.getElementById("details-producers"),
    consumers: document.getElementById("details-consumers"),
    waits: document.getElementById("details-waits"),
  };
  function listItem(list, i, text) {
    const li = document.createElement("li");
    li.dataset.op = String(i);
    li.textContent = text;
    li.addEventListener("click", () => select(i, true));
    list.appendChild(li);
  }
  function showDetails() {
    const i = state.selected;
    for (const list of [details.fields, details.producers, details.consumers, details.waits]) {
      list.replaceChildren();
    }
    if (i < 0) {
      details.name.textContent = "Nothing selected";
      details.hint.hidden = false;
      return;
    }
    details.hint.hidden = true;
    details.name.textContent = opLabel(i);
    const track = data.tracks[trackOf[i]].name;
    const fields = [
      ["device", data.devices[deviceOf[i]]],
      ["track", track],
      ["queue", ops.queue[i] ? "copy" : "compute"],
      ["kind", KINDS[kindOf[i]]],
      ["priority", String(ops.prio[i])],
      ["pushed", formatTime(pushed[i])],
      ["ready", formatTime(ready[i]) + " (waited " + formatTime(ready[i] - pushed[i]) + ")"],
      ["started", formatTime(started[i]) + " (queued " + formatTime(started[i] - ready[i]) + ")"],
      ["ended", formatTime(stopped[i])],
    ];
    if (ret[i] >= 0) {
      fields.push(["returned", formatTime(ret[i]) + " (then in flight " +
                   formatTime(stopped[i] - ret[i]) + ")"]);
    }
    if (begin[i] !== started[i] || end[i] !== stopped[i]) {
      fields.push(["device work", formatTime(begin[i]) + " \u2013 " + formatTime(end[i])]);
    }
    fields.push(["busy", formatTime(end[i] - begin[i])]);
    if (ops.failed[i]) fields.push(["failed", "yes: it threw, or read a failed result"]);
    if (criticalSet.has(i)) fields.push(["critical path", "on it"]);
    for (const [term, value] of fields) {
      const dt = document.createElement("dt");
      dt.textContent = term;
      const dd = document.createElement("dd");
      dd.textContent = value;
      details.fields.append(dt, dd);
    }
    for (const p of producersOf[i]) {
      listItem(details.producers, p, opLabel(p) + " on " + data.devices[deviceOf[p]] +
               ", ended " + formatTime(end[p]));
    }
    for (const c of consumersOf[i]) {
      listItem(details.consumers, c, opLabel(c) + " on " + data.devices[deviceOf[c]] +
               ", started " + formatTime(begin[c]));
    }
    for (const w of waitsOn[i]) {
      const li = document.createElement("li");
      li.textContent = waits.what[w] + " on " + data.threads[waits.thread[w]] + ", " +
        formatTime(waitEnd[w] - waitBegin[w]);
      details.waits.appendChild(li);
    }
    for (const list of [details.producers, details.consumers, details.waits]) {
      if (list.children.length === 0) {
        const li = document.createElement("li");
        li.className = "none";
        li.textContent = "none recorded";
        list.appendChild(li);
      }
    }
  }
  function select(i, reveal) {
    state.selected = i;
    showDetails();
    try {  // some browsers refuse it for pages opened from disk
      const here = window.location.pathname + window.location.search;
      window.history.replaceState(null, "", i >= 0 ? here + "#seq=" + seqLabel(i) : here);
    } catch (error) {
      // the address is a convenience: selection works without it
    }
    if (reveal && i >= 0) {
      const b = begin[i], e = end[i];
      if (b < state.t0 || e > state.t1) zoomToOp(i);
      scrollToRow(rows[rowOfTrack[trackOf[i]]]);
    }
    requestDraw();
  }

  // ---- Highlighting: search and the critical path -----------------------------------
  const searchInput = document.getElementById("search");
  const searchCount = document.getElementById("search-count");
  const criticalButton = document.getElementById("critical-path-toggle");
  function setHighlight() {
    if (state.query !== "") {
      state.highlight = new Set(state.matches);
    } else if (state.critical) {
      state.highlight = criticalSet;
    } else {
      state.highlight = null;
    }
    criticalButton.setAttribute("aria-pressed", String(state.critical));
    requestDraw();
  }
  // A name in quotes matches exactly; other text, any name holding it.
  function search(query) {
    state.query = query.trim().toLowerCase();
    state.matches = [];
    state.nextMatch = 0;
    if (state.query !== "") {
      const quoted = /^"(.*)"$/.exec(query.trim());
      const names = new Set();
      data.names.forEach((name, n) => {
        if (quoted !== null ? name === quoted[1] : name.toLowerCase().includes(state.query)) {
          names.add(n);
        }
      });
      for (let i = 0; i < opCount; ++i) if (names.has(nameOf[i])) state.matches.push(i);
      state.matches.sort((a, b) => begin[a] - begin[b]);
      searchCount.textContent = state.matches.length + (state.matches.length === 1 ? " match" : " matches");
    } else {
      searchCount.textContent = "";
    }
    setHighlight();
  }
  searchInput.addEventListener("input", () => search(searchInput.value));
  searchInput.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && state.matches.length > 0) {
      const i = state.matches[state.nextMatch++ % state.matches.length];
      select(i, false);
      zoomToOp(i);
    } else if (event.key === "Escape") {
      searchInput.value = "";
      search("");
      searchInput.blur();
    }
  });
  criticalButton.addEventListener("click", () => {
    state.critical = !state.critical;
    if (state.critical && state.query !== "") {
      searchInput.value = "";
      search("");
    }
    setHighlight();
  });
  document.getElementById("reset-view").addEventListener("click", resetView);
  for (const item of document.querySelectorAll("#legend .legend-item")) {
    const box = item.querySelector("input");
    box.addEventListener("change", () => {
      state.visible[item.dataset.kind] = box.checked;
      requestDraw();
    });
  }

  // ---- Pointer and keys ----------------------------------------------------------------
  function localPoint(event) {
    const box = canvas.getBoundingClientRect();
    return { x: event.clientX - box.left, y: event.clientY - box.top };
  }
  let drag = null;
  canvas.addEventListener("mousedown", (event) => {
    if (event.button !== 0) return;
    const p = localPoint(event);
    drag = { x: p.x, y: p.y, t0: state.t0, t1: state.t1, moved: false };
    if (document.activeElement === searchInput) searchInput.blur();  // keys zoom again
    event.preventDefault();
  });
  function endDrags() {
    drag = null;
    minimapDrag = false;
    canvas.classList.remove("dragging");
  }
  window.addEventListener("blur", endDrags);
  window.addEventListener("mousemove", (event) => {
    if ((event.buttons & 1) === 0 && (drag !== null || minimapDrag)) {
      endDrags();  // the release happened where the page did not see it
      return;
    }
    if (drag !== null) {
      const p = localPoint(event);
      const dx = p.x - drag.x;
      if (Math.abs(dx) > 3 || Math.abs(p.y - drag.y) > 3) drag.moved = true;
      if (drag.moved) {
        canvas.classList.add("dragging");
        const shift = -dx * (drag.t1 - drag.t0) / plotWidth;
        setView(drag.t0 + shift, drag.t1 + shift);
      }
    }
  });
  window.addEventListener("mouseup", (event) => {
    if (drag === null) return;
    const wasClick = !drag.moved;
    drag = null;
    canvas.classList.remove("dragging");
    if (!wasClick) return;
    const p = localPoint(event);
    const found = hit(p.x, p.y);
    if (found === null) {
      select(-1, false);
    } else if (found.type === "op") {
      select(found.index, false);
    } else if (waits.for[found.index] >= 0) {
      select(waits.for[found.index], true);
    }
  });
  canvas.addEventListener("mousemove", (event) => {
    const p = localPoint(event);
    state.pointer = p.x >= LABEL_WIDTH ? timeAt(p.x) : null;
    const found = drag === null ? hit(p.x, p.y) : null;
    if (found === null) {
      tooltip.hidden = true;
      return;
    }
    if (found.type === "op") {
      const i = found.index;
      tooltip.textContent = opLabel(i) + " \u00b7 " + formatTime(end[i] - begin[i]) + " \u00b7 " +
        data.devices[deviceOf[i]];
    } else {
      const w = found.index;
      tooltip.textContent = waits.what[w] + " for " + waits.label[w] + " \u00b7 " +
        formatTime(waitEnd[w] - waitBegin[w]);
    }
    const column = canvas.parentElement.parentElement.getBoundingClientRect();
    tooltip.style.left = Math.min(event.clientX - column.left + 12, column.width - 260) + "px";
    tooltip.style.top = (event.clientY - column.top + 14) + "px";
    tooltip.hidden = false;
  });
  canvas.addEventListener("mouseleave", () => {
    tooltip.hidden = true;
    state.pointer = null;
  });
  canvas.addEventListener("wheel", (event) => {
    if (localPoint(event).x < LABEL_WIDTH) return;  // over the labels: scroll the rows
    event.preventDefault();
    const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1;
    const dx = event.deltaX * unit, dy = event.deltaY * unit;
    if (event.shiftKey || Math.abs(dx) > Math.abs(dy)) {
      pan((event.shiftKey ? dy || dx : dx) / plotWidth);
      return;
    }
    const p = localPoint(event);
    zoom(Math.exp(Math.max(-3, Math.min(3, dy * 0.0015))), p.x >= LABEL_WIDTH ? timeAt(p.x) : null);
  }, { passive: false });

  function minimapTime(event) {
    const box = minimap.getBoundingClientRect();
    return extentLo + (event.clientX - box.left) / box.width * span;
  }
  let minimapDrag = false;
  function centreOn(t) {
    const half = (state.t1 - state.t0) / 2;
    setView(t - half, t + half);
  }
  minimap.addEventListener("mousedown", (event) => {
    minimapDrag = true;
    centreOn(minimapTime(event));
    event.preventDefault();
  });
  window.addEventListener("mousemove", (event) => {
    if (minimapDrag) centreOn(minimapTime(event));
  });
  window.addEventListener("mouseup", () => { minimapDrag = false; });

  document.addEventListener("keydown", (event) => {
    if (event.target === searchInput || event.ctrlKey || event.metaKey || event.altKey) return;
    switch (event.key) {
      case "w": case "W": zoom(0.8, state.pointer); break;
      case "s": case "S": zoom(1.25, state.pointer); break;
      case "a": case "A": pan(-0.15); break;
      case "d": case "D": pan(0.15); break;
      case "0": resetView(); break;
      case "f": case "F": if (state.selected >= 0) zoomToOp(state.selected); break;
      case "/": searchInput.focus(); break;
      case "Escape":
        select(-1, false);
        state.critical = false;
        setHighlight();
        break;
      default: return;
    }
    event.preventDefault();
  });

  // ---- Figures ---------------------------------------------------------------------------
  for (const row of document.querySelectorAll("#figures tr[data-op]")) {
    row.addEventListener("click", () => select(Number(row.dataset.op), true));
  }
  for (const row of document.querySelectorAll("#figures tr[data-name]")) {
    row.addEventListener("click", () => {
      searchInput.value = '"' + row.dataset.name + '"';
      search(searchInput.value);
      timeline.scrollIntoView({ block: "nearest" });
    });
  }
  const bars = document.getElementById("breakdown-bars");
  if (bars !== null) {
    for (const b of data.breakdown) {
      const spanUs = Math.max(data.span_us, 1e-9);
      const alone = Math.max(0, data.span_us - b.compute_us - b.idle_us);
      const row = document.createElement("div");
      row.className = "bar-row";
      const label = document.createElement("span");
      label.className = "label";
      label.textContent = b.device;
      const bar = document.createElement("div");
      bar.className = "bar";
      for (const [cls, value, title] of [["compute", b.compute_us, "compute"],
                                          ["alone", alone, "copies and communication alone"],
                                          ["idle", b.idle_us, "idle"]]) {
        const part = document.createElement("span");
        part.className = cls === "compute" ? "kind-compute" : cls;
        part.style.width = (100 * value / spanUs).toFixed(3) + "%";
        part.title = title + ": " + (100 * value / spanUs).toFixed(1) + "%";
        bar.appendChild(part);
      }
      const note = document.createElement("span");
      note.className = "note";
      const other = b.copy_us + b.communication_us;
      note.textContent = other > 0
        ? (100 * b.overlapped_us / other).toFixed(0) + "% of copies and communication ran under compute"
        : "no copies or communication";
      row.append(label, bar, note);
      bars.appendChild(row);
    }
  }
  // The text report's figures: its span, the devices that ran operations.
  const deviceCount = data.operation_devices;
  document.getElementById("headline").textContent = opCount === 0
    ? "The trace holds no operation." : opCount + " operations on " + deviceCount +
    (deviceCount === 1 ? " device" : " devices") + " over " + formatTime(data.span_us * 1000) +
    "; " + waitCount + " host waits" + (data.critical.length > 0
      ? "; the critical path holds " + data.critical.length + " operations." : ".");
  if (data.critical.length === 0) {
    criticalButton.disabled = true;
    criticalButton.title = "No critical path on this page";
  }

  // ---- Start ------------------------------------------------------------------------------
  layout();
  const margin = span * 0.01;
  state.t0 = extentLo - margin;
  state.t1 = extentLo + span + margin;
  drawNow();
  window.addEventListener("resize", () => {
    layout();
    drawNow();
  });

  // A link to an operation: page.html#seq=123 (the seq of the text report)
  // selects it on opening; selecting one puts its seq in the address.
  const linked = /^#seq=(?:(\d+):)?(\d+)$/.exec(window.location.hash);
  if (linked !== null) {
    const process = linked[1] === undefined ? 0 : Number(linked[1]);
    const seq = Number(linked[2]);
    for (let i = 0; i < opCount; ++i) {
      if (ops.seq[i] === seq && ops.process[i] === process) {
        select(i, false);
        zoomToOp(i);
        break;
      }
    }
  }

  // For tests and scripts that drive the page (Note [The profile page]).
  window.tagflowPage = {
    ready: true,
    firstPaintMs: performance.now(),
    view: () => ({ startNs: state.t0, endNs: state.t1 }),
    opCount: () => opCount,
    opName: (i) => data.names[nameOf[i]],
    findOps: (text) => {
      const out = [];
      for (let i = 0; i < opCount; ++i) if (data.names[nameOf[i]].includes(text)) out.push(i);
      return out;
    },
    producers: (i) => producersOf[i].slice(),
    consumers: (i) => consumersOf[i].slice(),
    opsWithProducers: () => {
      const out = [];
      for (let i = 0; i < opCount; ++i) if (producersOf[i].length > 0) out.push(i);
      return out;
    },
    zoomToOp,
    opScreenRect: (i) => {
      const x0 = Math.max(xOf(begin[i]), LABEL_WIDTH), x1 = Math.min(xOf(end[i]), width);
      if (x1 <= x0) return null;
      const box = canvas.getBoundingClientRect();
      const row = rows[rowOfTrack[trackOf[i]]];
      return { x: box.left + x0, y: box.top + row.y + 3, width: x1 - x0, height: row.height - 6 };
    },
    selected: () => state.selected,
    select: (i) => select(i, true),
    criticalPath: () => data.critical.slice(),
    highlighted: () => (state.highlight === null ? [] : Array.from(state.highlight)),
    resetView: () => {
      resetView();
      drawNow();
    },
    benchZoom: (steps) => {
      const times = [];
      for (let n = 0; n < steps; ++n) {
        zoom(0.8);
        const t = performance.now();
        drawNow();
        times.push(performance.now() - t);
      }
      return times;
    },
  };
})();
