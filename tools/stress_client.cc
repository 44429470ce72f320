#include "tools/stress_client.h"

#include <algorithm>
#include <chrono>
#include <string_view>

#include <fmt/format.h>

namespace tagflow::tools::stress {

void execute(const StepRun& run) {
  const Step& s = *run.step;
  for (int i = 0; i < run.num_inputs; ++i)
    run.inputs[static_cast<std::size_t>(i)]->in_flight.fetch_add(1);
  run.out->in_flight.fetch_add(1);
  std::array<Value, 3> values;
  for (int i = 0; i < run.num_inputs; ++i) {
    values[static_cast<std::size_t>(i)] = run.inputs[static_cast<std::size_t>(i)]->value;
  }
  const Value result = s.kind == StepKind::kCopy
                           ? values[0]
                           : mix_values(s, values.data(), run.num_inputs,
                                        s.read_modify_write ? &run.out->value : nullptr);
  if (s.id != run.shared->options.sabotage_step) {
    // One word, then the other: a conflicting step running meanwhile would
    // see them torn.
    run.out->value.lo = result.lo;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    run.out->value.hi = result.hi;
  }
  run.shared->executed.fetch_add(1, std::memory_order_relaxed);
  run.out->in_flight.fetch_sub(1);
  for (int i = 0; i < run.num_inputs; ++i)
    run.inputs[static_cast<std::size_t>(i)]->in_flight.fetch_sub(1);
}

std::exception_ptr injected_fault(const Step& s) {
  return std::make_exception_ptr(Error(fmt::format("injected fault #{}", s.id)));
}

Client::Client(Shared& shared, Completers& completers, int index)
    : shared_(shared),
      completers_(completers),
      index_(index),
      replay_(shared.options.seed, index, shared.options.slots, constant_values(shared)) {
  for (int s = 0; s < shared.options.slots; ++s) {
    vars_.push_back(shared.engine.new_var());
    cells_.push_back(std::make_unique<Cell>());
    cells_.back()->value = replay_.slot(s).value;
  }
}

void Client::run_round(int round, StressReport& report) {
  const ClientShape shape{shared_.options.slots, static_cast<int>(shared_.devices.size()),
                          shared_.options.round_steps};
  steps_ = generate_round(shared_.options.seed, index_, round, shape, shared_.options.mix);
  if (shared_.options.hang && index_ == 0 && round == 0) plant_hang();
  runs_.clear();
  runs_.reserve(steps_.size());
  for (const Step& step : steps_) push(step, report);
  check(round, report);
}

void Client::finish() {
  kept_.fill(NDArray());
  for (std::size_t s = 0; s < vars_.size(); ++s) {
    Cell* cell = cells_[s].release();
    shared_.engine.delete_var(vars_[s], [cell] { delete cell; });
  }
  vars_.clear();
}

std::vector<Value> Client::constant_values(const Shared& shared) {
  std::vector<Value> values;
  for (std::size_t d = 0; d < shared.devices.size(); ++d) {
    values.push_back(shared_value(shared.options.seed, static_cast<int>(d)));
  }
  return values;
}

void Client::plant_hang() {
  for (std::size_t i = steps_.size() / 2; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    if (s.kind == StepKind::kCompute &&
        !shared_.devices[static_cast<std::size_t>(s.device)].is_gpu()) {
      s.async = true;
      s.fails = false;
      hang_id_ = s.id;
      return;
    }
  }
}

Context Client::context_of(const Step& s) const {
  return shared_.devices[static_cast<std::size_t>(s.device)];
}

void Client::push(const Step& step, StressReport& report) {
  ++report.steps;
  ++report.steps_per_device[static_cast<std::size_t>(step.device)];
  switch (step.kind) {
    case StepKind::kAllocate:
      allocate(step, report);
      return;
    case StepKind::kDelete:
      remove(step);
      return;
    case StepKind::kCompute:
    case StepKind::kCopy:
      break;
  }
  const bool runs = replay_.apply(step);
  expected_runs_ += runs ? 1 : 0;
  errors_raised_ += runs ? 0 : 1;
  ++counts_[step.kind == StepKind::kCopy ? kCopy : kCompute];
  if (step.async) ++counts_[kAsync];
  if (step.priority != 0) ++counts_[kPrioritized];
  if (step.fails) ++counts_[kFailures];
  if (step.fails) ++report.faults_injected;

  StepRun& run = runs_.emplace_back();
  run.step = &step;
  run.shared = &shared_;
  Operation op{.name = step.kind == StepKind::kCopy ? "stress_copy" : "stress_compute",
               .ctx = context_of(step),
               .priority = step.priority};
  auto read = [&](VarHandle var, Cell* cell) {
    op.reads.push_back(var);
    run.inputs[static_cast<std::size_t>(run.num_inputs++)] = cell;
  };
  for (int r : step.reads) {
    if (r >= 0) read(vars_[static_cast<std::size_t>(r)], cells_[static_cast<std::size_t>(r)].get());
  }
  if (step.reads_shared) {
    read(shared_.constant_vars[static_cast<std::size_t>(step.device)],
         shared_.constants[static_cast<std::size_t>(step.device)].get());
  }
  const auto w = static_cast<std::size_t>(step.write);
  if (step.read_modify_write) op.reads.push_back(vars_[w]);
  op.writes.push_back(vars_[w]);
  run.out = cells_[w].get();
  if (step.kind == StepKind::kCopy) {
    // On a GPU's copy queue: the destination's, else the source's.
    const Context from =
        shared_.devices[static_cast<std::size_t>(step.reads[0]) % shared_.devices.size()];
    if (!op.ctx.is_gpu() && from.is_gpu()) op.ctx = from;
    op.queue = op.ctx.is_gpu() ? QueueKind::kCopy : QueueKind::kCompute;
  }
  if (op.ctx.is_gpu()) ++counts_[kOnGpus];
  const StepRun* r = &run;
  Completers* completers = &completers_;
  const bool hang = step.id == hang_id_;
  if (!step.async) {
    op.fn = [r](const RunContext& rc) {
      if (r->step->fails) std::rethrow_exception(injected_fault(*r->step));
      if (rc.stream != nullptr) {
        rc.stream->enqueue_host([r] { execute(*r); });
      } else {
        execute(*r);
      }
    };
  } else {
    op.fn = [r, completers, hang](const RunContext& rc, Completion c) {
      const bool device_work = rc.stream != nullptr && !r->step->fails;
      if (device_work) rc.stream->enqueue_host([r] { execute(*r); });
      if (hang) {
        completers->hold(r, std::move(c));
      } else {
        completers->submit(r, std::move(c), device_work);
      }
    };
  }
  shared_.engine.push(std::move(op));
}

void Client::allocate(const Step& step, StressReport& report) {
  const Context ctx = context_of(step);
  ++counts_[kAllocate];
  if (!step.fails) {
    kept_[next_kept_++ % kept_.size()] =
        zeros(Shape{static_cast<std::int64_t>(step.bytes / 4)}, DType::kFloat32, ctx);
    return;
  }
  ++report.faults_injected;
  ++counts_[kOutOfMemory];
  const auto elements = static_cast<std::int64_t>(shared_.options.memory_limit / 4 + (1 << 20));
  try {
    NDArray too_big = empty(Shape{elements}, DType::kFloat32, ctx);
    shared_.mismatch(fmt::format("client {}: {} bytes on {} beyond its limit did not fail", index_,
                                 elements * 4, ctx.str()));
  } catch (const OutOfMemoryError&) {
    // expected: typed, and nothing else changed (the checks will tell)
  } catch (const std::exception& e) {
    shared_.mismatch(
        fmt::format("client {}: an allocation beyond the limit of {} threw "
                    "something else than OutOfMemoryError: {}",
                    index_, ctx.str(), e.what()));
  }
}

void Client::remove(const Step& step) {
  ++counts_[kDeleted];
  const auto s = static_cast<std::size_t>(step.write);
  // The deleter runs once every step on the variable has finished: the
  // cell must then hold what the replay says, and nobody may touch it.
  Cell* cell = cells_[s].release();
  const Value expected = replay_.slot(step.write).value;
  Shared* shared = &shared_;
  const int client = index_;
  const int slot = step.write;
  pending_deleters_.fetch_add(1);
  std::atomic<int>* pending = &pending_deleters_;
  shared_.engine.delete_var(vars_[s], [cell, expected, shared, pending, client, slot] {
    if (cell->in_flight.load() != 0) {
      shared->mismatch(
          fmt::format("client {} slot {}: deleted while a step still ran on it", client, slot));
    } else if (!(cell->value == expected)) {
      shared->mismatch(
          fmt::format("client {} slot {}: deleted holding a value the replay "
                      "does not give",
                      client, slot));
    }
    delete cell;
    pending->fetch_sub(1);
  });
  replay_.apply(step);
  vars_[s] = shared_.engine.new_var();
  cells_[s] = std::make_unique<Cell>();
  cells_[s]->value = replay_.slot(step.write).value;
}

void Client::check(int round, StressReport& report) {
  for (std::size_t s = 0; s < vars_.size(); ++s) {
    const SlotState& want = replay_.slot(static_cast<int>(s));
    if (!want.errors.empty()) ++report.errors_expected;
    try {
      shared_.engine.wait_to_read(vars_[s]);
      if (!want.errors.empty()) {
        shared_.mismatch(
            fmt::format("client {} round {} slot {}: no error, expected the one "
                        "of injected fault #{}",
                        index_, round, s, want.errors.front()));
      } else if (!(cells_[s]->value == want.value)) {
        shared_.mismatch(
            fmt::format("client {} round {} slot {}: value differs from the "
                        "serial replay",
                        index_, round, s));
      }
    } catch (const OperationError& e) {
      const std::string what = e.what();
      const bool expected = std::any_of(want.errors.begin(), want.errors.end(), [&](auto id) {
        return what.find(fmt::format("injected fault #{}", id)) != std::string::npos;
      });
      if (expected) {
        ++report.errors_seen;
      } else {
        shared_.mismatch(fmt::format("client {} round {} slot {}: unexpected error: {}", index_,
                                     round, s, what));
      }
    }
  }
  // The round's steps may still run on deleted variables: their records
  // stay until every deleter has run. Under a controlled schedule a
  // deletion runs only once a wait picks it (Note [Controlled schedules] in
  // engine/schedule.h): wait for all that was pushed. What that reports was
  // raised by an injected fault, or is a mismatch.
  if (pending_deleters_.load() != 0 && shared_.engine.config().schedule.controlled()) {
    try {
      shared_.engine.wait_for_all();
    } catch (const std::exception& e) {
      if (std::string_view(e.what()).find("injected fault #") != std::string_view::npos) {
        shared_.errors_reported_by_rounds.fetch_add(1);
      } else {
        shared_.mismatch(
            fmt::format("client {} round {}: wait_for_all: {}", index_, round, e.what()));
      }
    }
  }
  while (pending_deleters_.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace tagflow::tools::stress
