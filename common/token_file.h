// The job's shared secret, read from a --token_file (paced, the apps, pacectl),
// or created by paced in its data dir on first start (docs/operations.md,
// "Tokens").
#ifndef PACE_COMMON_TOKEN_FILE_H_
#define PACE_COMMON_TOKEN_FILE_H_

#include <string>

#include "common/status.h"

namespace pace {

// *token = the contents of `path` without trailing newlines ("\n", "\r\n").
// NotFound if the file cannot be read, InvalidArgument if the token is empty;
// messages name the flag: "cannot read --token_file=PATH".
Status ReadTokenFile(const std::string& path, std::string* token);

// If `path` exists: as ReadTokenFile, *created = false. Otherwise writes a new
// random token (32 hex digits, 128 bits from getrandom(2)) to `path` with mode
// 0600 and *created = true. The file appears whole or not at all (written to
// a temporary file, fsynced, then linked to `path`), and a concurrent creator
// never overwrites it: the loser reads the winner's token. The directory must
// exist. Errors: IOError naming the path (e.g. no space left).
Status ReadOrCreateTokenFile(const std::string& path, std::string* token, bool* created);

// OK if the token file `path` belongs to this process's effective user and
// only that user may write it. Else PermissionDenied naming the owner or the
// mode and the way out: a token another user could plant or rewrite would let
// that user choose the secret every client must present (and every shard
// accepts). IOError if `path` cannot be examined.
Status CheckOwnTokenFile(const std::string& path);

// *out = `bytes` random bytes from getrandom(2) as 2 x `bytes` lowercase hex
// digits (tokens, job ids). IOError if the kernel refuses.
Status RandomHex(size_t bytes, std::string* out);

// Job ids (docs/wire-protocol.md, "Jobs"). A job name given by the user
// (paced --job, the clients' --job) is shared by every shard of the job; a
// store created without one gets an automatic id, kAutoJobPrefix + 16 random
// hex digits, which belongs to that one shard.
inline constexpr char kAutoJobPrefix[] = "auto-";
bool IsAutoJobId(const std::string& job);
// OK if `job` is a usable job name: 1 to 128 characters of [A-Za-z0-9._:-],
// not starting with kAutoJobPrefix. Else InvalidArgument naming `flag`.
Status CheckJobId(const std::string& job, const std::string& flag);
// The same for a job id a store may record: a job name or an automatic id.
Status CheckStoredJobId(const std::string& job, const std::string& flag);

}  // namespace pace

#endif  // PACE_COMMON_TOKEN_FILE_H_
