#pragma once
// The progress line of `tagflow train` on stderr: what it shows, how it is
// drawn (one line, under 100 columns, redrawn in place) and how often.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace tagflow::tools {

/// What the progress line of `tagflow train` shows.
struct Progress {
  int epoch = 1;  ///< from 1
  int epochs = 1;
  std::string phase = "train";  ///< "train" or "test"
  std::int64_t done = 0;        ///< batches
  std::int64_t total = 0;
  double loss = -1;  ///< running mean loss; negative: not shown
  double images_per_second = 0;
  double seconds_left = -1;  ///< in the phase; negative: not known yet
};

/// The progress line, under 100 columns, e.g.
/// "epoch 3/10 train [=======>      ]    58/235 loss 0.4312, 23785 images/s, 0:05 left".
std::string format_progress(const Progress& progress);

/// The progress line on stderr, redrawn in place (format_progress).
class ProgressLine {
 public:
  /// Draws nothing unless `enabled` (stderr is a terminal, and asked for).
  ProgressLine(bool enabled, int epochs);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// Starts `phase` ("train", "test") of `epoch` (from 1), of `total` batches.
  void start(int epoch, const char* phase, std::int64_t total);
  /// After `done` batches of the phase, `images` in all. Redraws when the
  /// last drawing is old enough (Note [How often the progress line waits]);
  /// only then calls `loss` (the running mean loss, a wait for the device;
  /// null: none shown).
  void update(std::int64_t done, std::int64_t images, const std::function<double()>& loss);
  /// Removes the line, if one is drawn (before a line of results).
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  Progress progress_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_ = start_;
  std::size_t width_ = 0;  ///< of the line on the screen; 0: none
};

}  // namespace tagflow::tools
