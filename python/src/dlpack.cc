// DLPack: arrays to and from other libraries (PyTorch, NumPy, JAX) without a
// copy, on the same device.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dlpack/dlpack.h>

#include "array_support.h"
#include "bindings.h"

namespace tagflow::python {
namespace {

// Note [DLPack]
// Export (`x.__dlpack__()`, `torch.from_dlpack(x)`): the other library gets
// the array's memory, kept alive by a handle to it in the capsule until it
// lets go. It may read and write that memory at once, outside the engine, so
// the export first waits for every pending operation on the array (read or
// write); work pushed on the array afterwards is the caller's to order with
// the other library's use. A simulated GPU's memory is host memory that no
// other library knows as a device, so its arrays are refused (move them to a
// CPU first). Import (`nd.from_dlpack(t)`): an array over the other library's
// memory (NDArray::from_memory), which it gets back when the array and every
// operation on it are done. The memory must be row-major and compact, as
// tagflow's arrays are; a tensor with other strides is refused.
// A CUDA tensor must be complete when it is imported: tagflow's streams do
// not wait for the other library's (with PyTorch, torch.cuda.synchronize()).
//
// The other library's deleter may need the GIL (NumPy's takes it), and the
// last operation on an imported array may complete on an engine thread while
// the thread holding the GIL waits for the engine (a push held back by
// TAGFLOW_MAX_PENDING_OPS): the worker would stop until the engine's stall
// watch let that push through. So a thread without the GIL hands the
// deleter to a releasing thread of its own, which waits for the GIL instead
// of an engine thread.

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

/// What an exported tensor owns: the array and its shape.
struct Exported {
  NDArray array;
  std::vector<std::int64_t> shape;
  DLManagedTensor managed{};
};

DLDataType dl_type_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {kDLFloat, 32, 1};
    case DType::kFloat16:
      return {kDLFloat, 16, 1};
    case DType::kBFloat16:
      return {kDLBfloat, 16, 1};
    case DType::kInt32:
      return {kDLInt, 32, 1};
    case DType::kInt64:
      return {kDLInt, 64, 1};
    case DType::kUInt8:
      return {kDLUInt, 8, 1};
  }
  throw py::type_error("__dlpack__: an array of unknown dtype");
}

DType dtype_of_dl(const DLDataType& type) {
  if (type.lanes == 1) {
    if (type.code == kDLFloat && type.bits == 32) return DType::kFloat32;
    if (type.code == kDLFloat && type.bits == 16) return DType::kFloat16;
    if (type.code == kDLBfloat && type.bits == 16) return DType::kBFloat16;
    if (type.code == kDLInt && type.bits == 32) return DType::kInt32;
    if (type.code == kDLInt && type.bits == 64) return DType::kInt64;
    if (type.code == kDLUInt && type.bits == 8) return DType::kUInt8;
  }
  const char* kind = type.code == kDLFloat    ? "float"
                     : type.code == kDLBfloat ? "bfloat"
                     : type.code == kDLInt    ? "int"
                     : type.code == kDLUInt   ? "uint"
                                              : "code-";
  std::string name = kind + std::to_string(type.bits);
  if (type.lanes != 1) name += "x" + std::to_string(type.lanes);
  throw py::type_error(
      "from_dlpack: tagflow has float32, float16, bfloat16, int32, int64 and uint8; got " + name);
}

/// The DLPack device of `ctx`, refusing simulated GPUs.
DLDevice dl_device_of(Context ctx) {
  switch (ctx.type) {
    case DeviceType::kCPU:
      return {kDLCPU, 0};
    case DeviceType::kCPUPinned:
      return {kDLCUDAHost, 0};
    case DeviceType::kGPU: {
      const auto& gpus = Engine::get().gpus();
      if (ctx.index < static_cast<int>(gpus.size()) &&
          gpus[static_cast<std::size_t>(ctx.index)].simulated) {
        throw py::buffer_error(
            ctx.str() +
            " is a simulated GPU: its memory is host memory that no other library "
            "knows as a device; move the array to a CPU first "
            "(as_in_context(tagflow.cpu()))");
      }
      return {kDLCUDA, ctx.index};
    }
  }
  throw py::buffer_error("__dlpack__: an array on an unknown device");
}

Context context_of_dl(const DLDevice& device) {
  switch (device.device_type) {
    case kDLCPU:
      return cpu(0);
    case kDLCUDAHost:
      return cpu_pinned(0);
    case kDLCUDA: {
      const auto& gpus = Engine::get().gpus();
      if (device.device_id < static_cast<int>(gpus.size()) &&
          gpus[static_cast<std::size_t>(device.device_id)].simulated) {
        throw py::buffer_error("from_dlpack: a CUDA tensor cannot become an array of gpu(" +
                               std::to_string(device.device_id) + "), a simulated GPU");
      }
      return gpu(device.device_id);
    }
    default:
      throw py::buffer_error(
          "from_dlpack: tagflow takes CPU, CUDA and pinned host tensors, got DLPack "
          "device type " +
          std::to_string(device.device_type));
  }
}

/// Calls imported tensors' deleters on a thread of its own (Note [DLPack]).
class Releaser {
 public:
  static void release(DLManagedTensor* managed) {
    if (managed->deleter == nullptr) return;
    if (PyGILState_Check() != 0) {
      managed->deleter(managed);
      return;
    }
    static Releaser* releaser = new Releaser();  // lives as long as the process
    releaser->post(managed);
  }

