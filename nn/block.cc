#include "nn/block.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <typeinfo>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/io/safetensors.h"
#include "ops/creation.h"

namespace tagflow::nn {

namespace {

/// The next number of `kind` ("dense" 0, 1, ...): one counter per kind, process-wide.
int next_number(const std::string& kind) {
  static std::mutex mutex;
  static std::map<std::string, int> counters;
  std::lock_guard lock(mutex);
  return counters[kind]++;
}

/// The mean of a parameter's copies, computed in double on the host and
/// rounded once: identical copies give their own bits.
NDArray mean_of_copies(const std::vector<NDArray>& copies) {
  std::vector<double> total(static_cast<std::size_t>(copies[0].size()), 0.0);
  for (const NDArray& copy : copies) {
    const std::vector<float> values = copy.to_vector<float>();
    for (std::size_t i = 0; i < values.size(); ++i) total[i] += values[i];
  }
  std::vector<float> mean(total.size());
  for (std::size_t i = 0; i < total.size(); ++i) {
    mean[i] = static_cast<float>(total[i] / static_cast<double>(copies.size()));
  }
  return array(mean, copies[0].shape());
}

/// "6x?x5x5": a declared shape with its unknown extents (0) as "?".
std::string declared_shape(const Shape& shape) {
  std::string text;
  for (int axis = 0; axis < shape.ndim(); ++axis) {
    if (axis > 0) text += "x";
    text += shape[axis] == 0 ? std::string("?") : std::to_string(shape[axis]);
  }
  return text;
}

/// The first few of `names`, quoted: "'0.weight', '0.bias' and 3 more".
std::string first_names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 4;
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) {
    text += fmt::format("{}'{}'", i == 0 ? "" : ", ", names[i]);
  }
  if (names.size() > kShown) text += fmt::format(" and {} more", names.size() - kShown);
  return text;
}

/// What load_parameters says when the file's names are not the network's.
std::string names_mismatch(std::size_t parameters, std::size_t tensors,
                           const std::vector<std::string>& missing,
                           const std::vector<std::string>& extra, bool allow_missing,
                           bool ignore_extra) {
  std::string text = fmt::format(
      "the file holds {} tensor{} and the network has {} parameter{}, which do not match by name",
      tensors, tensors == 1 ? "" : "s", parameters, parameters == 1 ? "" : "s");
  if (!missing.empty() && !allow_missing) {
    text += fmt::format("; not in the file: {} (pass allow_missing to keep their values)",
                        first_names(missing));
  }
  if (!extra.empty() && !ignore_extra) {
    text += fmt::format(
        "; in the file but not in the network: {} (pass ignore_extra to skip "
        "them)",
        first_names(extra));
  }
  return text + "; is the file of another network?";
}

}  // namespace

Block::Block(const char* kind)
    : kind_(kind), number_(next_number(kind_)), name_(kind_ + std::to_string(number_)) {}

// Note [Names in order of appearance]
// A block takes its number when it is constructed, and C++ leaves the order
// in which a call's arguments are constructed to the compiler: GCC builds
// `net.add(Dense(8), Dense(4), Dense(2))` right to left, which named them
// dense2, dense1, dense0. Sequential::add therefore hands the numbers of the
// blocks made in its call (passed by value), and of every block inside them
// (the children their constructors made, built in the same disorder across
// arguments), back out in the order the blocks appear, depth first, kind by
// kind, and renames their parameters with them. Blocks passed as shared
// pointers were made before the call and keep their names.
void Block::number_in_order(const std::vector<std::pair<std::shared_ptr<Block>, bool>>& added) {
  std::map<std::string, std::vector<Block*>> by_kind;
  std::set<const Block*> seen;  // a child shared twice is numbered once
  const auto visit = [&](const auto& self, Block* block) -> void {
    if (block == nullptr || !seen.insert(block).second) return;
    by_kind[block->kind_].push_back(block);
    for (const auto& child : block->children_) self(self, child.get());
  };
  for (const auto& [block, by_value] : added) {
    if (by_value) visit(visit, block.get());
  }
  for (auto& [kind, blocks] : by_kind) {
    std::vector<int> numbers;
    for (Block* b : blocks) numbers.push_back(b->number_);
    std::sort(numbers.begin(), numbers.end());
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      Block& b = *blocks[i];
      b.number_ = numbers[i];
      b.name_ = kind + std::to_string(b.number_);
      for (auto& [suffix, parameter] : b.parameters_) {
        parameter->name_ = b.name_ + "_" + suffix;
        parameter->owner_ = b.name_;
      }
    }
  }
}

