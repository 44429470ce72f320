#include "tagflow/nn/block.h"

#include <map>
#include <mutex>

namespace tagflow::nn {

namespace {

/// "dense0", "dense1", ...: one counter per kind, process-wide.
std::string next_name(const char* kind) {
  static std::mutex mutex;
  static std::map<std::string, int> counters;
  std::lock_guard lock(mutex);
  return kind + std::to_string(counters[kind]++);
}

}  // namespace

Block::Block(const char* kind) : name_(next_name(kind)) {}

ParameterPtr Block::register_parameter(const std::string& suffix, Shape shape,
                                       init::InitializerPtr init, GradReq grad_req) {
  auto parameter =
      std::make_shared<Parameter>(name_ + "_" + suffix, shape, std::move(init), grad_req);
  parameters_.push_back(parameter);
  return parameter;
}

void Block::register_child(std::shared_ptr<Block> child) {
  TAGFLOW_CHECK(child != nullptr, "{}: cannot add an empty block", name_);
  children_.push_back(std::move(child));
}

ParameterDict Block::collect_params() const {
  ParameterDict all;
  for (const auto& p : parameters_) all.add(p);
  for (const auto& child : children_) {
    for (const auto& p : child->collect_params()) {
      if (!all.contains(p->name())) all.add(p);  // a block shared twice counts once
    }
  }
  return all;
}

void Block::initialize(const init::InitializerPtr& init, const std::vector<Context>& contexts,
                       bool force_reinit) {
  collect_params().initialize(init, contexts, force_reinit);
}

NDArray Sequential::forward(const NDArray& x) {
  NDArray y = x;
  for (const auto& child : children()) y = child->forward(y);
  return y;
}

}  // namespace tagflow::nn
