#include "sandbox/fd_message.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace broker::sandbox {

ssize_t send_with_fds(int socket, std::string_view text, const std::vector<int>& fds) {
  if (fds.size() > max_message_fds) {
    errno = EINVAL;
    return -1;
  }
  iovec data{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int) * max_message_fds)] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  if (!fds.empty()) {
    message.msg_control = space;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(socket, &message, MSG_NOSIGNAL);
}

}  // namespace broker::sandbox