namespace {

/// The block whose default forward() is running on this thread: reached
/// again, neither forward was overridden.
thread_local const Block* forwarding_by_default = nullptr;

/// "Residual" for tagflow::nn::Residual or a user's ::Residual;
/// "Wrap<tagflow::nn::Dense>" for app::Wrap<tagflow::nn::Dense>.
std::string class_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  const std::string name = status == 0 && demangled != nullptr ? demangled.get() : type.name();
  // The last scope outside template arguments.
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (depth == 0 && name[i] == ':' && name[i + 1] == ':') start = i + 2;
  }
  return name.substr(start);
}

}  // namespace

NDArray Block::forward(const NDArray& x) {
  TAGFLOW_CHECK(forwarding_by_default != this,
                "{}: the block defines neither forward(x) nor forward_inputs(inputs); a block "
                "overrides one of them",
                name_);
  const Block* outer = forwarding_by_default;
  forwarding_by_default = this;
  struct Restore {
    const Block* outer;
    ~Restore() { forwarding_by_default = outer; }
  } restore{outer};
  return forward_inputs({x});
}

NDArray Block::forward_inputs(const std::vector<NDArray>& inputs) {
  TAGFLOW_CHECK(inputs.size() == 1,
                "{}: expected one input, got {}; a block of several inputs overrides "
                "forward_inputs()",
                name_, inputs.size());
  return forward(inputs[0]);
}

std::string Block::describe() const { return class_name(typeid(*this)); }

Block& Block::child_at(std::size_t i) const {
  TAGFLOW_CHECK(i < children_.size(), "{}: expected a child position below {}, got {}", name_,
                children_.size(), i);
  return *children_[i];
}

void Block::throw_wrong_child_type(std::size_t i, const std::type_info& wanted) const {
  const Block& child = *children_[i];
  throw Error(fmt::format("{}: child {} is {} ({}), not a {}", name_, i, child.name(),
                          class_name(typeid(child)), class_name(wanted)));
}

