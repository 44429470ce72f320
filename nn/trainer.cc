#include "nn/trainer.h"

#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/io/file_error.h"
#include "nn/io/safetensors.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "tagflow/version.h"

namespace tagflow::nn {

OptimizerPtr make_optimizer(const std::string& name, const TrainerOptions& o) {
  TAGFLOW_CHECK(o.weight_decay >= 0, "Trainer: expected a weight decay >= 0, got {}",
                o.weight_decay);
  TAGFLOW_CHECK(!o.nesterov || ((name == "sgd" || name == "nag") && o.momentum > 0),
                "Trainer: Nesterov needs sgd with momentum > 0, got {} with momentum {}", name,
                o.momentum);
  const SgdParams sgd_params{.momentum = o.momentum,
                             .weight_decay = o.weight_decay,
                             .clip_gradient = o.clip_gradient,
                             .nesterov = o.nesterov};
  const AdamParams adam_params{.beta1 = o.beta1,
                               .beta2 = o.beta2,
                               .epsilon = o.epsilon,
                               .weight_decay = o.weight_decay,
                               .clip_gradient = o.clip_gradient};
  if (name == "sgd") return sgd(sgd_params);
  if (name == "nag") return o.momentum > 0 ? nag(sgd_params) : sgd(sgd_params);
  if (name == "adam") return adam(adam_params);
  if (name == "adamw") return adamw(adam_params);
  detail::throw_error(
      "Trainer: unknown optimizer \"{}\"; expected \"sgd\", \"nag\", \"adam\" or \"adamw\" (or an "
      "nn::Optimizer object)",
      name);
}

Trainer::Trainer(ParameterDict params, const std::string& optimizer, TrainerOptions options,
                 std::shared_ptr<dist::GradientAggregator> aggregator)
    : Trainer(Made{}, std::move(params), make_optimizer(optimizer, options), options,
              std::move(aggregator)) {}

Trainer::Trainer(ParameterDict params, OptimizerPtr optimizer, TrainerOptions options,
                 std::shared_ptr<dist::GradientAggregator> aggregator)
    : Trainer(Made{}, std::move(params), std::move(optimizer), options, std::move(aggregator)) {
  const TrainerOptions defaults;
  TAGFLOW_CHECK(options_.momentum == defaults.momentum && options_.nesterov == defaults.nesterov &&
                    options_.weight_decay == defaults.weight_decay &&
                    options_.beta1 == defaults.beta1 && options_.beta2 == defaults.beta2 &&
                    options_.epsilon == defaults.epsilon &&
                    options_.clip_gradient == defaults.clip_gradient,
                "Trainer: with an optimizer object ({}), momentum, nesterov, weight_decay, beta1, "
                "beta2, epsilon and clip_gradient are the object's: leave them unset in "
                "TrainerOptions",
                optimizer_->name());
}

Trainer::Trainer(Made, ParameterDict params, OptimizerPtr optimizer, TrainerOptions options,
                 std::shared_ptr<dist::GradientAggregator> aggregator)
    : params_(std::move(params)),
      optimizer_(std::move(optimizer)),
      options_(std::move(options)),
      aggregator_(aggregator != nullptr ? std::move(aggregator) : dist::make_local_aggregator()),
      scaler_(options_.loss_scale) {
  TAGFLOW_CHECK(optimizer_ != nullptr, "Trainer: expected an optimizer, got null");
  TAGFLOW_CHECK(options_.learning_rate >= 0, "Trainer: expected a learning rate >= 0, got {}",
                options_.learning_rate);
  TAGFLOW_CHECK(options_.clip_global_norm == -1 || options_.clip_global_norm > 0,
                "Trainer: expected clip_global_norm > 0 (or -1: none), got {}",
                options_.clip_global_norm);
  options_.schedule.check();
}

double Trainer::next_learning_rate() const {
  return options_.schedule.learning_rate(steps_ + 1, options_.learning_rate);
}

// Note [Clipping by the global norm]
// As PyTorch's clip_grad_norm_ and MXNet's clip_global_norm: with n the L2
// norm of all gradients together (each divided by the batch size, as the
// update uses them), every gradient is multiplied by min(1, max / (n +
// 1e-6)). The norm is summed on the first parameter's first device from
// each parameter's first copy (after the sum over devices every copy holds
// the same gradient), and the factor is copied to each device: engine
// operations all, so the host never waits. A NaN or infinite norm makes
// every gradient NaN, and the loss shows it.
void Trainer::clip_by_global_norm(double rescale) {
  NDArray squares;  // the sum of squares, on the first device
  for (const ParameterPtr& p : params_) {
    if (p->grad_req() == GradReq::kNull) continue;
    const NDArray g = p->list_grad().front();
    NDArray s = sum(square(g));
    if (!squares.defined()) {
      squares = s;
    } else {
      squares += s.copyto(squares.context());
    }
  }
  if (!squares.defined()) return;
  last_global_norm_ = sqrt(squares) * rescale;
  const NDArray factor = minimum(options_.clip_global_norm / (last_global_norm_ + 1e-6), 1.0);
  std::map<Context, NDArray> factors;  // one copy per device
  for (const ParameterPtr& p : params_) {
    if (p->grad_req() == GradReq::kNull) continue;
    for (NDArray g : p->list_grad()) {
      NDArray& f = factors[g.context()];
      if (!f.defined()) f = factor.copyto(g.context());
      g *= f;
    }
  }
}

Context Trainer::scaling_home() const {
  for (const ParameterPtr& p : params_) {
    if (p->initialized()) return p->list_ctx().front();
  }
  return cpu();
}

NDArray Trainer::scale_loss(const NDArray& loss) { return scaler_.scale(loss, scaling_home()); }

void Trainer::check_initialized() const {
  for (const ParameterPtr& p : params_) {
    TAGFLOW_CHECK(p->grad_req() == GradReq::kNull || p->initialized(),
                  "Trainer: parameter '{}' is not initialized", p->name());
  }
}

void Trainer::allreduce_grads() {
  TAGFLOW_CHECK(!aggregated_,
                "Trainer::allreduce_grads: the gradients were already aggregated since the last "
                "update; call update() (summing them again would count every device twice)");
  check_initialized();
  if (!broadcast_done_) broadcast_parameters();
  // Last parameter first: backward finishes the last layers' gradients first.
  // Parameters on one device are passed too: other processes may hold copies.
  for (std::size_t index = params_.size(); index-- > 0;) {
    const Parameter& p = **(params_.begin() + static_cast<std::ptrdiff_t>(index));
    if (p.grad_req() == GradReq::kNull) continue;
    aggregator_->allreduce(p.list_grad(), static_cast<int>(index));
  }
  aggregator_->flush();
  aggregated_ = true;
}

void Trainer::broadcast_parameters() {
  check_initialized();
  std::size_t index = 0;
  for (const ParameterPtr& p : params_) {
    // Frozen parameters too (BatchNorm's running statistics, loaded weights).
    if (p->initialized()) aggregator_->broadcast(p->list_data(), static_cast<int>(index));
    ++index;
  }
  aggregator_->flush();
  broadcast_done_ = true;
}

void Trainer::step(std::int64_t batch_size) {
  TAGFLOW_CHECK(batch_size > 0, "Trainer::step: expected a batch size > 0, got {}", batch_size);
  if (!aggregated_) allreduce_grads();
  update(batch_size);
}

void Trainer::update(std::int64_t batch_size) {
  TAGFLOW_CHECK(batch_size > 0, "Trainer::update: expected a batch size > 0, got {}", batch_size);
  check_initialized();
  aggregated_ = false;
  ++steps_;
  const double rate = options_.schedule.learning_rate(steps_, options_.learning_rate);
  const double rescale = 1.0 / static_cast<double>(batch_size);
  // With loss scaling: the gradients unscaled first, so that clipping sees
  // their true norm; the overflow flag, copied to each device, gates every
  // update there.
  NDArray overflow;
  if (scaler_.enabled()) {
    std::vector<std::vector<NDArray>> grads;
    for (const ParameterPtr& p : params_) {
      if (p->grad_req() != GradReq::kNull) grads.push_back(p->list_grad());
    }
    overflow = scaler_.unscale(grads, scaling_home());
  }
  std::map<Context, NDArray> skip;
  const auto skip_on = [&](Context ctx) {
    if (!overflow.defined()) return NDArray();
    NDArray& s = skip[ctx];
    if (!s.defined()) s = ctx == overflow.context() ? overflow : overflow.copyto(ctx);
    return s;
  };
  if (options_.clip_global_norm > 0) clip_by_global_norm(rescale);
  make_states();
  std::size_t index = 0;
  for (const ParameterPtr& p : params_) {
    auto& states = states_[index++];
    if (p->grad_req() == GradReq::kNull) continue;
    const std::vector<NDArray>& weights = p->list_data();
    const std::vector<NDArray> grads = p->list_grad();
    for (std::size_t d = 0; d < weights.size(); ++d) {
      optimizer_->update(weights[d], grads[d], states[d],
                         {.learning_rate = rate,
                          .rescale_grad = rescale,
                          .t = steps_,
                          .skip_if = skip_on(weights[d].context())});
    }
  }
  if (overflow.defined()) scaler_.update(overflow);
  average_running_state();
}

void Trainer::average_running_state() {
  // Note [Running state across devices] in trainer.h.
  std::vector<std::pair<std::vector<NDArray>, std::size_t>> summed;
  std::size_t index = 0;
  for (const ParameterPtr& p : params_) {
    const int key = static_cast<int>(index++);
    if (p->kind() != ParameterKind::kRunningState || !p->initialized()) continue;
    std::vector<NDArray> copies = p->list_data();
    const std::size_t count = aggregator_->copies_summed(copies.size());
    if (count < 2) continue;
    aggregator_->allreduce(copies, key);  // it has no gradient: its key is free
    summed.emplace_back(std::move(copies), count);
  }
  if (summed.empty()) return;
  aggregator_->flush();  // the sums pushed before the divisions that read them
  for (auto& [copies, count] : summed) {
    for (NDArray& copy : copies) copy /= static_cast<double>(count);
  }
}

void Trainer::make_states() {
  if (states_.empty()) states_.resize(params_.size());
  std::size_t index = 0;
  for (const ParameterPtr& p : params_) {
    auto& states = states_[index++];
    if (p->grad_req() == GradReq::kNull) continue;
    const std::vector<NDArray>& weights = p->list_data();
    if (states.size() == weights.size()) continue;
    states.clear();
    const std::size_t count = optimizer_->state_names().size();
    for (const NDArray& w : weights) {
      std::vector<NDArray>& state = states.emplace_back();
      for (std::size_t i = 0; i < count; ++i) state.push_back(zeros_like(w.detach()));
    }
  }
}

// Note [Trainer state]
// A trainer's state is what its updates depend on besides the parameters:
// per learned parameter, the optimiser's state arrays (sgd's momentum "m",
// Adam's first and second moments "m" and "v"; the copies on a parameter's
// devices are equal, so the first device's copy is saved and loaded onto
// all), the number of updates made (Adam's bias correction and the
// schedule's position) and the base rate. The file names each tensor
// "<index>.<state name>" by the parameter's place in the
// trainer's list (names such as "dense0_weight" depend on how many blocks
// the process made before, so they are kept for messages only), and its
// metadata holds the optimizer, the update count, the base rate (as %.17g:
// read back to the same double), the number of parameters and their names,
// and tagflow's version. A file fits a trainer of the same optimizer whose
// parameters have, in order, the shapes of the saved states. Parameters
// themselves are saved by Block::save_parameters, next to it. With loss
// scaling the scale, the clean steps and the skipped updates are saved too,
// as (1) float32 tensors "amp.scale", "amp.clean_steps" and "amp.skipped";
// a trainer without loss scaling ignores them when it loads the file.
namespace {

constexpr const char* kAmpTensors[] = {"amp.scale", "amp.clean_steps", "amp.skipped"};

constexpr const char* kOptimizerKey = "tagflow.optimizer";
constexpr const char* kUpdatesKey = "tagflow.updates";
constexpr const char* kRateKey = "tagflow.learning_rate";
constexpr const char* kParametersKey = "tagflow.parameters";
constexpr const char* kNamesKey = "tagflow.parameter_names";
constexpr const char* kVersionKey = "tagflow.version";

}  // namespace

void Trainer::save_states(const std::filesystem::path& path,
                          const std::map<std::string, std::string>& metadata) {
  check_initialized();
  make_states();
  std::vector<std::pair<std::string, NDArray>> tensors;
  std::vector<std::string> names;
  std::size_t index = 0;
  for (const ParameterPtr& p : params_) {
    const auto& states = states_[index];
    names.push_back(p->name());
    if (p->grad_req() != GradReq::kNull) {
      std::size_t i = 0;
      for (const std::string& part : optimizer_->state_names()) {
        tensors.emplace_back(fmt::format("{}.{}", index, part), states[0][i++]);
      }
    }
    ++index;
  }
  if (scaler_.enabled()) {
    scaler_.make_state(scaling_home());
    tensors.emplace_back(kAmpTensors[0], scaler_.loss_scale());
    tensors.emplace_back(kAmpTensors[1], scaler_.clean_steps());
    tensors.emplace_back(kAmpTensors[2], scaler_.skipped_updates());
  }
  std::map<std::string, std::string> all = metadata;
  all[kOptimizerKey] = optimizer_->name();
  all[kUpdatesKey] = std::to_string(steps_);
  all[kRateKey] = fmt::format("{:.17g}", options_.learning_rate);
  all[kParametersKey] = std::to_string(params_.size());
  all[kNamesKey] = fmt::format("{}", fmt::join(names, ","));
  all[kVersionKey] = version_string();
  io::save_safetensors(path, tensors, all);
}

std::map<std::string, std::string> Trainer::load_states(const std::filesystem::path& path) {
  check_initialized();
  const std::map<std::string, std::string> metadata = io::safetensors_metadata(path);
  const auto field = [&](const char* key) {
    const auto it = metadata.find(key);
    if (it == metadata.end()) {
      throw io::FileError(path,
                          fmt::format("not a trainer's state: no \"{}\" in its metadata", key));
    }
    return it->second;
  };
  if (field(kOptimizerKey) != optimizer_->name()) {
    throw io::FileError(path, fmt::format("the state of a {} trainer, this one is {}",
                                          field(kOptimizerKey), optimizer_->name()));
  }
  if (field(kParametersKey) != std::to_string(params_.size())) {
    const auto names = metadata.find(kNamesKey);
    throw io::FileError(
        path,
        fmt::format("the state of {} parameters ({}), this trainer has {}", field(kParametersKey),
                    names != metadata.end() ? names->second : "", params_.size()));
  }
  std::int64_t updates = 0;
  double rate = 0;
  try {
    std::size_t used = 0;
    const std::string text = field(kUpdatesKey);
    updates = std::stoll(text, &used);
    if (used != text.size() || updates < 0) throw std::invalid_argument(text);
    const std::string rate_text = field(kRateKey);
    rate = std::stod(rate_text, &used);
    if (used != rate_text.size() || !(rate >= 0)) throw std::invalid_argument(rate_text);
  } catch (const std::logic_error&) {
    throw io::FileError(path, fmt::format("expected a count of updates >= 0 and a rate >= 0, got "
                                          "\"{}\" and \"{}\"",
                                          field(kUpdatesKey), field(kRateKey)));
  }
  std::map<std::string, NDArray> loaded;
  for (auto& [name, value] : io::load_safetensors(path, cpu())) loaded.emplace(name, value);
  make_states();
  // Every tensor checked before any state changes.
  std::vector<std::pair<NDArray*, NDArray>> assignments;  // (a device's state, its value)
  std::size_t index = 0, used_tensors = 0;
  for (const ParameterPtr& p : params_) {
    auto& states = states_[index];
    if (p->grad_req() != GradReq::kNull) {
      const std::string prefix = fmt::format("{}.", index);
      std::size_t part_index = 0;
      for (const std::string& part : optimizer_->state_names()) {
        const std::size_t i = part_index++;
        const auto it = loaded.find(prefix + part);
        if (it == loaded.end()) {
          throw io::FileError(path, fmt::format("no tensor \"{}{}\"", prefix, part));
        }
        if (it->second.shape() != p->shape() || it->second.dtype() != DType::kFloat32) {
          throw io::FileError(
              path, fmt::format("\"{}{}\": expected float32 of shape ({}), got {} "
                                "of shape ({})",
                                prefix, part, p->shape().str(), dtype_name(it->second.dtype()),
                                it->second.shape().str()));
        }
        ++used_tensors;
        for (auto& state : states) assignments.emplace_back(&state[i], it->second);
      }
    }
    ++index;
  }
  // Loss scaling's state: restored with loss scaling, ignored without.
  std::vector<NDArray> amp_values;
  for (const char* name : kAmpTensors) {
    const auto it = loaded.find(name);
    if (it == loaded.end()) continue;
    if (it->second.shape() != Shape{1} || it->second.dtype() != DType::kFloat32) {
      throw io::FileError(
          path, fmt::format("\"{}\": expected float32 of shape (1), got {} of "
                            "shape ({})",
                            name, dtype_name(it->second.dtype()), it->second.shape().str()));
    }
    ++used_tensors;
    amp_values.push_back(it->second);
  }
  if (!amp_values.empty() && amp_values.size() != std::size(kAmpTensors)) {
    throw io::FileError(path,
                        "a loss-scaling state with some of \"amp.scale\", "
                        "\"amp.clean_steps\" and \"amp.skipped\" missing");
  }
  if (used_tensors != loaded.size()) {
    throw io::FileError(path, fmt::format("{} tensors that belong to no parameter's state",
                                          loaded.size() - used_tensors));
  }
  for (auto& [state, value] : assignments) value.copyto(*state);
  if (scaler_.enabled() && !amp_values.empty()) {
    scaler_.restore(amp_values[0], amp_values[1], amp_values[2], scaling_home());
  }
  steps_ = updates;
  options_.learning_rate = rate;
  return metadata;
}

}  // namespace tagflow::nn
