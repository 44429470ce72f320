#include "tools/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "nn/io/file_error.h"
#include "nn/io/safetensors.h"

namespace tagflow::tools {

namespace {

constexpr const char* kPartialPrefix = ".partial-";

/// Flushes a directory's entries (the renames in it) to disk.
void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

/// Reads a run of `min` to `max` decimal digits at the front of `text`, and
/// drops it from `text`; nothing when the run is shorter or longer.
std::optional<std::int64_t> take_digits(std::string_view& text, std::size_t min, std::size_t max) {
  std::size_t n = 0;
  while (n < text.size() && text[n] >= '0' && text[n] <= '9') ++n;
  if (n < min || n > max) return std::nullopt;
  std::int64_t value = 0;
  for (std::size_t i = 0; i < n; ++i) value = value * 10 + (text[i] - '0');
  text.remove_prefix(n);
  return value;
}

/// The position a checkpoint directory's name gives ("epoch-EEEE" or
/// "epoch-EEEE-batch-BBBBB"), or nothing for any other name.
std::optional<CheckpointPosition> parse_checkpoint_name(std::string_view name) {
  constexpr std::string_view kEpoch = "epoch-", kBatch = "-batch-";
  if (!name.starts_with(kEpoch)) return std::nullopt;
  name.remove_prefix(kEpoch.size());
  const std::optional<std::int64_t> epoch = take_digits(name, 4, 9);
  if (!epoch) return std::nullopt;
  CheckpointPosition position{.epoch = static_cast<int>(*epoch), .batch = 0};
  if (name.empty()) return position;
  if (!name.starts_with(kBatch)) return std::nullopt;
  name.remove_prefix(kBatch.size());
  const std::optional<std::int64_t> batch = take_digits(name, 5, 12);
  if (!batch || !name.empty()) return std::nullopt;
  position.batch = *batch;
  return position;
}

}  // namespace

std::string checkpoint_name(const CheckpointPosition& position) {
  return position.batch == 0
             ? fmt::format("epoch-{:04}", position.epoch)
             : fmt::format("epoch-{:04}-batch-{:05}", position.epoch, position.batch);
}

std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                       const CheckpointPosition& position, const nn::Block& net,
                                       nn::Trainer& trainer,
                                       std::map<std::string, std::string> metadata, int keep) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw io::FileError(dir, "cannot make the checkpoint directory: " + error.message());
  const std::string name = checkpoint_name(position);
  const std::filesystem::path partial = dir / (kPartialPrefix + name);
  const std::filesystem::path whole = dir / name;
  std::filesystem::remove_all(partial, error);  // left by a crash
  std::filesystem::create_directory(partial, error);
  if (error) throw io::FileError(partial, "cannot make it: " + error.message());
  metadata["epoch"] = std::to_string(position.epoch);
  metadata["batch"] = std::to_string(position.batch);
  net.save_parameters(partial / "parameters.safetensors");
  trainer.save_states(partial / "trainer.safetensors", metadata);
  sync_directory(partial);
  std::filesystem::remove_all(whole, error);  // an older one of the same position
  std::filesystem::rename(partial, whole, error);
  if (error) throw io::FileError(whole, "cannot put the checkpoint in place: " + error.message());
  sync_directory(dir);
  const std::vector<Checkpoint> all = list_checkpoints(dir);
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < all.size(); ++i) {
    std::filesystem::remove_all(all[i].dir, error);  // best effort: an old one may stay
  }
  return whole;
}

std::vector<Checkpoint> list_checkpoints(const std::filesystem::path& dir) {
  std::vector<Checkpoint> out;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!entry.is_directory()) continue;
    const std::optional<CheckpointPosition> position =
        parse_checkpoint_name(entry.path().filename().string());
    if (position) out.push_back({.dir = entry.path(), .position = *position});
  }
  std::sort(out.begin(), out.end(), [](const Checkpoint& a, const Checkpoint& b) {
    return std::pair{a.position.epoch, a.position.batch} >
           std::pair{b.position.epoch, b.position.batch};
  });
  return out;
}

std::map<std::string, std::string> validate_checkpoint(const Checkpoint& checkpoint) {
  (void)io::load_safetensors(checkpoint.dir / "parameters.safetensors", cpu());
  (void)io::load_safetensors(checkpoint.dir / "trainer.safetensors", cpu());
  return io::safetensors_metadata(checkpoint.dir / "trainer.safetensors");
}

}  // namespace tagflow::tools
