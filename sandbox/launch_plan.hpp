// What the broker sends a netns child's init once the session is prepared (child_session.hpp):
// the command, its environment and its view of the file system (launch_options), as bytes. The
// init was cloned before these existed, so that the kernel's work on the namespace (capture's
// rules above all) runs while the broker prepares them.
#pragma once

#include <string>
#include <string_view>

#include "sandbox/child_session.hpp"

namespace broker::sandbox {

std::string encode_launch_plan(const launch_options& options);

// Throws launch_error on bytes that are not a whole plan.
launch_options decode_launch_plan(std::string_view bytes);

}  // namespace broker::sandbox
