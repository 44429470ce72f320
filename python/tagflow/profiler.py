"""The engine's profiler: every operation with its device, worker, stream
and times, written as a Chrome trace (``tagflow profile`` reads it back)::

    tagflow.profiler.set_config(filename="trace.json")
    tagflow.profiler.set_state("run")
    ...                                   # the work to look at
    tagflow.nd.waitall()
    tagflow.profiler.set_state("stop")
    tagflow.profiler.dump()               # writes trace.json
"""

from ._core.profiler import clear, enabled, start, stop, write_chrome_trace  # noqa: F401

import json as _json
import os as _os
import tempfile as _tempfile
import warnings as _warnings

_filename = "profile.json"


# MXNet's options that have nothing to choose here: every operation is
# recorded with everything known about it, and dump() writes it all.
_NO_EFFECT = ("profile_all", "profile_symbolic", "profile_imperative", "profile_memory",
              "profile_api", "aggregate_stats", "continuous_dump", "dump_period",
              "profile_process")


def set_config(filename="profile.json", **options):
    """Where dump() writes the trace. MXNet's other options are accepted
    with a warning naming them (they change nothing: every operation is
    recorded with everything known about it); an option MXNet does not have
    raises ValueError."""
    global _filename
    unknown = sorted(set(options) - set(_NO_EFFECT))
    if unknown:
        raise ValueError(f"profiler.set_config: unknown option(s) {', '.join(unknown)} (known: "
                         f"filename, {', '.join(_NO_EFFECT)})")
    if options:
        _warnings.warn(f"profiler.set_config: {', '.join(sorted(options))} change nothing in "
                       "tagflow: every operation is recorded, with its device, worker, stream "
                       "and times", stacklevel=2)
    _filename = str(filename)


def set_state(state="stop"):
    """'run' starts recording, 'stop' stops it."""
    if state == "run":
        start()
    elif state == "stop":
        stop()
    else:
        raise ValueError("set_state: expected 'run' or 'stop', got %r" % (state,))


def dump(finished=True):
    """Writes what was recorded to the file set_config() named. Operations
    still running are not in it: waitall() first."""
    del finished
    write_chrome_trace(_filename)


def dumps(reset=False, format="table", sort_by="total", ascending=False):
    """What was recorded, per operation name: count and total, minimum,
    maximum and mean times in milliseconds, as MXNet's aggregate statistics
    (``format='json'``: the same as a JSON string). ``reset`` clears the
    record afterwards."""
    if format not in ("table", "json"):
        raise ValueError(f"profiler.dumps: format must be 'table' or 'json', got {format!r}")
    keys = {"total": 1, "avg": 4, "min": 2, "max": 3, "count": 0}
    if sort_by not in keys:
        raise ValueError(f"profiler.dumps: sort_by must be one of {sorted(keys)}, got {sort_by!r}")
    handle, path = _tempfile.mkstemp(suffix=".json")
    _os.close(handle)
    try:
        write_chrome_trace(path)
        with open(path) as f:
            trace = _json.load(f)
    finally:
        _os.unlink(path)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    stats = {}
    for event in events:
        if event.get("ph") != "X":
            continue
        ms = float(event.get("dur", 0)) / 1000.0
        count, total, low, high = stats.get(event["name"], (0, 0.0, float("inf"), 0.0))
        stats[event["name"]] = (count + 1, total + ms, min(low, ms), max(high, ms))
    rows = sorted(((name, c, t, lo, hi, t / c) for name, (c, t, lo, hi) in stats.items()),
                  key=lambda row: row[1 + keys[sort_by]], reverse=not ascending)
    if reset:
        clear()
    if format == "json":
        return _json.dumps({"operations": {name: {"count": c, "total_ms": t, "min_ms": lo,
                                                   "max_ms": hi, "avg_ms": avg}
                                            for name, c, t, lo, hi, avg in rows}})
    lines = ["Profile Statistics:", "",
             f"{'Name':<40}{'Total Count':>12}{'Time (ms)':>14}{'Min Time (ms)':>15}"
             f"{'Max Time (ms)':>15}{'Avg Time (ms)':>15}",
             f"{'----':<40}{'-----------':>12}{'---------':>14}{'-------------':>15}"
             f"{'-------------':>15}{'-------------':>15}"]
    for name, c, t, lo, hi, avg in rows:
        lines.append(f"{name:<40}{c:>12}{t:>14.4f}{lo:>15.4f}{hi:>15.4f}{avg:>15.4f}")
    return "\n".join(lines) + "\n"
