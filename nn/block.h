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
//
// Threads: concurrent reads, exclusive writes. forward() (calling a block)
// is a read: several threads may run a network at once, its first call
// included, which infers the unknown shapes and completes a deferred
// initialization exactly once (Note [Inferring a shape once] in
// nn/parameter.cc). describe(), collect_params(), structural_params() and
// save_parameters() are reads too (an update another thread pushes
// meanwhile comes after the values saved: nn/io/safetensors.h).
// Building a network (add(),
// register_parameter(), register_child(), adopt_parameter()),
// initialize() and load_parameters() are writes: one thread, while no other
// uses the network. Blocks may be made on several threads at once (each
// kind's counter takes a lock), but their names then follow the threads'
// order.
//
// Parameter files name parameters by their place in the network instead
// ("0.weight", "1.0.bias": the child's position, then the parameter), as
// Gluon's save_parameters and PyTorch's state_dict do, so that a fresh
// network of the same structure loads them whatever its blocks are called:
//
//   net.save_parameters("net.safetensors");
//   fresh.load_parameters("net.safetensors", gpu(0));

#include <filesystem>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "nn/parameter.h"

namespace tagflow::nn {

class Block {
 public:
  virtual ~Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  /// Movable, so that layers can be added by value: `net.add(Dense(10))`.
  Block(Block&&) = default;
  Block& operator=(Block&&) = default;

  /// The block's computation; `x` and the result on one device. By default
  /// forward_inputs({x}): a block overrides one of the two.
  virtual NDArray forward(const NDArray& x);
  /// The computation of a block of several inputs, which such a block
  /// overrides instead of forward(); by default forward() of the only input.
  virtual NDArray forward_inputs(const std::vector<NDArray>& inputs);
  NDArray operator()(const NDArray& x) { return forward(x); }
  /// `block({a, b})`: forward_inputs.
  NDArray operator()(const std::vector<NDArray>& inputs) { return forward_inputs(inputs); }

  /// The block's own line when printed ("Dense(784 -> 256, Activation(relu))");
  /// by default its class name. Children are printed below it by
  /// `operator<<`, as Gluon's `print(net)` shows them.
  virtual std::string describe() const;

  /// This block's parameters and its children's, depth first.
  ParameterDict collect_params() const;
  /// Initializes every parameter on `contexts` (parameters with their own
  /// initializer keep it).
  void initialize(const init::InitializerPtr& init = init::Uniform(),
                  const std::vector<Context>& contexts = {cpu()}, bool force_reinit = false);
  /// The same with the default initializer (init::Uniform(), as Gluon's):
  /// `net.initialize(gpu(0))`, `net.initialize({gpu(0), gpu(1)})`.
  void initialize(const std::vector<Context>& contexts, bool force_reinit = false) {
    initialize(init::Uniform(), contexts, force_reinit);
  }
  void initialize(Context ctx, bool force_reinit = false) {
    initialize(init::Uniform(), std::vector<Context>{ctx}, force_reinit);
  }
  /// This block's parameters and its children's by structural name: its
  /// own by suffix ("weight"), a child's prefixed by the child's position
  /// ("0.weight", "2.1.bias"). Depth first, in registration order.
  std::vector<std::pair<std::string, ParameterPtr>> structural_params() const;

  /// Writes every parameter to `path` as a safetensors file under its
  /// structural name: the copy on its first device, or, for running state
  /// on several devices, the mean of the copies (Note [Running state across
  /// devices] in nn/trainer.h). Waits for the values. Throws io::FileError
  /// when the write fails, tagflow::Error for a parameter that is not
  /// initialized.
  void save_parameters(const std::filesystem::path& path) const;
  /// Reads the parameters saved by save_parameters onto `contexts`,
  /// replacing what they held (and inferring the shapes still unknown). The
  /// file is checked against the network before any parameter changes: a
  /// parameter missing from the file (unless `allow_missing`), a tensor with
  /// no parameter (unless `ignore_extra`), or a shape or dtype that differs
  /// throws io::FileError naming the parameter. float16 and bfloat16
  /// tensors (a network saved in half precision) are widened to float32,
  /// exactly.
  void load_parameters(const std::filesystem::path& path, const std::vector<Context>& contexts,
                       bool allow_missing = false, bool ignore_extra = false);
  void load_parameters(const std::filesystem::path& path, Context ctx = cpu()) {
    load_parameters(path, std::vector<Context>{ctx});
  }

