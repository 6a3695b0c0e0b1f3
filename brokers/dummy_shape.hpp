// The public shape of a real value (docs/policy.md): what its dummy keeps of it and what it draws
// at random. A dummy keeps the value's length and
// - a known prefix (ghp_, github_pat_, sk-proj-, sk-ant-api03-, AKIA, xoxb-, ...);
// - a JWT's header and claims (clients decode them: expiry, account, plan);
// - the separators of a family whose public format has them (github_pat_'s '_', Slack's '-',
//   SendGrid's '.'), a UUID's dashes, version and variant, and base64's '=' padding;
// - GitHub's checksum (the last 6 base62 characters are the CRC32 of the random part before
//   them), made valid for the dummy's own random part, where the real value's checksum is valid.
// Every other character is drawn from the whole of one public alphabet: the smallest of a fixed
// list (decimal, hex, base32, base36, letters, base62, base64url, base64, plain) that
// holds every character of its run, never below its family's (a GitHub token's is base62, an AWS
// key id's base32). A run with characters none of them holds is drawn from plain characters
// (letters, digits, '-', '.', '_'), which no URL, form, header, JSON or shell encoder changes.
// Nothing is kept per position from the real value. Which alphabet a random value falls in tells at
// most a bit or two of it (a 40-character AWS secret key has no '+' or '/' about one time in four,
// and its dummy is then drawn from base62).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <vector>

namespace broker::brokers {

// A run of a dummy's characters, in order; together they cover the value.
struct shape_piece {
  enum class kind {
    keep,             // the real value's characters at [at, at + size): they are public
    draw,             // each drawn uniformly from `alphabet`
    github_checksum,  // GitHub's checksum of the dummy's piece just before this one (6 characters)
  };
  kind what = kind::keep;
  std::size_t at = 0, size = 0;
  std::string_view alphabet;  // draw only
};

// The public shape of `value`: at least one piece is drawn, so a dummy can always differ from
// it. Throws std::invalid_argument for an empty value. The pieces refer to no byte of the value.
std::vector<shape_piece> public_shape(std::string_view value);

// The known prefix of a token, or "" when it has none this table knows.
std::string_view known_prefix(std::string_view token);

// GitHub's token checksum (github.blog, "Behind GitHub's new authentication token formats",
// 2021): the CRC32 of the token's random part in 6 base62 digits (0-9A-Za-z), zero-padded.
std::array<char, 6> github_checksum(std::string_view random);

}  // namespace broker::brokers
