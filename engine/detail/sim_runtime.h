#pragma once
// The simulated CUDA runtime: the state the CUDA runtime keeps per thread and
// per device, kept the same way for simulated GPUs, so that code breaking
// one of CUDA's rules fails on a simulated GPU where it would fail on a real
// one. Internal to engine/ (storage and ops reach it for their simulated paths).
//
// Note [Simulated CUDA rules]
// No GPU runs in CI, so the simulated GPUs are where the CUDA paths' logic is
// tested; they are only worth it if they refuse what a real GPU refuses.
// Each rule below has a test that plants a violation (tests/engine/sim_runtime_test.cc):
// - A current device per thread, 0 on a new thread, changed by set_device()
//   (cudaSetDevice) and by nothing else. A simulated kernel launch
//   (launch_kernel, what ops' run_kernel does on a simulated GPU) fails
//   unless the calling thread's current device is the stream's: "invalid
//   resource handle (cudaErrorInvalidResourceHandle)", as CUDA refuses a
//   kernel launch into another device's stream. Host functions
//   (Stream::enqueue_host), marks, device-side waits and timestamps are not
//   checked: CUDA takes those on a stream of any device.
// - A last-error slot per thread. A failing call leaves its status there
//   until get_last_error() reads and clears it; a simulated kernel launch is
//   checked by reading the slot, as check_launch() reads cudaGetLastError(),
//   so a failure whose status was never cleared fails the next healthy
//   launch on that thread. check_status() clears the slot before it throws.
// - Sticky device errors. Host work that throws is a device fault (a real
//   kernel cannot throw; it faults, and the context is lost): from then on no
//   host work on that device runs, on any of its streams, every later call to
//   enqueue work there fails with the fault, and every mark recorded after it
//   carries the error (Note [Errors of device work] in engine/stream.h). Only
//   reset_device() (cudaDeviceReset, for tests) clears it.
// - Host work must not call back into the device API: set_device() and the
//   streams' calls made from inside host work fail with "operation not
//   permitted (cudaErrorNotPermitted)", as CUDA forbids API calls from a host
//   function. Callbacks of when_finished() run where CUDA runs them (the
//   poller, not a host function) and may use the API.
// The devices are process-wide, as CUDA's contexts are: every engine of the
// process that simulates gpu(i) shares gpu(i)'s sticky state.

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "engine/context.h"
#include "engine/device_model.h"
#include "engine/stream.h"

namespace tagflow::detail::sim {

/// The statuses the simulated runtime returns, named as CUDA names them.
enum class Status : std::uint8_t {
  kSuccess,
  kInvalidDevice,          ///< cudaErrorInvalidDevice
  kInvalidResourceHandle,  ///< cudaErrorInvalidResourceHandle
  kNotPermitted,           ///< cudaErrorNotPermitted
  kDeviceFault,            ///< a sticky fault (cudaErrorLaunchFailure)
};

/// "<CUDA's message> (<error name>)", e.g. "invalid resource handle
/// (cudaErrorInvalidResourceHandle)".
std::string describe(Status status);

/// Makes the simulated devices 0..count-1 exist (at least; never fewer).
void register_devices(int count);
/// How many simulated devices exist in the process.
int device_count();

/// The calling thread's current simulated device (0 on a new thread).
int current_device();
/// cudaSetDevice: kInvalidDevice for an index no simulated GPU has,
/// kNotPermitted inside host work; a failure is also left in the last-error slot.
Status set_device(int device);
/// cudaGetLastError: the calling thread's last failure, then clears it.
Status get_last_error();
/// cudaPeekAtLastError: the same without clearing it.
Status peek_last_error();
/// Leaves `status` in the calling thread's last-error slot (a failing call does).
void set_last_error(Status status);

/// A kernel launch on a simulated GPU: enqueues `kernel` on `stream` when the
/// calling thread's current device is the stream's; otherwise enqueues
/// nothing and leaves kInvalidResourceHandle in the last-error slot, as a
/// real launch does. Check it as a real one, through the slot:
///
///   sim::launch_kernel(*rc.stream, kernel);
///   sim::check_status(sim::get_last_error(), "kernel launch", rc.ctx);
void launch_kernel(Stream& stream, Stream::HostFunction kernel);
/// The same, for a kernel doing `work`: on a GPU with a device model it
/// lasts what the model says (Note [Modelled time] in engine/device_model.h)
/// and is skipped on a timing-only one (Note [Timing-only GPUs] in sim_stream.h).
void launch_kernel(Stream& stream, const KernelWork& work, Stream::HostFunction kernel);

/// Enqueues on `stream` (a simulated GPU's) the copy of `bytes` from memory
/// of `from` to memory of `to`, done by `copy`. With a device model it lasts
/// what the link between them takes; on a timing-only GPU it is skipped and,
/// when `to` is host memory, throws NotComputedError once enqueued (its
/// bytes would be what no kernel computed).
void enqueue_copy(Stream& stream, Context from, Context to, std::uint64_t bytes,
                  Stream::HostFunction copy);
/// Seconds the device model gives a copy of `bytes` from `from` to `to`.
double copy_seconds(const DeviceModel& model, Context from, Context to, double bytes);

/// True while the calling thread runs host work of a simulated stream.
bool in_host_work();
/// Marks the calling thread as running host work while it lives.
class HostWorkScope {
 public:
  HostWorkScope();
  ~HostWorkScope();
  HostWorkScope(const HostWorkScope&) = delete;
  HostWorkScope& operator=(const HostWorkScope&) = delete;

 private:
  bool outer_;
};

/// gpu(device)'s sticky fault, or null.
std::exception_ptr device_fault(int device);
/// Records `fault` as gpu(device)'s sticky fault (the first one stays).
void set_device_fault(int device, std::exception_ptr fault);
/// cudaDeviceReset for tests: clears gpu(device)'s sticky fault.
void reset_device(int device);

/// Throws DeviceError "<call> failed on <where>: <message> (<name>)" (Note
/// [CUDA status messages] in cuda_check.h), clearing the calling thread's
/// last error first, as the CUDA check does.
[[noreturn]] void throw_status(Status status, std::string_view call, Context where);
/// throw_status unless `status` is kSuccess:
///
///   sim::check_status(sim::set_device(1), "cudaSetDevice", gpu(1));
inline void check_status(Status status, std::string_view call, Context where) {
  if (status != Status::kSuccess) [[unlikely]]
    throw_status(status, call, where);
}

/// Makes gpu(device) current for its lifetime, then restores the previous one.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_;
};

}  // namespace tagflow::detail::sim