  /// "dense0", "sequential1".
  const std::string& name() const { return name_; }
  const std::vector<std::shared_ptr<Block>>& children() const { return children_; }
  /// Child `i` as the type it was made as: `net.at<nn::Dense>(0).weight()`.
  /// Throws tagflow::Error naming the block and both types when it is another
  /// kind of block, or when there is no child `i`.
  template <typename B>
  B& child_as(std::size_t i) const {
    static_assert(std::is_base_of_v<Block, B>, "child_as<B>: B must be a Block");
    Block& child = child_at(i);
    auto* typed = dynamic_cast<B*>(&child);
    if (typed == nullptr) throw_wrong_child_type(i, typeid(B));
    return *typed;
  }

 protected:
  /// `kind` gives the name: the kind followed by a per-kind counter.
  explicit Block(const char* kind);
  ParameterPtr register_parameter(const std::string& suffix, Shape shape,
                                  init::InitializerPtr init = nullptr,
                                  GradReq grad_req = GradReq::kWrite,
                                  ParameterKind kind = ParameterKind::kLearned);
  /// Makes `parameter`, made apart from any block (as a Python subclass
  /// makes `gluon.Parameter("weight", shape=...)` before assigning it), this
  /// block's under `suffix`, renamed "<block>_<suffix>". Throws
  /// tagflow::Error when it already belongs to a block.
  ParameterPtr adopt_parameter(const std::string& suffix, ParameterPtr parameter);
  /// Makes `child` a child of this block (its parameters become this
  /// block's, its position names them in files) and returns it, typed:
  ///
  ///   body_ = register_child(nn::Dense(64, "relu"));   // std::shared_ptr<nn::Dense>
  template <typename B>
  std::shared_ptr<B> register_child(std::shared_ptr<B> child) {
    add_child(child);
    return child;
  }
  /// A block by value (moved into the block), of a class derived from Block.
  template <typename B, typename = std::enable_if_t<std::is_base_of_v<Block, std::decay_t<B>>>>
  std::shared_ptr<std::decay_t<B>> register_child(B&& block) {
    static_assert(!std::is_same_v<std::decay_t<B>, Block>,
                  "register_child: pass the block as its own class (or a shared_ptr), not as a "
                  "Block: moving it into a Block would slice it");
    return register_child(std::make_shared<std::decay_t<B>>(std::forward<B>(block)));
  }

 private:
  friend class Sequential;
  /// Gives the blocks of `added` passed by value (made in the call's
  /// arguments) their kind's numbers in the order they appear (Note [Names
  /// in order of appearance] in block.cc).
  static void number_in_order(const std::vector<std::pair<std::shared_ptr<Block>, bool>>& added);
  void add_child(std::shared_ptr<Block> child);
  Block& child_at(std::size_t i) const;
  [[noreturn]] void throw_wrong_child_type(std::size_t i, const std::type_info& wanted) const;

  std::string kind_;
  int number_ = 0;
  std::string name_;
  /// Each with the suffix it was registered under ("weight").
  std::vector<std::pair<std::string, ParameterPtr>> parameters_;
  std::vector<std::shared_ptr<Block>> children_;
};

using BlockPtr = std::shared_ptr<Block>;

/// Prints the block as Gluon's `print(net)` does: its describe() line, and
/// below it each child, indented, after its position:
///
///   Sequential(
///     (0): Dense(784 -> 256, Activation(relu))
///     (1): Dense(256 -> 10, linear)
///   )
std::ostream& operator<<(std::ostream& os, const Block& block);

class Sequential : public Block {
 public:
  Sequential() : Block("sequential") {}
  /// Appends blocks (given as shared pointers or by value). Blocks made in
  /// the call are named in the order they appear, whatever order the
  /// compiler built them in: `add(Dense(8), Dense(4))` gives dense0, dense1.
  template <typename... Blocks>
  void add(Blocks&&... blocks) {
    std::vector<std::pair<BlockPtr, bool>> added;
    (added.emplace_back(to_pointer(std::forward<Blocks>(blocks)),
                        !std::is_convertible_v<Blocks, BlockPtr>),
     ...);
    number_in_order(added);
    for (auto& [block, by_value] : added) register_child(std::move(block));
  }
  NDArray forward(const NDArray& x) override;
  std::size_t size() const { return children().size(); }
  /// The i-th child.
  Block& operator[](std::size_t i) const { return *children().at(i); }
  /// The i-th child as the type it was made as (Block::child_as).
  template <typename B>
  B& at(std::size_t i) const {
    return child_as<B>(i);
  }

 private:
  static BlockPtr to_pointer(BlockPtr block) { return block; }
  template <typename B, typename = std::enable_if_t<std::is_base_of_v<Block, std::decay_t<B>>>>
  static BlockPtr to_pointer(B&& block) {
    static_assert(!std::is_same_v<std::decay_t<B>, Block>,
                  "Sequential::add: pass a block as its own class (or a shared_ptr), not as a "
                  "Block: moving it into a Block would slice it");
    return std::make_shared<std::decay_t<B>>(std::forward<B>(block));
  }
};

}  // namespace tagflow::nn