namespace {

void print_block(std::ostream& os, const Block& block, const std::string& indent) {
  os << block.describe();
  if (block.children().empty()) return;
  os << "(\n";
  for (std::size_t i = 0; i < block.children().size(); ++i) {
    os << indent << "  (" << i << "): ";
    print_block(os, *block.children()[i], indent + "  ");
    os << "\n";
  }
  os << indent << ")";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Block& block) {
  print_block(os, block, "");
  return os;
}

ParameterPtr Block::register_parameter(const std::string& suffix, Shape shape,
                                       init::InitializerPtr init, GradReq grad_req,
                                       ParameterKind kind) {
  auto parameter =
      std::make_shared<Parameter>(name_ + "_" + suffix, shape, std::move(init), grad_req, kind);
  parameter->owner_ = name_;
  parameters_.emplace_back(suffix, parameter);
  return parameter;
}

ParameterPtr Block::adopt_parameter(const std::string& suffix, ParameterPtr parameter) {
  TAGFLOW_CHECK(parameter != nullptr, "{}: cannot adopt an empty parameter", name_);
  TAGFLOW_CHECK(parameter->owner_.empty(), "{}: parameter {} already belongs to block {}", name_,
                parameter->name(), parameter->owner_);
  parameter->name_ = name_ + "_" + suffix;
  parameter->owner_ = name_;
  parameters_.emplace_back(suffix, parameter);
  return parameter;
}

void Block::add_child(std::shared_ptr<Block> child) {
  TAGFLOW_CHECK(child != nullptr, "{}: cannot add an empty block", name_);
  children_.push_back(std::move(child));
}

ParameterDict Block::collect_params() const {
  ParameterDict all;
  for (const auto& [suffix, p] : parameters_) all.add(p);
  for (const auto& child : children_) {
    for (const auto& p : child->collect_params()) {
      if (!all.contains(p->name())) all.add(p);  // a block shared twice counts once
    }
  }
  return all;
}

std::vector<std::pair<std::string, ParameterPtr>> Block::structural_params() const {
  std::vector<std::pair<std::string, ParameterPtr>> all(parameters_);
  for (std::size_t i = 0; i < children_.size(); ++i) {
    for (auto& [name, p] : children_[i]->structural_params()) {
      all.emplace_back(fmt::format("{}.{}", i, name), std::move(p));
    }
  }
  return all;
}

void Block::save_parameters(const std::filesystem::path& path) const {
  std::vector<std::pair<std::string, NDArray>> tensors;
  for (const auto& [name, p] : structural_params()) {
    TAGFLOW_CHECK(p->initialized(),
                  "save_parameters: parameter '{}' ({}) is not initialized: initialize the "
                  "network (and run a forward pass if shapes are inferred) before saving",
                  name, p->name());
    const std::vector<NDArray> copies = p->list_data();
    tensors.emplace_back(name, p->kind() == ParameterKind::kRunningState && copies.size() > 1
                                   ? mean_of_copies(copies)
                                   : copies[0].detach());
  }
  io::save_safetensors(path, tensors);
}

void Block::load_parameters(const std::filesystem::path& path, const std::vector<Context>& contexts,
                            bool allow_missing, bool ignore_extra) {
  TAGFLOW_CHECK(!contexts.empty(), "load_parameters: expected at least one device");
  std::map<std::string, NDArray> loaded;
  for (auto& [name, value] : io::load_safetensors(path, contexts[0])) loaded.emplace(name, value);

  // Everything is checked before any parameter changes. Names first: a file
  // of another network says so, rather than a shape deep inside it.
  const auto params = structural_params();
  std::vector<std::string> missing;
  std::set<std::string> known;
  for (const auto& [name, p] : params) {
    known.insert(name);
    if (loaded.count(name) == 0) missing.push_back(name);
  }
  std::vector<std::string> extra;
  for (const auto& [name, value] : loaded) {
    if (known.count(name) == 0) extra.push_back(name);
  }
  if ((!missing.empty() && !allow_missing) || (!extra.empty() && !ignore_extra)) {
    throw io::FileError(path, names_mismatch(params.size(), loaded.size(), missing, extra,
                                             allow_missing, ignore_extra));
  }
  for (const auto& [name, p] : params) {
    auto it = loaded.find(name);
    if (it == loaded.end()) continue;  // allowed missing
    // float16 and bfloat16 (a network saved in half precision) widen to
    // float32 exactly.
    if (is_half(it->second.dtype())) it->second = it->second.astype(DType::kFloat32);
    const NDArray& value = it->second;
    if (value.dtype() != DType::kFloat32) {
      throw io::FileError(path, fmt::format("parameter '{}' ({}): expected float32, float16 or "
                                            "bfloat16, the file has {}",
                                            name, p->name(), dtype_name(value.dtype())));
    }
    if (!p->accepts_shape(value.shape())) {
      throw io::FileError(
          path, fmt::format("parameter '{}' ({}): expected shape ({}), the file "
                            "has ({}); is the file of another network?",
                            name, p->name(), declared_shape(p->shape()), value.shape().str()));
    }
  }
  for (const auto& [name, p] : params) {
    if (auto it = loaded.find(name); it != loaded.end()) p->load(it->second, contexts);
  }
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
