#pragma once
// Parameter: a named array a block learns, with one copy (and one gradient)
// per device it is initialised on; ParameterDict: the parameters of a block
// and its children, in registration order.
//
//   auto params = net.collect_params();
//   params.initialize(init::Xavier(), {gpu(0), gpu(1)});   // identical copies
//   NDArray w = params.get("dense0_weight")->data(gpu(1));
//
// A shape with an extent 0 is unknown until the first forward call infers it
// (Dense without in_units): initialization is then deferred until that call.
//
// Threads: concurrent reads, exclusive writes. shape(), initialized(),
// data(), grad(), list_ctx(), list_data(), list_grad() and infer_shape() may
// be called from several threads at once, so that several threads may make
// a network's first forward call together: the first infer_shape() fixes the
// shape and completes a deferred initialization, exactly once, and the others
// find it done (Note [Inferring a shape once]). initialize(), load(),
// set_data(), reset_ctx() and zero_grad() change the parameter: one thread,
// while no other uses it. A ParameterDict is the same: reads concurrently,
// add() and its initialize(), reset_ctx(), zero_grad() from one thread.

#include <atomic>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nn/initializer.h"
#include "ops/ndarray.h"

namespace tagflow::nn {

/// What a parameter's values are (Note [Running state across devices] in
/// nn/trainer.h).
enum class ParameterKind {
  kLearned,       ///< updated from its gradient (or frozen): the same on every device
  kRunningState,  ///< updated by forward passes, per device (BatchNorm's statistics)
};

class Parameter {
 public:
  /// `init` null: the initializer given to initialize() is used.
  Parameter(std::string name, Shape shape, init::InitializerPtr init = nullptr,
            GradReq grad_req = GradReq::kWrite, ParameterKind kind = ParameterKind::kLearned);

  const std::string& name() const { return name_; }
  /// The declared shape, with its unknown extents (0) filled in once inferred.
  Shape shape() const;
  GradReq grad_req() const { return grad_req_; }
  ParameterKind kind() const { return kind_; }
  /// Whether `shape` agrees with the declared shape's known extents (0 is
  /// unknown and agrees with any).
  bool accepts_shape(const Shape& shape) const;
  /// True once values exist on at least one device.
  bool initialized() const;

  /// Allocates the parameter on every device of `contexts` and fills it (the
  /// same values everywhere); deferred while the shape is unknown. Throws if
  /// already initialized, unless `force_reinit`.
  void initialize(const init::InitializerPtr& default_init, const std::vector<Context>& contexts,
                  bool force_reinit = false);
  /// Fills in the unknown extents (0 in the declared shape) and completes a
  /// deferred initialization, once: a call that finds the shape already
  /// inferred (by another thread, say) only checks `shape` against it.
  /// Throws when a known extent differs.
  void infer_shape(const Shape& shape);

  /// The copy on `ctx` (records gradients when autograd records).
  NDArray data(Context ctx) const;
  /// The copy on the only device (throws when there are several).
  NDArray data() const;
  /// The gradient of the copy on `ctx`.
  NDArray grad(Context ctx) const;
  std::vector<Context> list_ctx() const;
  std::vector<NDArray> list_data() const;
  std::vector<NDArray> list_grad() const;

  /// Copies `value` (same shape) into every device's copy.
  void set_data(const NDArray& value);
  /// Makes copies of `value` (float32; its shape must agree with the known
  /// extents, and gives the unknown ones) the parameter's data on every
  /// device of `contexts`, whether or not it was initialized (gradients
  /// reset). The way parameter files are loaded.
  void load(const NDArray& value, const std::vector<Context>& contexts);
  /// Moves the parameter to `contexts` (values kept, gradients reset).
  void reset_ctx(const std::vector<Context>& contexts);
  /// Sets every gradient to 0 (for GradReq::kAdd).
  void zero_grad();

 private:
  friend class Block;  // renames its parameters with itself (Note [Names in order of appearance])

  /// Holds `mutex_` while the shape may still be inferred by another thread;
  /// nothing once it is known (Note [Inferring a shape once]).
  std::unique_lock<std::mutex> lock_unless_known() const;
  std::size_t index_of(Context ctx, const char* what) const;
  void allocate(const init::InitializerPtr& init, const std::vector<Context>& contexts);
  /// Makes a copy of `source` (taken by value: it may be one of the data
  /// replaced) the data on every device of `contexts`, each with a fresh gradient.
  void replicate(NDArray source, const std::vector<Context>& contexts);

  std::string name_;
  /// The block that registered it ("dense0"), for errors; empty for one of your own.
  std::string owner_;
  Shape shape_;
  init::InitializerPtr init_;
  GradReq grad_req_;
  ParameterKind kind_;
  std::vector<Context> contexts_;
  std::vector<NDArray> data_;  ///< one per context, each with attach_grad(grad_req_)
  /// Set while the initialization waits for the shape.
  init::InitializerPtr deferred_init_;
  std::vector<Context> deferred_contexts_;
  /// Guards the fields above while `shape_known_` is false.
  mutable std::mutex mutex_;
  /// Set (release) once shape_ has no unknown extent and any deferred
  /// initialization is done; from then on only the exclusive writes change
  /// the fields, and readers skip the mutex.
  std::atomic<bool> shape_known_{false};
};

using ParameterPtr = std::shared_ptr<Parameter>;

/// "Parameter dense0_weight (shape=(256, 784), dtype=float32, ctx=[gpu(0), gpu(1)])",
/// as Gluon prints one (shape=(256, 0) and ctx=[] before initialization).
std::ostream& operator<<(std::ostream& os, const Parameter& parameter);

/// Parameters by name, in the order they were added.
class ParameterDict {
 public:
  void add(ParameterPtr parameter);
  /// The parameter called `name`; throws naming the ones there are.
  ParameterPtr get(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  std::size_t size() const { return parameters_.size(); }
  auto begin() const { return parameters_.begin(); }
  auto end() const { return parameters_.end(); }

  void initialize(const init::InitializerPtr& init, const std::vector<Context>& contexts,
                  bool force_reinit = false);
  void reset_ctx(const std::vector<Context>& contexts);
  void zero_grad();

 private:
  std::vector<ParameterPtr> parameters_;
  std::map<std::string, std::size_t> index_;
};

/// Every parameter on its own line, as Gluon prints `net.collect_params()`:
///
///   ParameterDict (
///     Parameter dense0_weight (shape=(256, 784), dtype=float32, ctx=[cpu(0)])
///     Parameter dense0_bias (shape=(256,), dtype=float32, ctx=[cpu(0)])
///   )
std::ostream& operator<<(std::ostream& os, const ParameterDict& params);

}  // namespace tagflow::nn
