// CudaStream on a real GPU: kernels run in stream order, marks finish after
// them, and one stream waits for another on the device. Skipped, with the
// reason, where there is no usable GPU; always compiled (for sm_80 and sm_90)
// when CUDA is on, so device code and the backend link in CI.

#include <cuda_runtime.h>

#include <string>

#include <gtest/gtest.h>

#include "engine/detail/device_backend.h"

namespace tagflow::detail {
namespace {

__global__ void add_one(int* value, int times) {
  for (int i = 0; i < times; ++i) atomicAdd(value, 1);
}

class CudaStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    backend_ = make_cuda_backend(why_not);
    if (!backend_) GTEST_SKIP() << why_not;
  }
  std::unique_ptr<DeviceBackend> backend_;
};

TEST_F(CudaStreamTest, KernelsRunInStreamOrderAndMarksFinishAfterThem) {
  auto stream = backend_->make_stream(gpu(0), QueueKind::kCompute);
  auto s = static_cast<cudaStream_t>(stream->native_handle());
  int* value = nullptr;
  ASSERT_EQ(cudaMalloc(&value, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(value, 0, sizeof(int), s), cudaSuccess);
  for (int i = 0; i < 10; ++i) add_one<<<1, 1, 0, s>>>(value, 1000);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::uint64_t mark = stream->record();
  stream->synchronize(mark);
  EXPECT_TRUE(stream->finished(mark));
  int host = 0;
  ASSERT_EQ(cudaMemcpy(&host, value, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, 10000);
  EXPECT_EQ(stream->error(), nullptr);
  cudaFree(value);
}

TEST_F(CudaStreamTest, CopyStreamWaitsForComputeStreamOnTheDevice) {
  auto compute = backend_->make_stream(gpu(0), QueueKind::kCompute);
  auto copy = backend_->make_stream(gpu(0), QueueKind::kCopy);
  int* value = nullptr;
  ASSERT_EQ(cudaMalloc(&value, sizeof(int)), cudaSuccess);
  auto cs = static_cast<cudaStream_t>(compute->native_handle());
  ASSERT_EQ(cudaMemsetAsync(value, 0, sizeof(int), cs), cudaSuccess);
  add_one<<<1, 1, 0, cs>>>(value, 100000);
  const std::uint64_t produced = compute->record();
  copy->wait(*compute, produced);
  int host = -1;
  ASSERT_EQ(cudaMemcpyAsync(&host, value, sizeof(int), cudaMemcpyDeviceToHost,
                            static_cast<cudaStream_t>(copy->native_handle())),
            cudaSuccess);
  copy->synchronize(copy->record());
  EXPECT_EQ(host, 100000);
  cudaFree(value);
}

}  // namespace
}  // namespace tagflow::detail
