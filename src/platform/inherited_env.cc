#include "platform/inherited_env.h"

#include <unistd.h>

#include <cstring>

namespace tcm::os {

bool MarkEnvValueForChildren(const char* name) {
  if (environ == nullptr) return false;
  const size_t n = strlen(name);
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, name, n) != 0 || (*e)[n] != '=') continue;
    char* value = *e + n + 1;
    if (*value == '\0') return false;
    *value = static_cast<char>(static_cast<unsigned char>(*value) | 0x80);
    return true;
  }
  return false;
}

}  // namespace tcm::os
