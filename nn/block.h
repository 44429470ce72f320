#pragma once
// Block: a piece of a network with parameters and children, called like a
// function; Sequential: children called one after the other. Building the
// tutorials' networks reads like the tutorials:
//
//   nn::Sequential net;
//   net.add(nn::Dense(256, "relu"), nn::Dense(10));
//   net.initialize(init::Xavier(), {gpu(0)});
//   NDArray y = net(x);                 // on x's device
//
// Blocks are held by shared pointers, so a block added to a Sequential can
// still be reached by the caller. Names follow MXNet: "dense0_weight".

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tagflow/nn/parameter.h"

namespace tagflow::nn {

class Block {
 public:
  virtual ~Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  /// Movable, so that layers can be added by value: `net.add(Dense(10))`.
  Block(Block&&) = default;
  Block& operator=(Block&&) = default;

  /// The block's computation; `x` and the result on one device.
  virtual NDArray forward(const NDArray& x) = 0;
  NDArray operator()(const NDArray& x) { return forward(x); }

  /// This block's parameters and its children's, depth first.
  ParameterDict collect_params() const;
  /// Initializes every parameter on `contexts` (parameters with their own
  /// initializer keep it).
  void initialize(const init::InitializerPtr& init = init::Uniform(),
                  const std::vector<Context>& contexts = {cpu()}, bool force_reinit = false);
  /// "dense0", "sequential1".
  const std::string& name() const { return name_; }
  const std::vector<std::shared_ptr<Block>>& children() const { return children_; }

 protected:
  /// `kind` gives the name: the kind followed by a per-kind counter.
  explicit Block(const char* kind);
  ParameterPtr register_parameter(const std::string& suffix, Shape shape,
                                  init::InitializerPtr init = nullptr,
                                  GradReq grad_req = GradReq::kWrite);
  void register_child(std::shared_ptr<Block> child);

 private:
  std::string name_;
  std::vector<ParameterPtr> parameters_;
  std::vector<std::shared_ptr<Block>> children_;
};

using BlockPtr = std::shared_ptr<Block>;

class Sequential : public Block {
 public:
  Sequential() : Block("sequential") {}
  /// Appends blocks (given as shared pointers or by value).
  template <typename... Blocks>
  void add(Blocks&&... blocks) {
    (add_one(std::forward<Blocks>(blocks)), ...);
  }
  NDArray forward(const NDArray& x) override;
  std::size_t size() const { return children().size(); }
  /// The i-th child.
  Block& operator[](std::size_t i) const { return *children().at(i); }

 private:
  void add_one(BlockPtr block) { register_child(std::move(block)); }
  template <typename B, typename = std::enable_if_t<std::is_base_of_v<Block, std::decay_t<B>>>>
  void add_one(B&& block) {
    register_child(std::make_shared<std::decay_t<B>>(std::forward<B>(block)));
  }
};

}  // namespace tagflow::nn
