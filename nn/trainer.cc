#include "nn/trainer.h"

#include "ops/creation.h"
#include "ops/optimizer_update.h"

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
    const double rescale = 1.0 / static_cast<double>(batch_size);
    for (std::size_t d = 0; d < weights.size(); ++d) {
      if (optimizer_ == "sgd") {
        sgd_update(weights[d], grads[d], states[d].first,
                   {.learning_rate = options_.learning_rate,
                    .momentum = options_.momentum,
                    .weight_decay = options_.weight_decay,
                    .rescale_grad = rescale,
                    .clip_gradient = options_.clip_gradient});
      } else {
        adam_update(weights[d], grads[d], states[d].first, states[d].second,
                    {.learning_rate = options_.learning_rate,
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
