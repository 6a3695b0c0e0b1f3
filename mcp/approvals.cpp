// call_approvals (approvals.hpp).
#include "mcp/approvals.hpp"

namespace broker::mcp {

void call_approvals::approve(const std::string& server, call_kind kind, const std::string& target) {
  std::lock_guard lock(mutex_);
  approved_.emplace(server, kind, target);
}

bool call_approvals::approved(const std::string& server, call_kind kind,
                              const std::string& target) const {
  std::lock_guard lock(mutex_);
  return approved_.contains({server, kind, target});
}

}  // namespace broker::mcp
