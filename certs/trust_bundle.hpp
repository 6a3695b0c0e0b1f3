// The CA bundle a session's clients trust: the system roots plus the session's CA, so a client
// pointed at it (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, ...) still verifies every other host.
#pragma once

#include <filesystem>

#include "base/atomic_file.hpp"
#include "certs/ca.hpp"

namespace broker::certs {

// The system roots: the first readable of the Debian, Fedora and Alpine bundle paths; an empty
// path when there is none.
std::filesystem::path system_roots_file();

// Writes the system roots followed by the CA certificate to `file` (0644, atomically). A missing
// system bundle is not an error: the file then holds the CA alone. Throws ca_error.
void write_trust_bundle(const std::filesystem::path& file, const certificate_authority& ca,
                        base::durability lasting = base::durability::synced);
// The same with the roots read from `roots` (the CA alone when `roots` is empty); throws ca_error
// when `roots` names a file that cannot be read.
void write_trust_bundle(const std::filesystem::path& file, const certificate_authority& ca,
                        const std::filesystem::path& roots,
                        base::durability lasting = base::durability::synced);

}  // namespace broker::certs
