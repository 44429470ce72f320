// Fuzzes the safetensors reader (nn/io/safetensors.h). Every input, as a file,
// must either load or be refused with a io::FileError; beyond that:
// - io::safetensors_metadata and io::load_safetensors agree: both succeed, or both
//   refuse the file with the same message;
// - a loaded file's tensors come sorted by distinct name, on cpu(0), hold
//   the bytes their data_offsets give (read here with nlohmann's DOM
//   parser), and account for every byte after the header, as Note
//   [Validating a safetensors file] requires;
// - what was loaded, saved again and reloaded, gives the same names,
//   dtypes, shapes, bytes and metadata.

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.h"
#include "nn/io/safetensors.h"

namespace tagflow::fuzz {
namespace {

using Tensors = std::vector<std::pair<std::string, NDArray>>;

struct Loaded {
  std::optional<std::string> error;  ///< the io::FileError's message, if refused
  std::map<std::string, std::string> metadata;
  Tensors tensors;
};

Loaded load(const std::filesystem::path& path) {
  Loaded result;
  std::optional<std::string> metadata_error;
  try {
    result.metadata = io::safetensors_metadata(path);
  } catch (const io::FileError& e) {
    metadata_error = e.what();
  } catch (...) {
    report_unexpected_exception("safetensors_metadata");
  }
  try {
    result.tensors = io::load_safetensors(path);
  } catch (const io::FileError& e) {
    result.error = e.what();
  } catch (...) {
    report_unexpected_exception("load_safetensors");
  }
  if (metadata_error != result.error) {
    report_finding(fmt::format("safetensors_metadata and io::load_safetensors disagree: {} vs {}",
                               metadata_error.value_or("success"),
                               result.error.value_or("success")));
  }
  return result;
}

std::string bytes_of(const NDArray& a) {
  return {static_cast<const char*>(a.raw_data()), static_cast<std::size_t>(a.nbytes())};
}

void check_loaded(const Tensors& tensors, const std::uint8_t* data, std::size_t size) {
  if (size < 8) report_finding(fmt::format("loaded a {}-byte file", size));
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, data, 8);  // little-endian, like the host
  if (header_bytes > size - 8) {
    report_finding(fmt::format("loaded a {}-byte file with a {}-byte header", size, header_bytes));
  }
  const std::uint8_t* data_section = data + 8 + header_bytes;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(data + 8, data_section);
  } catch (const nlohmann::json::exception& e) {
    report_finding(fmt::format("a loaded file's header does not parse: {}", e.what()));
  }
  std::uint64_t tensor_bytes = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, a] = tensors[i];
    if (i > 0 && !(tensors[i - 1].first < name)) {
      report_finding(fmt::format("tensors not sorted by distinct name: '{}' then '{}'",
                                 tensors[i - 1].first, name));
    }
    if (!a.defined() || a.context() != cpu(0) || a.shape().ndim() < 1) {
      report_finding(
          fmt::format("tensor '{}': expected a defined array of at least one "
                      "dimension on cpu(0), got {} dimensions on {}",
                      name, a.shape().ndim(), a.context().str()));
    }
    std::uint64_t begin = 0;
    try {
      begin = header.at(name).at("data_offsets").at(0).get<std::uint64_t>();
    } catch (const nlohmann::json::exception& e) {
      report_finding(fmt::format("tensor '{}': no data_offsets in the header: {}", name, e.what()));
    }
    if (begin > size - 8 - header_bytes || a.nbytes() > size - 8 - header_bytes - begin) {
      report_finding(fmt::format("tensor '{}': {} bytes at {} run past the {}-byte file", name,
                                 a.nbytes(), begin, size));
    }
    if (a.nbytes() > 0 && std::memcmp(a.raw_data(), data_section + begin, a.nbytes()) != 0) {
      report_finding(fmt::format("tensor '{}': the values differ from the file's bytes [{}, {})",
                                 name, begin, begin + a.nbytes()));
    }
    tensor_bytes += a.nbytes();
  }
  if (8 + header_bytes + tensor_bytes != size) {
    report_finding(fmt::format("a {}-byte file with a {}-byte header loaded {} bytes of tensors",
                               size, header_bytes, tensor_bytes));
  }
}

void check_round_trip(const Loaded& first, const std::filesystem::path& path) {
  try {
    io::save_safetensors(path, first.tensors, first.metadata);
  } catch (...) {
    report_unexpected_exception("save_safetensors of what io::load_safetensors gave");
  }
  const Loaded second = load(path);
  if (second.error) report_finding("the saved file does not load again: " + *second.error);
  if (second.metadata != first.metadata) report_finding("the metadata changed in a round trip");
  if (second.tensors.size() != first.tensors.size()) {
    report_finding(fmt::format("{} tensors saved, {} loaded again", first.tensors.size(),
                               second.tensors.size()));
  }
  for (std::size_t i = 0; i < first.tensors.size(); ++i) {
    const auto& [name, a] = first.tensors[i];
    const auto& [name_again, b] = second.tensors[i];
    if (name != name_again || a.dtype() != b.dtype() || a.shape() != b.shape() ||
        bytes_of(a) != bytes_of(b)) {
      report_finding(
          fmt::format("tensor '{}' ({}, shape {}) came back as '{}' ({}, shape {}) "
                      "or with other bytes",
                      name, dtype_name(a.dtype()), a.shape().str(), name_again,
                      dtype_name(b.dtype()), b.shape().str()));
    }
  }
}

}  // namespace
}  // namespace tagflow::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tagflow::fuzz;
  static const FuzzInputFile input("input.safetensors");
  static const FuzzInputFile saved("saved.safetensors");
  input.write(data, size);
  const Loaded loaded = load(input.path());
  if (!loaded.error) {
    check_loaded(loaded.tensors, data, size);
    check_round_trip(loaded, saved.path());
  }
  return 0;
}
