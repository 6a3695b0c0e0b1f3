#include "certs/trust_bundle.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/atomic_file.hpp"

namespace broker::certs {

namespace fs = std::filesystem;

fs::path system_roots_file() {
  // Debian/Ubuntu, then Fedora/RHEL, then Alpine/macOS-style layouts.
  for (const char* candidate : {"/etc/ssl/certs/ca-certificates.crt",
                                "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}) {
    struct stat st {};
    if (::stat(candidate, &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate, R_OK) == 0)
      return candidate;
  }
  return {};
}

void write_trust_bundle(const fs::path& file, const certificate_authority& ca,
                        base::durability lasting) {
  write_trust_bundle(file, ca, system_roots_file(), lasting);
}

void write_trust_bundle(const fs::path& file, const certificate_authority& ca,
                        const fs::path& roots, base::durability lasting) {
  std::string bundle;
  if (!roots.empty()) {
    // In one read of its size: a character at a time took a millisecond of every wrap's start
    // (Debian's bundle is 220 KB).
    std::ifstream in(roots, std::ios::binary | std::ios::ate);
    const auto size = in ? static_cast<std::streamoff>(in.tellg()) : std::streamoff{-1};
    if (size >= 0) {
      bundle.resize(static_cast<std::size_t>(size));
      in.seekg(0);
      in.read(bundle.data(), size);
    }
    if (!in) throw ca_error("cannot read the system CA bundle " + roots.string());
    // Without it a bundle lacking a final newline would glue END and BEGIN lines together.
    if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
  }
  bundle += ca.certificate_pem();
  base::write_file_atomically(file, bundle, 0644, lasting);
}

}  // namespace broker::certs
