#include "tools/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
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
  static const std::regex pattern(R"(epoch-(\d{4,9})(?:-batch-(\d{5,12}))?)");
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !std::regex_match(name, match, pattern)) continue;
    out.push_back({.dir = entry.path(),
                   .position = {.epoch = std::stoi(match[1]),
                                .batch = match[2].matched ? std::stoll(match[2]) : 0}});
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
