#include "nn/parameter.h"

#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/creation.h"
#include "storage/storage.h"

namespace tagflow::nn {

namespace {

bool shape_known(const Shape& s) {
  for (std::int64_t d : s.dims()) {
    if (d == 0) return false;
  }
  return true;
}

std::string contexts_text(const std::vector<Context>& contexts) {
  std::vector<std::string> names;
  for (Context c : contexts) names.push_back(c.str());
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

// Note [Inferring a shape once]
// A network's first forward call infers the shapes its deferred parameters
// wait for, and several threads may make that call together (a service's
// inference threads starting at once). infer_shape() holds the parameter's
// mutex: the first call fills in the extents and allocates the deferred
// values, the others find the shape known and only compare theirs with it.
// Readers take the same mutex until then. Once the shape is known and the
// values exist, `shape_known_` (stored with release after the last write)
// lets them read without it: from then on only the exclusive writes
// (initialize, load, reset_ctx, ...) change the fields, and those are the
// caller's to keep apart from other uses. So inference through a warm
// network costs one acquire load per parameter read, and no shared cache
// line is written. The values are drawn when the first call gets to the
// parameter, in the network's order, so concurrent first calls draw the
// same values a single call would, as long as no other thread draws from
// the global generator meanwhile (ops/random.h).

Parameter::Parameter(std::string name, Shape shape, init::InitializerPtr init, GradReq grad_req,
                     ParameterKind kind)
    : name_(std::move(name)),
      shape_(shape),
      init_(std::move(init)),
      grad_req_(grad_req),
      kind_(kind),
      shape_known_(shape_known(shape_)) {}

std::unique_lock<std::mutex> Parameter::lock_unless_known() const {
  if (shape_known_.load(std::memory_order_acquire)) return {};
  return std::unique_lock(mutex_);
}

Shape Parameter::shape() const {
  const auto lock = lock_unless_known();
  return shape_;
}

bool Parameter::initialized() const {
  const auto lock = lock_unless_known();
  return !data_.empty();
}

std::vector<Context> Parameter::list_ctx() const {
  const auto lock = lock_unless_known();
  return contexts_;
}

std::vector<NDArray> Parameter::list_data() const {
  const auto lock = lock_unless_known();
  return data_;
}

void Parameter::initialize(const init::InitializerPtr& default_init,
                           const std::vector<Context>& contexts, bool force_reinit) {
  TAGFLOW_CHECK(!contexts.empty(), "initialize: parameter '{}': expected at least one device",
                name_);
  for (Context c : contexts) check_device(c);
  const std::lock_guard lock(mutex_);
  if (!data_.empty() || deferred_init_) {
    TAGFLOW_CHECK(force_reinit,
                  "initialize: parameter '{}' is already initialized on {}; pass force_reinit "
                  "to draw new values",
                  name_, contexts_text(!data_.empty() ? contexts_ : deferred_contexts_));
  }
  const init::InitializerPtr chosen = init_ != nullptr ? init_ : default_init;
  TAGFLOW_CHECK(chosen != nullptr, "initialize: parameter '{}' has no initializer", name_);
  if (!shape_known(shape_)) {  // wait for the first forward call to give the shape
    data_.clear();
    contexts_.clear();
    deferred_init_ = chosen;
    deferred_contexts_ = contexts;
    return;
  }
  allocate(chosen, contexts);
}

void Parameter::allocate(const init::InitializerPtr& init, const std::vector<Context>& contexts) {
  // Drawn once and copied, so that every device starts from the same values.
  NDArray first = empty(shape_, DType::kFloat32, contexts[0]);
  init->fill(first);
  data_.clear();
  contexts_ = contexts;
  for (Context c : contexts) {
    NDArray copy = c == contexts[0] ? first : first.copyto(c);
    copy.attach_grad(grad_req_);
    data_.push_back(copy);
  }
  deferred_init_ = nullptr;
  deferred_contexts_.clear();
}

bool Parameter::accepts_shape(const Shape& shape) const {
  const auto lock = lock_unless_known();
  if (shape.ndim() != shape_.ndim()) return false;
  for (int axis = 0; axis < shape.ndim(); ++axis) {
    if (shape_[axis] != 0 && shape_[axis] != shape[axis]) return false;
  }
  return true;
}

void Parameter::infer_shape(const Shape& shape) {
  const auto lock = lock_unless_known();
  TAGFLOW_CHECK(shape.ndim() == shape_.ndim(),
                "parameter '{}': declared with shape ({}), inferred ({})", name_, shape_.str(),
                shape.str());
  for (int axis = 0; axis < shape.ndim(); ++axis) {
    TAGFLOW_CHECK(shape_[axis] == 0 || shape_[axis] == shape[axis],
                  "parameter '{}': declared with shape ({}), but the input gives ({})", name_,
                  shape_.str(), shape.str());
  }
  if (shape_known_.load(std::memory_order_relaxed)) return;  // inferred before
  shape_ = shape;
  if (deferred_init_) allocate(deferred_init_, deferred_contexts_);
  shape_known_.store(true, std::memory_order_release);
}

std::size_t Parameter::index_of(Context ctx, const char* what) const {
  // Said as the layer that uses the parameter (Note [Names in order of
  // appearance]: its block's name), not as this function.
  const std::string user = owner_.empty() ? std::string("parameters") : owner_;
  TAGFLOW_CHECK(!data_.empty(), "{}: {} of parameter '{}' asked for, but the parameter is not {}",
                user, what, name_,
                deferred_init_ ? "initialized yet: its shape is inferred on the first forward "
                                 "pass, so run one (net(x)) first"
                               : "initialized: call initialize() on the network first");
  for (std::size_t i = 0; i < contexts_.size(); ++i) {
    if (contexts_[i] == ctx) return i;
  }
  std::vector<Context> wanted = contexts_;
  wanted.push_back(ctx);
  detail::throw_error(
      "{}: parameter '{}' lives on {}, not on {}, where it is used (a layer uses its parameters "
      "on its input's device); put the network on every device it runs on "
      "(collect_params().reset_ctx({{{}}}), or initialize(init, {{{}}}) before its first use), "
      "or move the input with as_in_context({})",
      user, name_, contexts_text(contexts_), ctx.str(), contexts_text(wanted),
      contexts_text(wanted), contexts_[0].str());
}

NDArray Parameter::data(Context ctx) const {
  const auto lock = lock_unless_known();
  return data_[index_of(ctx, "the value")];
}

NDArray Parameter::data() const {
  const auto lock = lock_unless_known();
  TAGFLOW_CHECK(contexts_.size() <= 1,
                "data: parameter '{}' lives on several devices ({}): ask for one with data(ctx)",
                name_, contexts_text(contexts_));
  return data_[index_of(contexts_.empty() ? cpu() : contexts_[0], "the value")];
}

NDArray Parameter::grad(Context ctx) const {
  const auto lock = lock_unless_known();
  return data_[index_of(ctx, "the gradient")].grad();
}

std::vector<NDArray> Parameter::list_grad() const {
  const auto lock = lock_unless_known();
  std::vector<NDArray> grads;
  for (const NDArray& d : data_) grads.push_back(d.grad());
  return grads;
}

void Parameter::set_data(const NDArray& value) {
  const std::lock_guard lock(mutex_);
  TAGFLOW_CHECK(!data_.empty(), "set_data: parameter '{}' is not initialized", name_);
  TAGFLOW_CHECK(value.shape() == shape_, "set_data: parameter '{}' has shape ({}), the value ({})",
                name_, shape_.str(), value.shape().str());
  for (const NDArray& d : data_) value.copyto(d);
}

void Parameter::load(const NDArray& value, const std::vector<Context>& contexts) {
  TAGFLOW_CHECK(value.defined() && value.dtype() == DType::kFloat32,
                "load: parameter '{}': expected a float32 value, got {}", name_,
                value.defined() ? dtype_name(value.dtype()) : "an undefined array");
  TAGFLOW_CHECK(!contexts.empty(), "load: parameter '{}': expected at least one device", name_);
  for (Context c : contexts) check_device(c);
  TAGFLOW_CHECK(accepts_shape(value.shape()), "load: parameter '{}' has shape ({}), the value ({})",
                name_, shape().str(), value.shape().str());
  const std::lock_guard lock(mutex_);
  shape_ = value.shape();
  deferred_init_ = nullptr;  // the value replaces a deferred initialization
  deferred_contexts_.clear();
  replicate(value, contexts);
  shape_known_.store(true, std::memory_order_release);
}

void Parameter::reset_ctx(const std::vector<Context>& contexts) {
  TAGFLOW_CHECK(!contexts.empty(), "reset_ctx: parameter '{}': expected at least one device",
                name_);
  const std::lock_guard lock(mutex_);
  if (data_.empty()) {
    if (deferred_init_) deferred_contexts_ = contexts;
    return;
  }
  replicate(data_[0], contexts);
}

void Parameter::replicate(NDArray source, const std::vector<Context>& contexts) {
  data_.clear();
  for (Context c : contexts) {
    NDArray copy = source.detach().copyto(c);
    copy.attach_grad(grad_req_);
    data_.push_back(copy);
  }
  contexts_ = contexts;
}

void Parameter::zero_grad() {
  const std::lock_guard lock(mutex_);
  for (const NDArray& d : data_) {
    if (grad_req_ != GradReq::kNull) fill(d.grad(), 0);
  }
}

void ParameterDict::add(ParameterPtr parameter) {
  const std::string& name = parameter->name();
  TAGFLOW_CHECK(!contains(name), "parameters: the name '{}' is used twice", name);
  index_[name] = parameters_.size();
  parameters_.push_back(std::move(parameter));
}

ParameterPtr ParameterDict::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    std::vector<std::string> names;
    for (const auto& p : parameters_) names.push_back(p->name());
    detail::throw_error("parameters: no parameter '{}'; there are: {}", name,
                        fmt::join(names, ", "));
  }
  return parameters_[it->second];
}

void ParameterDict::initialize(const init::InitializerPtr& init,
                               const std::vector<Context>& contexts, bool force_reinit) {
  for (const auto& p : parameters_) p->initialize(init, contexts, force_reinit);
}

void ParameterDict::reset_ctx(const std::vector<Context>& contexts) {
  for (const auto& p : parameters_) p->reset_ctx(contexts);
}

void ParameterDict::zero_grad() {
  for (const auto& p : parameters_) p->zero_grad();
}

std::ostream& operator<<(std::ostream& os, const Parameter& parameter) {
  // Python's tuple: a trailing comma for one extent.
  std::string shape = "(";
  for (int axis = 0; axis < parameter.shape().ndim(); ++axis) {
    shape += (axis == 0 ? "" : ", ") + std::to_string(parameter.shape()[axis]);
  }
  shape += parameter.shape().ndim() == 1 ? ",)" : ")";
  std::vector<std::string> contexts;
  for (Context ctx : parameter.list_ctx()) contexts.push_back(ctx.str());
  const DType dtype = parameter.initialized() ? parameter.list_data()[0].dtype() : DType::kFloat32;
  return os << fmt::format("Parameter {} (shape={}, dtype={}, ctx=[{}])", parameter.name(), shape,
                           dtype_name(dtype), fmt::join(contexts, ", "));
}

std::ostream& operator<<(std::ostream& os, const ParameterDict& params) {
  os << "ParameterDict (\n";
  for (const ParameterPtr& p : params) os << "  " << *p << "\n";
  return os << ")";
}

}  // namespace tagflow::nn
