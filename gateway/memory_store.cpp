// The embedded session store: a map under a mutex (session_store.hpp).
#include <algorithm>
#include <map>
#include <mutex>

#include "gateway/session_store.hpp"

namespace broker::gateway {
namespace {

class memory_store final : public session_store {
 public:
  void put(const session_record& r) override {
    std::lock_guard lock(mutex_);
    records_[r.id] = r;
  }
  std::vector<session_record> all() override {
    std::lock_guard lock(mutex_);
    std::vector<session_record> out;
    for (const auto& [id, r] : records_) out.push_back(r);
    // Oldest first, as Redis's store answers.
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
    return out;
  }
  std::optional<session_record> get(const std::string& id) override {
    std::lock_guard lock(mutex_);
    const auto it = records_.find(id);
    if (it == records_.end()) return std::nullopt;
    return it->second;
  }
  bool revoke(const std::string& id) override {
    std::lock_guard lock(mutex_);
    const auto it = records_.find(id);
    if (it == records_.end()) return false;
    it->second.revoked = true;
    return true;
  }
  asio::awaitable<std::optional<session_record>> fetch(std::string id) override {
    co_return get(id);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, session_record> records_;
};

}  // namespace

std::unique_ptr<session_store> make_memory_store() {
  return std::make_unique<memory_store>();
}

}  // namespace broker::gateway
