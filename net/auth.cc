#include "net/auth.h"

#include <cstddef>
#include <cstdint>

namespace pace::net {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the longer input is visited; the loop has no early exit.
  size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    uint8_t y = i < b.size() ? static_cast<uint8_t>(b[i]) : 0;
    diff = diff | static_cast<uint8_t>(x ^ y);
  }
  return diff == 0;
}

}  // namespace pace::net
