#include "tools/progress_line.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace tagflow::tools {

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

// Note [How often the progress line waits]
// The training loop keeps the loss on the device and waits once per epoch.
// The progress line shows the running mean loss, which costs a wait for the
// batches in flight each time it is read, so the line is redrawn (and the
// loss read) at most every kRedrawSeconds, not after every batch.
constexpr double kRedrawSeconds = 0.5;

}  // namespace

std::string format_progress(const Progress& p) {
  constexpr std::size_t kColumns = 99;  // under 100
  constexpr std::size_t kMaxBar = 30;
  constexpr std::size_t kMinBar = 10;
  const std::string head = p.epochs > 0
                               ? fmt::format("epoch {}/{} {:<5} ", p.epoch, p.epochs, p.phase)
                               : fmt::format("{:<5} ", p.phase);
  std::string tail = fmt::format(" {:>5}/{}", p.done, p.total);
  if (!(p.loss < 0)) {  // NaN too: a diverging loss is shown
    tail +=
        p.loss < 1000 ? fmt::format("  loss {:.4f}", p.loss) : fmt::format("  loss {:.3e}", p.loss);
  }
  if (p.images_per_second > 0) tail += fmt::format("  {:.0f} images/s", p.images_per_second);
  if (p.seconds_left >= 0) tail += fmt::format("  {} left", clock_text(p.seconds_left));
  const std::size_t room = kColumns - std::min(kColumns, head.size() + tail.size() + 2);
  const std::size_t width = std::clamp(room, kMinBar, kMaxBar);
  const std::int64_t total = std::max<std::int64_t>(p.total, 1);
  const auto filled = static_cast<std::size_t>(
      static_cast<double>(width) * static_cast<double>(std::clamp<std::int64_t>(p.done, 0, total)) /
      static_cast<double>(total));
  std::string bar(filled, '=');
  if (filled < width) bar += '>';
  bar.resize(width, ' ');
  std::string line = fmt::format("{}[{}]{}", head, bar, tail);
  if (line.size() > kColumns) line.resize(kColumns);
  return line;
}

ProgressLine::ProgressLine(bool enabled, int epochs) : enabled_(enabled) {
  progress_.epochs = epochs;
}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::start(int epoch, const char* phase, std::int64_t total) {
  progress_.epoch = epoch;
  progress_.phase = phase;
  progress_.total = total;
  start_ = last_draw_ = Clock::now();
}

void ProgressLine::update(std::int64_t done, std::int64_t images,
                          const std::function<double()>& loss) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (std::chrono::duration<double>(now - last_draw_).count() < kRedrawSeconds) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  progress_.done = done;
  progress_.loss = loss ? loss() : -1;
  progress_.images_per_second = elapsed > 0 ? static_cast<double>(images) / elapsed : 0;
  progress_.seconds_left =
      done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(progress_.total - done)
               : -1;
  const std::string line = format_progress(progress_);
  // Pads over what is left of a longer line drawn before.
  fmt::print(stderr, "\r{:<{}}", line, std::max(line.size(), width_));
  std::fflush(stderr);
  width_ = line.size();
}

void ProgressLine::clear() {
  if (width_ == 0) return;
  fmt::print(stderr, "\r{:{}}\r", "", width_);
  std::fflush(stderr);
  width_ = 0;
}

}  // namespace tagflow::tools
