#pragma once
// EngineConfig: every tunable of the runtime, read once, logged at start-up
// and listed by `tagflow info` with where each value came from. The
// process-wide engine takes it from the environment (from_env()), or from
// code through Engine::configure() before its first use:
//
//   EngineConfig config = EngineConfig::from_env();  // the environment as defaults
//   config.cpu_workers = 4;
//   config.set_sim_gpus("2");
//   Engine::configure(config);                        // before any array or network
//
// Threads: concurrent reads, exclusive writes (a value).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/device_model.h"
#include "engine/schedule.h"

namespace tagflow {

/// Which engine implementation `make_engine` builds.
enum class EngineKind { kThreaded, kNaive };

/// Whether a float32 convolution on a real GPU may fall back to TF32
/// tensor-op math when no float32 (FMA) algorithm of cuDNN fits its
/// workspace limit (Note [Choosing cuDNN's algorithms] in
/// ops/kernels/conv_algorithm.h).
enum class ConvTf32 { kAllow, kForbid };

/// How CPU devices and simulated GPUs convolve (Note [Convolution on the
/// CPU] in ops/kernels/conv_cpu.cc): with oneDNN's kernels where oneDNN has
/// one for the geometry on this processor, Winograd's where faster, lowering
/// to matrix products otherwise (kAuto); the same without Winograd's
/// (kDirect: every result within float32's bound for sums in any order); or
/// always by lowering (kIm2col).
enum class CpuConv { kAuto, kDirect, kIm2col };

/// Which library multiplies matrices on CPU devices and simulated GPUs (Note
/// [The CPU BLAS] in ops/kernels/gemm_cpu.cc): oneDNN's sgemm, which picks
/// its kernels from the processor's instructions itself (kAuto where the
/// build has oneDNN, and kOneDnn), or OpenBLAS's (kOpenBlas, the default of
/// a build without oneDNN), whose kernels follow the processors it knows.
enum class CpuGemm { kAuto, kOneDnn, kOpenBlas };

/// One setting as `tagflow info` lists it.
struct ConfigSetting {
  std::string variable;  ///< its environment variable: "TAGFLOW_CPU_WORKERS"
  std::string value;     ///< as describe() spells it: "4"
  std::string source;    ///< "default", "environment" or "code"
};

struct EngineConfig {
  /// TAGFLOW_ENGINE: "threaded" (default) or "naive" (runs every push
  /// synchronously in the caller, for debugging).
  EngineKind kind = EngineKind::kThreaded;
  /// TAGFLOW_CPU_WORKERS: worker threads per `cpu(i)` device (default: cores).
  int cpu_workers = 0;
  /// TAGFLOW_SIM_GPUS: number of simulated GPUs (default 0: real GPUs only),
  /// as N, N:MODEL (keeping modelled time, Note [Modelled time] in
  /// engine/device_model.h) or N:MODEL:timing (timing only: kernels are
  /// timed, not run). MODEL is a built-in profile or a JSON file.
  int sim_gpus = 0;
  /// The simulated GPUs' device model; none: they keep the host's time.
  std::optional<DeviceModel> sim_model;
  /// Simulated GPUs with a model skip their kernels and only time them.
  bool sim_timing_only = false;
  /// TAGFLOW_WORKER_SPIN: polls of an empty queue before a worker sleeps.
  int worker_spin = 2000;
  /// TAGFLOW_MAX_PENDING_OPS: operations a client thread may have pending
  /// before its pushes pause (0: no limit), divided by the dependency edges
  /// per operation pushed lately (1 to 16). See Note [Bounded run-ahead].
  int max_pending = 16384;
  /// TAGFLOW_MEMORY_LIMIT: bytes each device may hold (in use plus cached),
  /// with an optional K, M or G suffix; 0 (default) leaves only the device's
  /// own limit. How the out-of-memory path is exercised on simulated GPUs.
  std::uint64_t memory_limit = 0;
  /// TAGFLOW_PROFILER: record every operation for the profiler.
  bool profiler = false;
  /// TAGFLOW_DUMP_SIGNAL: "USR1" (default), "USR2" or "off": the signal that
  /// makes the process-wide engine print its dependency state to standard
  /// error (engine/dump_signal.h). 0 when off.
  int dump_signal = 0;
  /// TAGFLOW_WATCHDOG: seconds without a completed operation, while some are
  /// pending, after which the process-wide engine logs its dependency state
  /// (engine/watchdog.h); 0 (default) is off.
  double watchdog_seconds = 0;
  /// TAGFLOW_EXIT_TIMEOUT: at exit, the process-wide engine waits for the
  /// work pushed so far, and gives up (logging what is stuck) once no
  /// operation has completed for this many seconds; 0 does not wait
  /// (Note [Engine lifetime] in engine.h).
  double exit_timeout_seconds = 10;
  /// TAGFLOW_CONV_TF32: "allow" (default: the fallback runs, with a warning
  /// once per shape) or "forbid" (it throws DeviceError instead). Float32
  /// algorithms are always preferred; this only decides what happens when
  /// none fits.
  ConvTf32 conv_tf32 = ConvTf32::kAllow;
  /// TAGFLOW_CPU_CONV: "auto" (default: oneDNN where it has a kernel,
  /// Winograd's where faster), "direct" (oneDNN without Winograd's) or
  /// "im2col" (always lowered to OpenBLAS products).
  CpuConv cpu_conv = CpuConv::kAuto;
  /// TAGFLOW_CPU_GEMM: "auto" (default: oneDNN where the build has it),
  /// "onednn" or "openblas".
  CpuGemm cpu_gemm = CpuGemm::kAuto;
  /// TAGFLOW_SCHEDULE ("random:SEED", "pct:SEED[:DEPTH[:STEPS]]",
  /// "replay:FILE") and TAGFLOW_SCHEDULE_RECORD (a file): a controlled
  /// schedule (Note [Controlled schedules] in engine/schedule.h), run by the
  /// naive engine, which TAGFLOW_SCHEDULE selects unless TAGFLOW_ENGINE says
  /// otherwise (threaded with a schedule is refused).
  ScheduleOptions schedule;
  /// TAGFLOW_LOG_LEVEL: trace, debug, info, warn, error, critical or off.
  std::string log_level = "warn";

