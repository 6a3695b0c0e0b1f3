// A message between the broker and its sandbox's init over their socket pair, with descriptors
// attached (SCM_RIGHTS): the sockets init made, the launch plan's memory file, the layers'
// tmpfs.
#pragma once

#include <sys/types.h>

#include <string_view>
#include <vector>

namespace broker::sandbox {

// The most descriptors one message carries.
inline constexpr std::size_t max_message_fds = 8;

// Sends `text` with `fds` attached (none: a plain message); what sendmsg(2) returns.
ssize_t send_with_fds(int socket, std::string_view text, const std::vector<int>& fds);

}  // namespace broker::sandbox
