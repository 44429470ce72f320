#include "tagflow/nn/trainer.h"

#include "tagflow/ops/creation.h"
#include "tagflow/ops/elementwise.h"
#include "tagflow/ops/optimizer_update.h"

namespace tagflow::nn {

Trainer::Trainer(ParameterDict params, std::string optimizer, TrainerOptions options)
    : params_(std::move(params)), optimizer_(std::move(optimizer)), options_(options) {
  TAGFLOW_CHECK(optimizer_ == "sgd" || optimizer_ == "adam",
                "Trainer: unknown optimizer \"{}\"; expected \"sgd\" or \"adam\"", optimizer_);
  TAGFLOW_CHECK(options_.learning_rate >= 0 && options_.weight_decay >= 0,
                "Trainer: expected a learning rate and weight decay >= 0, got {} and {}",
                options_.learning_rate, options_.weight_decay);
}

std::vector<NDArray> Trainer::aggregated_grads(const Parameter& p) {
  const std::vector<NDArray> grads = p.list_grad();
  if (grads.size() == 1) return grads;
  // Summed on the first device, then one copy back to each device.
  NDArray total = grads[0];
  for (std::size_t i = 1; i < grads.size(); ++i)
    total = total + grads[i].copyto(grads[0].context());
  std::vector<NDArray> copies{total};
  for (std::size_t i = 1; i < grads.size(); ++i) copies.push_back(total.copyto(grads[i].context()));
  return copies;
}

void Trainer::step(std::int64_t batch_size) {
  TAGFLOW_CHECK(batch_size > 0, "Trainer::step: expected a batch size > 0, got {}", batch_size);
  ++steps_;
  if (states_.empty()) states_.resize(params_.size());
  std::size_t index = 0;
  for (const ParameterPtr& p : params_) {
    auto& states = states_[index++];
    if (p->grad_req() == GradReq::kNull) continue;
    TAGFLOW_CHECK(p->initialized(), "Trainer::step: parameter '{}' is not initialized", p->name());
    const std::vector<NDArray>& weights = p->list_data();
    if (states.size() != weights.size()) {
      states.clear();
      for (const NDArray& w : weights) {
        states.emplace_back(zeros_like(w.detach()), zeros_like(w.detach()));
      }
    }
    const std::vector<NDArray> grads = aggregated_grads(*p);
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
