// The profile page's script (Note [The profile page], tools/profile_page.h), in three
// files that tools/profile_page.cc joins inside one function scope, in this order:
//   data.js         the trace's data as typed arrays, the rows, the view's state, formatting
//                   and colours;
//   drawing.js      the canvases and everything drawn on them;
//   interaction.js  the view, what is under the pointer, details, search, keys, the figures'
//                   links, and the start.
// Plain JavaScript, no library, nothing fetched.

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
