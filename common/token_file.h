// The job's shared secret, read from a --token_file (paced, the apps, pacectl).
#ifndef PACE_COMMON_TOKEN_FILE_H_
#define PACE_COMMON_TOKEN_FILE_H_

#include <string>

#include "common/status.h"

namespace pace {

// *token = the contents of `path` without trailing newlines ("\n", "\r\n").
// NotFound if the file cannot be read, InvalidArgument if the token is empty;
// messages name the flag: "cannot read --token_file=PATH".
Status ReadTokenFile(const std::string& path, std::string* token);

}  // namespace pace

#endif  // PACE_COMMON_TOKEN_FILE_H_
