#pragma once
// `tagflow profile --html`: the page a person reads a trace on, in a browser,
// offline.
//
// Note [The profile page]
// One self-contained HTML file: its style, its script and the trace's data
// are inside it, and it fetches nothing. The data is a JSON block of
// columns (one array per field, times in integer nanoseconds from the
// trace's start), which the script draws on a canvas:
// - a row per track (tools/profile_report.h's track_of: a CPU device's
//   worker, a GPU's compute and copy stream or worker), grouped by device,
//   each device followed by its counters (memory in use; operations ready
//   but not started, from each operation's ready and start times), and a
//   row per host thread with its waits;
// - an operation's busy interval as a box coloured by its kind (compute,
//   copy, communication); an asynchronous operation's time in flight after
//   its closure returned as a lighter tail; what is narrower than a pixel
//   is summed per pixel column and drawn with the density it covers, so
//   nothing disappears at any zoom;
// - arrows from an operation's producers and to its consumers (the flows:
//   the last writer of each variable it read) when it is selected, and the
//   critical path highlighted on request.
// The figures are the tables of figure_tables(), written into the page as
// HTML by the same code that prints them as text, so the page and the text
// report agree to the last digit.
// The script exposes `window.tagflowPage` (the view, selection, hit boxes)
// for tests that drive the page in a browser.

#include <filesystem>
#include <string>
#include <vector>

#include "engine/profiler.h"
#include "tools/profile_report.h"

namespace tagflow::tools {

/// What a page says besides its trace.
struct PageText {
  std::string title;  ///< names the trace (its file name)
  std::string note;   ///< a line under the headline (how traces were merged), or empty
  /// The figures; empty for figure_tables(summary).
  std::vector<FigureTable> tables;
};

/// The page of Note [The profile page] for `trace` and its `summary`.
std::string profile_page(const profiler::Trace& trace, const ProfileSummary& summary,
                         const PageText& text);

/// Writes profile_page(...) to `path`; throws tagflow::Error when it cannot.
void write_profile_page(const profiler::Trace& trace, const ProfileSummary& summary,
                        const PageText& text, const std::filesystem::path& path);

}  // namespace tagflow::tools
