#include "engine/detail/op_block.h"

#include <algorithm>

#include "engine/error.h"

namespace tagflow::detail {

void OpBlock::set_deps(const VarList& reads, const VarList& writes) {
  const std::size_t listed = reads.size() + writes.size();
  deps.reserve(listed);
  // Lists are short: a repeat is found by looking back over what is kept,
  // a handful of compares and no sort. Long lists are sorted instead, so
  // that an operation on thousands of variables stays n log n.
  if (listed > 16) {
    set_deps_sorted(reads, writes);
    return;
  }
  Dep* kept = deps.data();
  std::size_t n = 0;
  for (VarHandle v : writes) {
    TAGFLOW_CHECK(v != nullptr, "push: operation '{}' lists a null variable in writes", name);
    std::size_t i = 0;
    while (i < n && kept[i].var != v) ++i;
    if (i == n) kept[n++] = Dep{v, Access::kWrite};
  }
  const std::size_t written = n;
  for (VarHandle v : reads) {
    TAGFLOW_CHECK(v != nullptr, "push: operation '{}' lists a null variable in reads", name);
    std::size_t i = 0;
    while (i < n && kept[i].var != v) ++i;
    if (i == n) {
      kept[n++] = Dep{v, Access::kRead};
    } else if (i < written) {
      kept[i].access = Access::kReadWrite;  // modified in place
    }
  }
  deps.resize_within_capacity(n);
}

void OpBlock::set_deps_sorted(const VarList& reads, const VarList& writes) {
  for (VarHandle v : writes) deps.push_back(Dep{v, Access::kWrite});
  for (VarHandle v : reads) deps.push_back(Dep{v, Access::kRead});
  for (const Dep& d : deps) {
    TAGFLOW_CHECK(d.var != nullptr, "push: operation '{}' lists a null variable", name);
  }
  std::sort(deps.begin(), deps.end(), [](const Dep& a, const Dep& b) { return a.var < b.var; });
  // Merge repeats: a variable both read and written is modified in place.
  std::size_t kept = deps.empty() ? 0 : 1;
  for (std::size_t i = 1; i < deps.size(); ++i) {
    if (deps[kept - 1].var == deps[i].var) {
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
