#include "common/token_file.h"

#include <fstream>
#include <sstream>

namespace pace {

Status ReadTokenFile(const std::string& path, std::string* token) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read --token_file=" + path);
  std::stringstream ss;
  ss << in.rdbuf();
  *token = ss.str();
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r')) token->pop_back();
  if (token->empty()) return Status::InvalidArgument("--token_file=" + path + " is empty");
  return Status::OK();
}

}  // namespace pace
