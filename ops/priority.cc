#include "ops/priority.h"

namespace tagflow {

namespace {
thread_local int tls_priority = 0;
}  // namespace

PriorityScope::PriorityScope(int priority) : previous_(tls_priority) { tls_priority = priority; }

PriorityScope::~PriorityScope() { tls_priority = previous_; }

int current_priority() { return tls_priority; }

}  // namespace tagflow
