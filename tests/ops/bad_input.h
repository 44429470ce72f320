#pragma once
// The harness of the bad-input tests (bad_input_test.cc and
// bad_input_layers_test.cc): a table of calls with wrong input, each naming
// the exact error it must throw and words its message must hold. For every
// case the harness also checks that no array changed, that no memory stayed
// allocated, and that the engine and every device still compute correctly.

#include <cstdint>
#include <functional>
#include <string>
#include <typeindex>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow::testing {

/// Arrays with known values that the cases pass to operators, made afresh
/// for each case. float32 on cpu(0) unless the name says otherwise.
struct Arrays {
  NDArray a = array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  NDArray b = array(std::vector<float>{6, 5, 4, 3, 2, 1}, {3, 2});
  NDArray ints = array(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  NDArray a_cpu1 = array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, cpu(1));
  NDArray a_gpu = array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, gpu(0));
  NDArray labels = array(std::vector<std::int32_t>{0, 2}, {2});
  NDArray cube = array(random_floats(12, -1, 1, 3), {2, 2, 3});
  NDArray image = array(random_floats(64, -1, 1, 4), {2, 2, 4, 4});   // N, C, H, W
  NDArray weight = array(random_floats(54, -1, 1, 5), {3, 2, 3, 3});  // O, C, kh, kw
  NDArray gamma = array(std::vector<float>{0.5f, 2}, {2});            // one per channel of `image`
  NDArray beta = array(std::vector<float>{1, -1}, {2});
  NDArray running_mean = array(std::vector<float>{0.25f, -0.25f}, {2});
  NDArray running_var = array(std::vector<float>{1.5f, 0.75f}, {2});
  NDArray state = array(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {2, 3});
  NDArray state2 = array(std::vector<float>{1, 1, 2, 2, 3, 3}, {2, 3});

  std::vector<NDArray*> all() {
    return {&a,      &b,     &ints, &a_cpu1,       &a_gpu,       &labels, &cube,  &image,
            &weight, &gamma, &beta, &running_mean, &running_var, &state,  &state2};
  }
};

/// One call with wrong input. `call` returns the array it produced, if any
/// (the harness waits on it: errors raised while an operation runs reach
/// that wait), and must throw an error whose type is exactly `error`, whose
/// cause (for an OperationError) is exactly `cause`, and whose message holds
/// every one of `words`.
struct BadInputCase {
  std::string name;
  std::function<NDArray(Arrays&)> call;
  std::type_index error;
  std::vector<std::string> words;
  std::type_index cause = typeid(void);
};

inline std::ostream& operator<<(std::ostream& os, const BadInputCase& c) { return os << c.name; }

/// A call refused with exactly `E` before anything runs.
template <typename E = Error>
BadInputCase refused(std::string name, std::function<NDArray(Arrays&)> call,
                     std::vector<std::string> words) {
  return {std::move(name), std::move(call), typeid(E), std::move(words)};
}

/// A call whose operation fails while it runs: the wait on its output
/// rethrows an OperationError caused by exactly `Cause`.
template <typename Cause>
BadInputCase fails_when_run(std::string name, std::function<NDArray(Arrays&)> call,
                            std::vector<std::string> words) {
  return {std::move(name), std::move(call), typeid(OperationError), std::move(words),
          typeid(Cause)};
}

/// The test's name: the case's.
inline std::string case_name(const ::testing::TestParamInfo<BadInputCase>& info) {
  return info.param.name;
}

/// A limit on every device's memory during a case, so that a request for
/// more than a device holds fails the same way on every machine (and under
/// AddressSanitizer, which aborts on absurd requests instead of failing them).
inline constexpr std::uint64_t kCaseMemoryLimit = std::uint64_t{16} << 30;

/// Values of every array in `arrays`, in order.
inline std::vector<std::vector<double>> values_of(Arrays& arrays) {
  std::vector<std::vector<double>> values;
  for (const NDArray* array : arrays.all()) values.push_back(array->to_vector<double>());
  return values;
}

/// The error `f` throws (waiting on the array it returns), or null.
inline std::exception_ptr error_thrown_by(const std::function<NDArray()>& f) {
  try {
    const NDArray out = f();
    if (out.defined()) out.wait_to_read();
    Engine::get().wait_for_all();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

inline void check_error(const BadInputCase& c, const std::exception_ptr& thrown) {
  ASSERT_NE(thrown, nullptr) << "no error";
  try {
    std::rethrow_exception(thrown);
  } catch (const std::exception& e) {
    EXPECT_EQ(std::type_index(typeid(e)), c.error)
        << "expected " << c.error.name() << ", got " << typeid(e).name() << ": " << e.what();
    for (const std::string& word : c.words) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos)
          << "the message lacks \"" << word << "\": " << e.what();
    }
    if (const auto* failed = dynamic_cast<const OperationError*>(&e)) {
      try {
        std::rethrow_exception(failed->cause());
      } catch (const std::exception& cause) {
        EXPECT_EQ(std::type_index(typeid(cause)), c.cause)
            << "the cause is " << typeid(cause).name() << ": " << cause.what();
      }
      // The wait that rethrew the failure reported it: wait_for_all does not
      // report it again (Note [Errors seen by wait_for_all]), and the engine
      // carries on.
      EXPECT_NO_THROW(Engine::get().wait_for_all());
    }
  }
}

/// Runs `c` and every check around it.
inline void run_bad_input_case(const BadInputCase& c) {
  const std::vector<Context> devices = all_devices();
  ASSERT_NO_THROW(Engine::get().wait_for_all());
  std::vector<std::uint64_t> limits;
  std::vector<std::uint64_t> in_use;
  for (Context ctx : devices) {
    limits.push_back(memory_stats(ctx).limit);
    in_use.push_back(memory_stats(ctx).in_use);
    set_memory_limit(ctx, kCaseMemoryLimit);
  }
  {
    Arrays arrays;
    const std::vector<std::vector<double>> before = values_of(arrays);
    check_error(c, error_thrown_by([&] { return c.call(arrays); }));
    const std::vector<std::vector<double>> after = values_of(arrays);
    for (std::size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ(after[i], before[i]) << "array " << i << " of Arrays::all() changed";
    }
  }
  ASSERT_NO_THROW(Engine::get().wait_for_all());
  // Every device still computes, and everything allocated was given back.
  const std::vector<float> x = random_floats(6, -2, 2, 7);
  std::vector<double> expected;
  for (float v : x) expected.push_back(std::exp(static_cast<double>(v)) * 2 - 1);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const NDArray y = exp(array(x, {2, 3}, devices[d])) * 2.f - 1.f;
    expect_close(y.to_vector<float>(), expected, 1e-6, 1e-6, "after it, on " + devices[d].str());
  }
  EXPECT_NO_THROW(Engine::get().wait_for_all());
  for (std::size_t d = 0; d < devices.size(); ++d) {
    set_memory_limit(devices[d], limits[d]);
    EXPECT_EQ(memory_stats(devices[d]).in_use, in_use[d]) << "memory held on " << devices[d];
  }
}

}  // namespace tagflow::testing
