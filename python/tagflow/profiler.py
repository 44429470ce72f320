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

_filename = "profile.json"


def set_config(filename="profile.json", **_ignored):
    """Where dump() writes the trace. MXNet's other options (profile_all,
    aggregate_stats, ...) are accepted and have no effect: every operation
    is recorded with everything known about it."""
    global _filename
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
