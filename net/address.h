// Parsing of "host:port" endpoints as given by flags such as --listen and
// --servers.
#ifndef PACE_NET_ADDRESS_H_
#define PACE_NET_ADDRESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pace::net {

// Splits "host:port" ("127.0.0.1:7100", "node3:7100", "[::1]:7100") into its
// parts. The port must be a decimal number in [0, 65535] (0 asks a server for
// an ephemeral port). Errors: InvalidArgument naming the problem (missing
// colon, empty host, bad or out-of-range port). Outputs are set only on
// success. Thread-safe.
Status ParseHostPort(std::string_view spec, std::string* host, uint16_t* port);

}  // namespace pace::net

#endif  // PACE_NET_ADDRESS_H_
