#include "net/address.h"

namespace pace::net {

Status ParseHostPort(std::string_view spec, std::string* host, uint16_t* port) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("bad address '" + std::string(spec) + "': " + why +
                                   " (expected host:port, e.g. 127.0.0.1:7100)");
  };
  size_t colon = spec.rfind(':');
  if (colon == std::string_view::npos) return bad("missing ':port'");
  std::string_view h = spec.substr(0, colon);
  std::string_view p = spec.substr(colon + 1);
  if (!h.empty() && h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return bad("unbalanced '[' in IPv6 host");
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string_view::npos) {
    return bad("IPv6 hosts must be written in brackets, e.g. [::1]:7100");
  }
  if (h.empty()) return bad("empty host");
  if (p.empty()) return bad("empty port");
  if (p.size() > 5) return bad("port out of range [0, 65535]");
  uint32_t value = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return bad("port '" + std::string(p) + "' is not a number");
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return bad("port " + std::to_string(value) + " out of range [0, 65535]");
  *host = std::string(h);
  *port = static_cast<uint16_t>(value);
  return Status::OK();
}

}  // namespace pace::net
