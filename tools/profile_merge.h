#pragma once
// Traces of several processes on one timeline: the ranks of a distributed
// run (`tagflow profile trace.json` finds trace.rank0.json, trace.rank1.json,
// ...), or two runs side by side (`tagflow profile A --compare B --html`).

#include <filesystem>
#include <string>
#include <vector>

#include "engine/profiler.h"

namespace tagflow::tools {

/// How the traces were put on one clock.
enum class Alignment {
  /// Processes of one run: on the host's steady clock when they share one
  /// host, else at their sync marks, else at their first events (Note
  /// [Aligning traces]).
  kSameRun,
  /// Different runs: each from its first event.
  kStarts,
};

struct MergedTrace {
  profiler::Trace trace;  ///< processes numbered in the order given, on the first one's clock
  std::string alignment;  ///< how, in words
};

/// `traces` as one, process i named `names[i]`. Throws tagflow::Error when
/// the two lists differ in length or are empty.
MergedTrace merge_traces(std::vector<profiler::Trace> traces, const std::vector<std::string>& names,
                         Alignment alignment);

/// The trace files `file` stands for: itself when it exists; otherwise,
/// when `tagflow train --profile FILE` wrote one per process, FILE.rank0.json
/// (FILE's extension replaced), FILE.rank1.json, ... in rank order. Throws
/// tagflow::Error naming what was looked for when there is neither.
std::vector<std::filesystem::path> trace_files(const std::filesystem::path& file);

/// The file `tagflow train --profile FILE` writes in process `rank` of
/// `ranks`: FILE itself in a run of one process, else FILE.rankN.json.
std::filesystem::path rank_trace_file(const std::filesystem::path& file, int rank, int ranks);

}  // namespace tagflow::tools
