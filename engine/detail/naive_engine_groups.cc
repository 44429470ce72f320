// The naive engine's launch groups (Note [Launch groups] in
// engine/engine.h): a group runs as one operation that launches every part,
// then waits for each part's device work.

#include <memory>
#include <optional>
#include <vector>

#include "engine/detail/launch_group.h"
#include "engine/detail/naive_engine.h"

namespace tagflow::detail {

void NaiveEngine::push_group(LaunchGroup group) {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("push_group");
  check_launch_group(group);
  if (group.parts.empty()) return;
  for (const Operation& part : group.parts) check_context(part.ctx);
  const Operation& first = group.parts[0];
  Operation whole{
      .name = first.name, .ctx = first.ctx, .priority = first.priority, .queue = first.queue};
  for (const Operation& part : group.parts) {
    for (VarHandle v : part.reads) whole.reads.push_back(v);
    for (VarHandle v : part.writes) whole.writes.push_back(v);
  }
  whole.fn = [this, group = std::make_shared<LaunchGroup>(std::move(group))](const RunContext& rc) {
    launch_group(*group, rc);
  };
  push(std::move(whole));
}

void NaiveEngine::launch_group(LaunchGroup& group, const RunContext& first) {
  // Note [Launch groups]: every part launched before any device work is
  // awaited. run() awaits the first part's, on first.stream, after this.
  std::vector<RunContext> contexts{first};
  contexts.reserve(group.parts.size());
  for (std::size_t i = 1; i < group.parts.size(); ++i) {
    const Operation& part = group.parts[i];
    contexts.push_back({part.ctx, stream_for(part.ctx, part.queue), 0});
  }
  if (group.together) {
    group.together(contexts);
  } else {
    for (std::size_t i = 0; i < group.parts.size(); ++i) {
      std::optional<ScopedDevice> on_device;  // the first part's is current already
      if (i > 0 && contexts[i].stream != nullptr)
        on_device.emplace(*backend_, contexts[i].ctx.index);
      group.parts[i].fn.body()(contexts[i], nullptr);
    }
  }
  for (std::size_t i = 1; i < contexts.size(); ++i) {
    Stream* stream = contexts[i].stream;
    if (stream == nullptr) continue;
    const std::uint64_t mark = stream->record();
    await_device(*stream, mark);
    if (std::exception_ptr device_error = stream->error_at(mark)) [[unlikely]]
      std::rethrow_exception(device_error);
  }
}

}  // namespace tagflow::detail
