#include "engine/error.h"

namespace tagflow {

namespace detail {
std::string describe(const std::exception_ptr& e) {
  if (!e) return "no error";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}
}  // namespace detail

OperationError::OperationError(std::string op_name, Context ctx, std::exception_ptr cause)
    : Error(fmt::format("operation '{}' on {} failed: {}", op_name, ctx.str(),
                        detail::describe(cause))),
      op_name_(std::move(op_name)),
      ctx_(ctx),
      cause_(std::move(cause)) {}

}  // namespace tagflow
