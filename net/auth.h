// Job-token comparison for the handshake (docs/wire-protocol.md, "Handshake").
#ifndef PACE_NET_AUTH_H_
#define PACE_NET_AUTH_H_

#include <string_view>

namespace pace::net {

// True iff `a` and `b` hold the same bytes. Takes time that depends only on
// the lengths, never on where the first difference is, so a peer cannot
// guess the token byte by byte from response times. Thread-safe.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace pace::net

#endif  // PACE_NET_AUTH_H_
