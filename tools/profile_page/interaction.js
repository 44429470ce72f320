// The profile page's answers to the reader: the view, what is under the pointer, details,
// search and the critical path, pointer and keys, the figures, and the start (the last of
// three files: data.js says how they are joined).

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
