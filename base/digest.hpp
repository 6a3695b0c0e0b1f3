// SHA-256 (OpenSSL's EVP), one copy for every room: a policy file's digest, SigV4's payload
// hashes, the audit chain's records, MCP tools' pins, SSH fingerprints.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace broker::base {

std::array<unsigned char, 32> sha256(std::string_view data);

// Lower-case hex, 64 characters.
std::string sha256_hex(std::string_view data);

}  // namespace broker::base
