// A program that forks, as data pipelines and test runners do (Note
// [Engine lifetime] in engine/engine.h):
//  1. before it has used tagflow: the child starts its own engine and
//     computes as usual;
//  2. after, with work in flight, a data loader's workers running, a
//     watchdog and arrays and a network in globals: a child that uses the
//     parent's engine gets ForkError from every call instead of hanging, and
//     its exit (the exit hook, the globals' destructors) does not hang;
//  3. a child that leaves the engine alone exits cleanly, and one that
//     execs another program runs it;
//  4. the parent goes on computing.
// Each child reports through its exit status; the parent waits for each
// with a time limit.

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tagflow/tagflow.h"
#include "tests/engine/lifecycle/lifecycle.h"

using namespace tagflow;
using namespace std::chrono_literals;

// Default-constructed before the engine exists, assigned in main.
NDArray weights;
NDArray in_flight;
nn::Sequential net;
std::optional<data::DataLoader> loader;
std::optional<Watchdog> watchdog;

namespace {

constexpr auto kChildLimit = 60s;

/// Checks that `call` throws ForkError naming `what` and the way out.
template <typename Call>
void expect_fork_error(const std::string& what, Call&& call) {
  try {
    call();
  } catch (const ForkError& e) {
    const std::string message = e.what();
    LIFECYCLE_CHECK(message.find(what) != std::string::npos &&
                        message.find("before fork()") != std::string::npos &&
                        message.find("exec") != std::string::npos,
                    what + ": unexpected message: " + message);
    return;
  } catch (const std::exception& e) {
    lifecycle::fail(__FILE__, __LINE__, what + ": expected ForkError, got: " + e.what());
  }
  lifecycle::fail(__FILE__, __LINE__, what + ": expected ForkError, nothing was thrown");
}

/// Forks; the child runs `body` and exits with its status through exit(),
/// so that the exit hook and the statics' destructors run there too.
template <typename Body>
lifecycle::Ended in_child(Body&& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  LIFECYCLE_CHECK(pid >= 0, "fork failed");
  if (pid == 0) std::exit(body());
  return lifecycle::wait_for(pid, kChildLimit);
}

void check_child(const char* what, const lifecycle::Ended& ended, int status = 0) {
  LIFECYCLE_CHECK(ended.exited_with(status), std::string(what) + ": " + ended.describe());
  std::printf("%s: %s\n", what, ended.describe().c_str());
}

/// 48 small images with labels, in host memory.
data::ArrayDataset small_data_set() {
  constexpr std::int64_t n = 48;
  std::vector<float> pixels(static_cast<std::size_t>(n * 12 * 12));
  std::iota(pixels.begin(), pixels.end(), 0.f);
  for (float& p : pixels) p = p / static_cast<float>(pixels.size());
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n), 3);
  return data::ArrayDataset(data::HostArray::from<float>(pixels, {n, 1, 12, 12}),
                            data::HostArray::from<std::int32_t>(labels, {n}));
}

}  // namespace

int main() {
  const std::vector<Context> devices = [] {
    // Asking for the GPU count starts nothing: the engine is not made yet.
    const char* sim = std::getenv("TAGFLOW_SIM_GPUS");
    return sim != nullptr && std::string(sim) != "0" ? std::vector<Context>{cpu(0), gpu(0)}
                                                     : std::vector<Context>{cpu(0), cpu(1)};
  }();

  // 1. Forked before any engine exists: the child makes its own.
  check_child("child forked before the engine started", in_child([&] {
                NDArray x = arange(0, 10, 1, DType::kFloat32, devices[1]);
                LIFECYCLE_CHECK(sum(x * 2.0).asscalar<float>() == 90.f, "sum in the child");
                Engine::get().wait_for_all();
                return 0;
              }));

  // 2. The parent starts the engine: a LeNet-shaped network on each device,
  // a loader whose workers run, a watchdog, and work in flight at the fork.
  random::seed(2);
  net.add(nn::Conv2D(4, 3, "relu"), nn::MaxPool2D(2, 2), nn::Dense(16, "relu"), nn::Dense(10));
  net.initialize(init::Xavier(), devices);
  loader.emplace(small_data_set(), 8, data::DataLoaderOptions{.num_workers = 2});
  watchdog.emplace(Engine::get(), 60s, [](const DependencyState&) {});
  const data::Batch first = *loader->next();
  for (Context ctx : devices) {
    LIFECYCLE_CHECK(net(first.data.as_in_context(ctx)).shape() == Shape({8, 10}), "forward");
  }
  weights = (*net.collect_params().begin())->data(devices[0]);
  in_flight = weights;
  for (int i = 0; i < 2000; ++i) in_flight = in_flight * 1.0001 + 0.001;
  const NDArray slow = ones({4}, DType::kFloat32, devices[1]);
  Engine::get().push(
      {.name = "slow", .ctx = devices[1], .writes = {slow.var()}, .fn = [](const RunContext&) {
         std::this_thread::sleep_for(100ms);
       }});

  check_child("child using the parent's engine", in_child([] {
                expect_fork_error("push", [] {
                  Engine::get().push(
                      {.name = "in the child", .ctx = cpu(0), .fn = [](const RunContext&) {}});
                });
                expect_fork_error("new_var", [] { (void)ones({2}); });
                expect_fork_error("new_var", [] { (void)(weights + 1.0); });
                expect_fork_error("wait_to_read", [] { weights.wait_to_read(); });
                expect_fork_error("wait_to_write", [] { in_flight.wait_to_write(); });
                expect_fork_error("wait_for_all", [] { Engine::get().wait_for_all(); });
                expect_fork_error("dependency_state",
                                  [] { (void)Engine::get().dependency_state(); });
                expect_fork_error("DataLoader::next", [] { (void)loader->next(); });
                // Arrays inherited from the parent go out of scope: nothing happens.
                { const NDArray copy = in_flight; }
                weights = NDArray();
                return 0;  // exit(): the exit hook and the globals' destructors
              }));
  check_child("child leaving the engine alone", in_child([] {
                std::vector<int> values(1000);
                std::iota(values.begin(), values.end(), 1);
                return std::accumulate(values.begin(), values.end(), 0) == 500500 ? 0 : 1;
              }));
  {
    std::fflush(nullptr);
    const pid_t pid = fork();
    LIFECYCLE_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", "exit 7", static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    check_child("child exec-ing /bin/sh", lifecycle::wait_for(pid, kChildLimit), 7);
  }

  // 4. The parent goes on.
  Engine::get().wait_for_all();
  const std::vector<float> w = weights.to_vector<float>();
  const std::vector<float> v = in_flight.to_vector<float>();
  for (std::size_t i = 0; i < w.size(); ++i) {
    LIFECYCLE_CHECK(v[i] > w[i], "the work in flight at the fork completed in the parent");
  }
  int batches = 1;
  while (const std::optional<data::Batch> batch = loader->next()) {
    LIFECYCLE_CHECK(net(batch->data.as_in_context(devices[1])).shape() == Shape({8, 10}),
                    "forward after the forks");
    ++batches;
  }
  LIFECYCLE_CHECK(batches == 6, "expected 6 batches, got " + std::to_string(batches));
  std::printf("parent: done\n");
  return 0;
}
