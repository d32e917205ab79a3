//===- TokenFile.cpp - The training corpus, read a window at a time -------===//

#include "weft/runtime/TokenFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace weft::runtime {

TokenFile::~TokenFile() {
  if (fd >= 0)
    close(fd);
}

bool TokenFile::open(const std::string &name, std::string &error) {
  path = name;
  fd = name.empty() ? -1 : ::open(name.c_str(), O_RDONLY);
  struct stat status;
  if (fd < 0 || fstat(fd, &status) != 0) {
    error = "cannot read the token file '" + name + "' (pass --data FILE)";
    return false;
  }
  tokens = size_t(status.st_size) / 2;
  return true;
}

bool TokenFile::read(size_t first, std::vector<uint16_t> &window, int64_t vocab,
                     std::string &error) const {
  size_t want = window.size() * 2, got = 0;
  char *out = reinterpret_cast<char *>(window.data());
  while (got < want) {
    ssize_t n = pread(fd, out + got, want - got, off_t(first * 2 + got));
    if (n > 0) {
      got += size_t(n);
      continue;
    }
    struct stat status;
    if (n < 0)
      error =
          "the token file '" + path + "' cannot be read: " + strerror(errno);
    else if (fstat(fd, &status) == 0)
      error = "the token file '" + path + "' shrank to " +
              std::to_string(status.st_size / 2) +
              " tokens during the run (it had " + std::to_string(tokens) + ")";
    else
      error = "the token file '" + path + "' ended early";
    return false;
  }
  for (size_t i = 0; i < window.size(); ++i)
    if (vocab && window[i] >= vocab) {
      error = "token " + std::to_string(window[i]) + " at position " +
              std::to_string(first + i) + " of '" + path +
              "' is outside the vocabulary (" + std::to_string(vocab) + ")";
      return false;
    }
  return true;
}

} // namespace weft::runtime
