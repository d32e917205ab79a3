//===- FuzzInput.cpp - Helpers shared by the fuzz targets -----------------===//

#include "FuzzInput.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace weft::fuzz {

const std::string &scratchDirectory() {
  // Never destroyed: the exit handler that removes it runs after the
  // destructors of statics.
  static const std::string *directory = [] {
    struct stat status;
    std::string base = stat("/dev/shm", &status) == 0 && S_ISDIR(status.st_mode)
                           ? "/dev/shm"
                           : "/tmp";
    std::string pattern = base + "/weft-fuzz-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (!mkdtemp(name.data())) {
      perror("weft-fuzz: cannot create a scratch directory");
      abort();
    }
    return new std::string(name.data());
  }();
  static const bool removedAtExit = [] {
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*directory, ignored);
    });
    return true;
  }();
  (void)removedAtExit;
  return *directory;
}

std::string writeScratchFile(const std::string &name, const void *data,
                             size_t size) {
  std::string path = scratchDirectory() + "/" + name;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror("weft-fuzz: cannot write a scratch file");
    abort();
  }
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = write(fd, bytes, size);
    if (n <= 0) {
      perror("weft-fuzz: cannot write a scratch file");
      abort();
    }
    bytes += n;
    size -= size_t(n);
  }
  close(fd);
  return path;
}

void report(const std::string &error) {
  static const bool verbose = [] {
    const char *value = getenv("WEFT_FUZZ_VERBOSE");
    return value && std::string(value) == "1";
  }();
  if (verbose)
    fprintf(stderr, "%s\n", error.empty() ? "ok" : error.c_str());
}

std::vector<std::string> splitFiles(const uint8_t *data, size_t size) {
  std::string all(reinterpret_cast<const char *>(data), size);
  std::vector<std::string> files;
  size_t separator = strlen(kFileSeparator), start = 0;
  for (size_t at; (at = all.find(kFileSeparator, start)) != std::string::npos;
       start = at + separator)
    files.push_back(all.substr(start, at - start));
  files.push_back(all.substr(start));
  return files;
}

} // namespace weft::fuzz