  /// Reads every TAGFLOW_* variable; a malformed value throws tagflow::Error
  /// naming the variable, what it accepts and what it got.
  static EngineConfig from_env();
  /// Sets sim_gpus, sim_model and sim_timing_only from TAGFLOW_SIM_GPUS's
  /// syntax ("8:h100-sxm:timing"); throws tagflow::Error saying what it
  /// expected for a malformed value or an unknown model.
  void set_sim_gpus(std::string_view text);
  /// TAGFLOW_SIM_GPUS's spelling of the three: "2", "8:h100-sxm:timing".
  std::string sim_gpus_text() const;
  /// The defaults for this machine, ignoring the environment.
  static EngineConfig defaults();
  /// Throws ConfigError naming the first setting out of the range its
  /// environment variable accepts (cpu_workers 0, a log level "loud", a
  /// controlled schedule on the threaded engine, ...).
  void check() const;

  /// (environment variable, effective value) pairs, in a stable order.
  std::vector<std::pair<std::string, std::string>> describe() const;
  /// describe(), with where each value came from: for a configuration set
  /// from code (`from_code`: Engine::configure), "code" where it differs from
  /// what the environment gives; otherwise "environment" where the value is
  /// not this machine's default, "default" where it is.
  std::vector<ConfigSetting> sources(bool from_code) const;
};

const char* to_string(EngineKind kind);
/// "allow" or "forbid", as TAGFLOW_CONV_TF32 spells them.
const char* to_string(ConvTf32 policy);

const char* to_string(CpuConv kind);
/// "auto", "onednn" or "openblas", as TAGFLOW_CPU_GEMM spells them.
const char* to_string(CpuGemm kind);

}  // namespace tagflow
