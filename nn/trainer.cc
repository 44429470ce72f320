#include "nn/trainer.h"

#include <map>

#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/optimizer_update.h"
#include "ops/reduce.h"

namespace tagflow::nn {

Trainer::Trainer(ParameterDict params, std::string optimizer, TrainerOptions options,
                 std::shared_ptr<dist::GradientAggregator> aggregator)
    : params_(std::move(params)),
      optimizer_(std::move(optimizer)),
      options_(options),
      aggregator_(aggregator != nullptr ? std::move(aggregator) : dist::make_local_aggregator()) {
  TAGFLOW_CHECK(optimizer_ == "sgd" || optimizer_ == "adam",
                "Trainer: unknown optimizer \"{}\"; expected \"sgd\" or \"adam\"", optimizer_);
  TAGFLOW_CHECK(options_.learning_rate >= 0 && options_.weight_decay >= 0,
                "Trainer: expected a learning rate and weight decay >= 0, got {} and {}",
                options_.learning_rate, options_.weight_decay);
  TAGFLOW_CHECK(!options_.nesterov || (optimizer_ == "sgd" && options_.momentum > 0),
                "Trainer: Nesterov needs sgd with momentum > 0, got {} with momentum {}",
                optimizer_, options_.momentum);
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
  if (options_.clip_global_norm > 0) clip_by_global_norm(rescale);
  if (states_.empty()) states_.resize(params_.size());
  std::size_t index = 0;
  for (const ParameterPtr& p : params_) {
    auto& states = states_[index++];
    if (p->grad_req() == GradReq::kNull) continue;
    const std::vector<NDArray>& weights = p->list_data();
    if (states.size() != weights.size()) {
      states.clear();
      for (const NDArray& w : weights) {
        states.emplace_back(zeros_like(w.detach()), zeros_like(w.detach()));
      }
    }
    const std::vector<NDArray> grads = p->list_grad();
    for (std::size_t d = 0; d < weights.size(); ++d) {
      if (optimizer_ == "sgd") {
        sgd_update(weights[d], grads[d], states[d].first,
                   {.learning_rate = rate,
                    .momentum = options_.momentum,
                    .weight_decay = options_.weight_decay,
                    .rescale_grad = rescale,
                    .clip_gradient = options_.clip_gradient,
                    .nesterov = options_.nesterov});
      } else {
        adam_update(weights[d], grads[d], states[d].first, states[d].second,
                    {.learning_rate = rate,
                     .beta1 = options_.beta1,
                     .beta2 = options_.beta2,
                     .epsilon = options_.epsilon,
                     .weight_decay = options_.weight_decay,
                     .rescale_grad = rescale,
                     .clip_gradient = options_.clip_gradient},
                    steps_);
      }
    }
  }
}

}  // namespace tagflow::nn
