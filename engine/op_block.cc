#include "tagflow/engine/op_block.h"

#include <algorithm>

#include "tagflow/engine/error.h"

namespace tagflow::detail {

void OpBlock::set_deps(const VarList& reads, const VarList& writes) {
  deps.reserve(reads.size() + writes.size());
  for (VarHandle v : writes) deps.push_back(Dep{nullptr, this, v, Access::kWrite});
  for (VarHandle v : reads) deps.push_back(Dep{nullptr, this, v, Access::kRead});
  for (const Dep& d : deps) {
    TAGFLOW_CHECK(d.var != nullptr, "push: operation '{}' lists a null variable", name);
  }
  // Address order: pushers lock an operation's variables in one global order.
  std::sort(deps.begin(), deps.end(), [](const Dep& a, const Dep& b) { return a.var < b.var; });
  // Merge repeats: a variable both read and written is modified in place.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < deps.size(); ++i) {
    if (kept > 0 && deps[kept - 1].var == deps[i].var) {
      if (deps[kept - 1].access != deps[i].access) deps[kept - 1].access = Access::kReadWrite;
    } else {
      deps[kept++] = deps[i];
    }
  }
  deps.truncate(kept);
}

std::exception_ptr OpBlock::wrap(std::exception_ptr cause) const {
  return std::make_exception_ptr(OperationError(name, ctx, std::move(cause)));
}

}  // namespace tagflow::detail
