#pragma once
// Checkpoints of `tagflow train --checkpoint DIR`, and finding the one to
// resume from (`--resume DIR`).
//
// Note [Checkpoints]
// A checkpoint is a directory DIR/epoch-E (after E epochs) or
// DIR/epoch-E-batch-B (B batches into epoch E + 1, when a signal stopped
// the run there) holding parameters.safetensors (Block::save_parameters)
// and trainer.safetensors (Trainer::save_states), whose metadata says where
// training stood (model, epoch, batch, seed, batch size, limit, devices,
// processes, the sums of the unfinished epoch, tagflow's version). It is
// written into DIR/.partial-<name>, every file flushed, then renamed to its
// name: a directory of that name is always whole. A crash leaves at most a
// .partial directory, which is ignored and replaced. Only the newest `keep`
// checkpoints stay. Resuming takes the newest checkpoint that loads; one
// that does not (a damaged file) is reported and the one before it is used.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nn/block.h"
#include "nn/trainer.h"

namespace tagflow::tools {

/// Where training stood when a checkpoint was written.
struct CheckpointPosition {
  int epoch = 0;           ///< epochs completed
  std::int64_t batch = 0;  ///< batches of the next epoch already trained
};

struct Checkpoint {
  std::filesystem::path dir;
  CheckpointPosition position;
};

/// "epoch-0003" or "epoch-0003-batch-00017".
std::string checkpoint_name(const CheckpointPosition& position);

/// Writes the checkpoint of `net` and `trainer` at `position` into `dir`
/// (made if missing) with `metadata` (Note [Checkpoints]), then removes all
/// but the newest `keep` checkpoints. Returns its directory. Throws
/// io::FileError when it cannot write.
std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                       const CheckpointPosition& position, const nn::Block& net,
                                       nn::Trainer& trainer,
                                       std::map<std::string, std::string> metadata, int keep);

/// The checkpoints in `dir` (whole ones, by name), newest first; none for a
/// directory that does not exist.
std::vector<Checkpoint> list_checkpoints(const std::filesystem::path& dir);

/// Reads both files of `checkpoint` whole, as loading them would, and
/// returns the metadata of its trainer file. Throws io::FileError for a
/// file that is missing or damaged.
std::map<std::string, std::string> validate_checkpoint(const Checkpoint& checkpoint);

}  // namespace tagflow::tools