 private:
  Releaser() {
    std::thread([this] { run(); }).detach();
  }
  void post(DLManagedTensor* managed) {
    {
      std::lock_guard lock(mutex_);
      pending_.push_back(managed);
    }
    posted_.notify_one();
  }
  [[noreturn]] void run() {
    for (;;) {
      DLManagedTensor* managed = nullptr;
      {
        std::unique_lock lock(mutex_);
        posted_.wait(lock, [&] { return !pending_.empty(); });
        managed = pending_.front();
        pending_.pop_front();
      }
      managed->deleter(managed);
    }
  }

  std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<DLManagedTensor*> pending_;
};

void delete_exported(DLManagedTensor* managed) {
  delete static_cast<Exported*>(managed->manager_ctx);  // the array's handle: no Python
}

py::capsule to_dlpack(const NDArray& array) {
  const DLDevice device = dl_device_of(array.context());
  {
    py::gil_scoped_release released;
    array.wait_to_write();  // Note [DLPack]: nothing pending on it any more
  }
  auto exported = std::make_unique<Exported>();
  exported->array = array;
  exported->shape.assign(array.shape().dims().begin(), array.shape().dims().end());
  DLTensor& tensor = exported->managed.dl_tensor;
  tensor.data = array.raw_data();
  tensor.device = device;
  tensor.ndim = array.ndim();
  tensor.dtype = dl_type_of(array.dtype());
  tensor.shape = exported->shape.data();
  tensor.strides = nullptr;  // compact, row-major
  tensor.byte_offset = 0;
  exported->managed.manager_ctx = exported.get();
  exported->managed.deleter = &delete_exported;
  DLManagedTensor* managed = &exported.release()->managed;
  // A capsule nobody consumed deletes its tensor; a consumer renames it.
  PyObject* capsule = PyCapsule_New(managed, kCapsuleName, [](PyObject* object) {
    if (PyCapsule_IsValid(object, kCapsuleName) == 0) return;  // consumed
    auto* unused = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(object, kCapsuleName));
    if (unused != nullptr && unused->deleter != nullptr) unused->deleter(unused);
  });
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

NDArray from_dlpack(const py::object& source) {
  py::object capsule = source;
  if (py::hasattr(source, "__dlpack__")) capsule = source.attr("__dlpack__")();
  if (PyCapsule_IsValid(capsule.ptr(), kCapsuleName) == 0) {
    throw py::type_error(
        "from_dlpack: expected an object with __dlpack__ or an unconsumed DLPack capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  const DLTensor& tensor = managed->dl_tensor;
  // Checked before the capsule is consumed: a refused tensor stays its
  // owner's, the capsule deleting it as if never handed over.
  const DType dtype = dtype_of_dl(tensor.dtype);
  const Context ctx = context_of_dl(tensor.device);
  if (tensor.ndim < 0 || tensor.ndim > Shape::kMaxDims) {
    throw py::value_error("from_dlpack: at most " + std::to_string(Shape::kMaxDims) +
                          " dimensions, got " + std::to_string(tensor.ndim));
  }
  const std::vector<std::int64_t> dims(tensor.shape, tensor.shape + tensor.ndim);
  if (tensor.strides != nullptr) {
    std::int64_t expected = 1;
    for (int axis = tensor.ndim - 1; axis >= 0; --axis) {
      if (dims[static_cast<std::size_t>(axis)] != 1 && tensor.strides[axis] != expected) {
        throw py::buffer_error(
            "from_dlpack: expected a compact row-major tensor, got strides that are not (make it "
            "contiguous first, e.g. torch's .contiguous())");
      }
      expected *= dims[static_cast<std::size_t>(axis)];
    }
  }
  void* data = static_cast<char*>(tensor.data) + tensor.byte_offset;
  NDArray array = NDArray::from_memory(data, Shape(std::span<const std::int64_t>(dims)), dtype, ctx,
                                       [managed] { Releaser::release(managed); });
  if (PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
  return array;
}

template <typename A, typename Class>
void bind_dlpack_methods(Class& cls) {
  cls.def(
         "__dlpack__",
         [](const A& a, const py::handle& stream) {
           (void)stream;  // the export waits on the host: any stream may use it
           return to_dlpack(a);
         },
         py::arg("stream") = py::none(), "The array's memory as a DLPack capsule, without a copy.")
      .def("__dlpack_device__", [](const A& a) {
        const DLDevice device = dl_device_of(a.context());
        return py::make_tuple(static_cast<int>(device.device_type), device.device_id);
      });
}

}  // namespace

void bind_dlpack(py::module_& m) {
  auto classic =
      py::reinterpret_borrow<py::class_<NDArray, std::unique_ptr<NDArray>>>(m.attr("NDArray"));
  bind_dlpack_methods<NDArray>(classic);
  py::module_ nd = m.attr("nd");
  py::module_ np = m.attr("np");
  nd.def(
      "from_dlpack", [](const py::object& source) { return from_dlpack(source); },
      py::arg("ext_tensor"),
      "An array over another library's tensor (its __dlpack__ or a capsule), without a copy.");
  np.def(
      "from_dlpack", [](const py::object& source) { return NumpyArray(from_dlpack(source)); },
      py::arg("x"));
  nd.def("to_dlpack_for_read", [](const NDArray& a) { return to_dlpack(a); });
  nd.def("to_dlpack_for_write", [](const NDArray& a) { return to_dlpack(a); });
}

}  // namespace tagflow::python
