#include "engine/detail/op_block.h"

#include <algorithm>
#include <utility>

#include "engine/detail/operation_state.h"
#include "engine/detail/threaded_engine.h"
#include "engine/detail/worker_pool.h"
#include "engine/error.h"

namespace tagflow::detail {

OpExtras::~OpExtras() {
  while (owned_edges != nullptr) delete std::exchange(owned_edges, owned_edges->owned_next);
  if (tracker != nullptr) tracker->release();
}

void OpBlock::set_deps_sorted(const VarList& reads, const VarList& writes) {
  for (VarHandle v : writes) deps.push_back(Dep{var_block(v), Access::kWrite, v.generation()});
  for (VarHandle v : reads) deps.push_back(Dep{var_block(v), Access::kRead, v.generation()});
  std::sort(deps.begin(), deps.end(), [](const Dep& a, const Dep& b) { return a.var < b.var; });
  // Merge repeats: a variable both read and written is modified in place.
  // Handles of one record at two generations keep the older one: at most the
  // newer is live, so a stale one is still refused (Note [Variable generations]).
  std::size_t kept = deps.empty() ? 0 : 1;
  for (std::size_t i = 1; i < deps.size(); ++i) {
    if (deps[kept - 1].var == deps[i].var) {
      if (deps[kept - 1].access != deps[i].access) deps[kept - 1].access = Access::kReadWrite;
      deps[kept - 1].generation = std::min(deps[kept - 1].generation, deps[i].generation);
    } else {
      deps[kept++] = deps[i];
    }
  }
  deps.truncate(kept);
}

EngineCore* OpBlock::owner() const {
  // A user operation's extras are not looked at: the dump reads records
  // that may have been destroyed (a naive engine's are never marked
  // completed), whose extras may hold another operation's fields by now.
  if (kind == OpKind::kUser) return pool != nullptr ? pool->engine() : nullptr;
  return extras != nullptr ? extras->engine : nullptr;
}

std::exception_ptr OpBlock::wrap(std::exception_ptr cause) const {
  return std::make_exception_ptr(OperationError(name, ctx, std::move(cause)));
}

}  // namespace tagflow::detail
