#pragma once
// `tagflow train`: the tutorials' training loop on Fashion-MNIST, as a
// command. One line per epoch (loss, training and test accuracy, seconds,
// images per second), a progress bar on a terminal.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/error.h"
#include "nn/block.h"
#include "nn/data/dataset.h"
#include "nn/dist/mpi_communicator.h"
#include "nn/lr_schedule.h"
#include "tools/progress_line.h"

namespace tagflow::tools {

struct TrainOptions {
  /// "lenet" (the tutorials' network) or "mlp".
  std::string model = "lenet";
  /// The precision the layers compute in: float32, or float16 or bfloat16
  /// with float32 master parameters (nn::amp::autocast; float16 also with
  /// dynamic loss scaling, Note [Dynamic loss scaling] in nn/amp.h).
  DType dtype = DType::kFloat32;
  /// The devices the batch is split across (data parallelism); parameters
  /// live on each of them. The tool's default is every GPU, else cpu(0).
  std::vector<Context> devices = {cpu(0)};
  int epochs = 10;
  std::int64_t batch_size = 256;
  /// 0: the optimizer's own (default_learning_rate).
  double learning_rate = 0;
  /// "sgd" or "adam".
  std::string optimizer = "sgd";
  /// sgd: momentum (0: none), and Nesterov's variant of it.
  double momentum = 0;
  bool nesterov = false;
  /// L2 weight decay.
  double weight_decay = 0;
  /// > 0: the gradients scaled together to this global norm at most.
  double clip_grad_norm = -1;
  /// The learning-rate schedule (nn/lr_schedule.h): "constant", "factor"
  /// (times lr_factor every lr_steps[0] epochs), "multifactor" (times
  /// lr_factor after each epoch of lr_steps), "cosine" or "poly" (to
  /// final_lr at the last update; poly with lr_power); after warmup_epochs
  /// of linear warm-up from 0. Epochs become updates with the number of
  /// batches per epoch.
  std::string lr_schedule = "constant";
  double lr_factor = 0.1;
  std::vector<double> lr_steps;
  double final_lr = 0;
  double lr_power = 2;
  double warmup_epochs = 0;
  /// The Fashion-MNIST IDX files (plain or gzip).
  std::filesystem::path data_dir;
  /// Parameters written after training (none: empty); refused before
  /// training when it cannot be written (check_output_file).
  std::filesystem::path save;
  /// Parameters read before training instead of a fresh initialization.
  std::filesystem::path load;
  /// Initial parameters and the shuffle.
  std::uint64_t seed = 1;
  /// DataLoader threads preparing batches ahead.
  int num_workers = 1;
  /// Train on the first `limit` training images only (0: all).
  std::int64_t limit = 0;
  /// Evaluate on the first `test_limit` test images only (0: all 10,000).
  std::int64_t test_limit = 0;
  /// Draw a progress bar on stderr (when it is a terminal).
  bool progress = true;
  /// A checkpoint at the end of every epoch, and at the next batch
  /// boundary on SIGINT or SIGTERM (then the run stops: TrainingStopped),
  /// in this directory (none: empty; Note [Checkpoints] in
  /// tools/checkpoint.h); the newest `keep_checkpoints` stay.
  std::filesystem::path checkpoint_dir;
  int keep_checkpoints = 3;
  /// Continue from the newest checkpoint in this directory that loads
  /// (none: empty), exactly where it stopped: the same per-epoch figures and
  /// parameters as a run never stopped, for the same options.
  std::filesystem::path resume_dir;
  /// Stop as a signal would after this many batches trained in this run
  /// (0: never); for tests and time-boxed runs.
  std::int64_t stop_after = 0;
  /// Chrome trace of a few training iterations (batches 5 to 9 of the
  /// first epoch, or the first five of a shorter one), written there (none:
  /// empty); refused before training when it cannot be written.
  std::filesystem::path profile;
  /// Print JSON lines (a header, then one per epoch) instead of text, for
  /// `tagflow bench train`; the same fields as tools/pytorch_train.py's.
  bool json = false;
  /// Training across processes (`mpirun -np N tagflow train --dist mpi`):
  /// "none", "mpi" (gradients summed over processes with MPI, in host
  /// memory) or "nccl" (with NCCL between the GPUs of every process, set up
  /// over MPI). Each process trains on its shard of every batch:
  /// `batch_size` is the global batch, split across processes, then across
  /// each process's devices. Only rank 0 prints, profiles and saves; the
  /// figures it prints are summed over every process.
  std::string dist = "none";
  /// The processes, with `dist` other than "none" (the tool passes
  /// MpiCommunicator::world()).
  std::shared_ptr<dist::MpiCommunicator> processes;
  /// With "mpi": gradients travel in messages of about this many bytes.
  std::int64_t bucket_bytes = 1 << 20;
};

/// The device list of `--devices`: "all" (every GPU, else cpu(0)) or names
/// separated by commas, e.g. "gpu:0,gpu:1" or "cpu:0,cpu:1", where a name
/// may be a range ("gpu:0..7" is gpu(0) to gpu(7)). Throws
/// tagflow::Error for a malformed or repeated name, DeviceError for a device
/// that does not exist.
std::vector<Context> parse_devices(const std::string& text, const char* command = "train");

/// The network `name` ("lenet", "mlp" or "resnet18" for 1-channel images),
/// not yet initialized. Throws
/// tagflow::Error for another name.
std::shared_ptr<nn::Sequential> build_model(const std::string& name);
/// Fashion-MNIST from `dir` (its training or test set, the first `limit`
/// images when limit > 0) with the tutorials' transform: ToTensor, then
/// Normalize(0.13, 0.31).
data::Dataset fashion_mnist(const std::filesystem::path& dir, bool train, std::int64_t limit);
/// How `tagflow train` initialises that network: Xavier, or Normal(0.01)
/// for resnet18 (as the tutorials' multi-GPU chapter).
init::InitializerPtr model_initializer(const std::string& name);

/// The schedule of `options` for `batches_per_epoch` updates per epoch
/// (TrainOptions::lr_schedule). Throws tagflow::Error, naming the option,
/// for values that give no schedule.
nn::LrSchedule make_schedule(const TrainOptions& options, std::int64_t batches_per_epoch);

/// The learning rate `tagflow train` uses with `optimizer` when none is
/// given: 0.1 for "sgd", 0.001 for "adam" (Adam's steps are scaled by the
/// gradients' own size, so SGD's rate makes it diverge). Throws
/// tagflow::Error for another name.
double default_learning_rate(const std::string& optimizer);

/// Throws tagflow::Error unless a file can be written at `path`: its
/// directory exists and is writable, and `path` is not a directory nor a
/// file that cannot be written. `what` names it in the message, e.g.
/// "train: --save: expected a file in an existing directory, got
/// 'runs/lenet.safetensors' (no directory 'runs')". Called before work
/// whose result would go there, so that it is not lost.
void check_output_file(const std::filesystem::path& path, const std::string& what);

/// What one epoch gave.
struct EpochResult {
  double loss = 0;  ///< mean per sample
  double train_accuracy = 0;
  double test_accuracy = 0;
  double seconds = 0;  ///< training only, evaluation excluded
  double images_per_second = 0;
  /// The most memory one device held during the epoch's training, in bytes
  /// (arrays and working memory in use, not the allocator's cache).
  std::uint64_t peak_bytes = 0;
  /// With float16: the loss scale after the epoch and the updates skipped
  /// so far; 0 otherwise.
  double loss_scale = 0;
  std::int64_t skipped_updates = 0;
  /// On simulated GPUs keeping modelled time: the images per second the
  /// device model predicts for the epoch's training; 0 otherwise.
  double predicted_images_per_second = 0;
};

/// run_train stopped where it was asked to (a signal, or
/// TrainOptions::stop_after), after writing a checkpoint if it had a
/// directory for one.
class TrainingStopped : public Error {
 public:
  TrainingStopped(const std::string& what, std::filesystem::path checkpoint, int signal)
      : Error(what), checkpoint_(std::move(checkpoint)), signal_(signal) {}
  /// The checkpoint written (empty without a checkpoint directory).
  const std::filesystem::path& checkpoint() const { return checkpoint_; }
  /// The signal that asked (0: stop_after).
  int signal() const { return signal_; }

 private:
  std::filesystem::path checkpoint_;
  int signal_;
};

/// Trains as `options` say, printing one line per epoch; returns each
/// epoch's figures. With 0 epochs, evaluates only (one result, its
/// test_accuracy set). Throws io::FileError when the data set is missing (saying
/// how to install it), io::FileError for a bad `load` file, tagflow::Error
/// before training for a `save` or `profile` file that cannot be written,
/// or a `resume_dir` without a checkpoint that loads or made with other
/// options, when a loss is not finite (diverged), and TrainingStopped when
/// asked to stop. A resumed run returns the epochs it ran.
std::vector<EpochResult> run_train(const TrainOptions& options);

}  // namespace tagflow::tools
