// A helper program run to its end from the broker (git reading a config, ssh-keygen, ssh-add):
// its own process group, signals reset, stdin from /dev/null unless the caller's terminal is to
// be shared, stdout read (bounded), and killed with its group when it outlasts its time.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace broker::base {

struct program_run {
  std::string program;            // an absolute path
  std::vector<std::string> args;  // argv[1...]
  std::vector<std::string> env;   // "NAME=VALUE", the whole environment
  std::chrono::milliseconds time{10'000};
  std::size_t max_output = 16 << 20;
  // The caller's stdin and stderr, for a program that asks the person at the terminal (ssh-add
  // asking for a passphrase); else stdin is /dev/null and stderr goes nowhere.
  bool share_terminal = false;
};

struct program_result {
  bool ran = false;    // spawned, ended within its time and its output within the bound
  int exit_code = -1;  // its exit status; -1 when a signal ended it
  std::string output;  // stdout
};

program_result run_program(const program_run& run);

// The first executable `name` in `dirs`, else empty.
std::string find_program(const std::string& name, const std::vector<std::string>& dirs);

}  // namespace broker::base
