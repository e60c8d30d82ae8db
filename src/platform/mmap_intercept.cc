// The callback table of the intercepted mmap family (see mmap_intercept.h).
#include "platform/mmap_intercept.h"

#include <atomic>

namespace tcm::os {

namespace {
constinit std::atomic<const AddressSpaceHooks*> g_address_space_hooks{nullptr};
}  // namespace

void SetAddressSpaceHooks(const AddressSpaceHooks* hooks) {
  g_address_space_hooks.store(hooks, std::memory_order_release);
}

const AddressSpaceHooks* GetAddressSpaceHooks() {
  return g_address_space_hooks.load(std::memory_order_acquire);
}

}  // namespace tcm::os
