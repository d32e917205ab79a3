//===- RuntimeLinkedTarget.cpp - Link a model with the runtime ------------===//

#include "weft/Target/Executable/RuntimeLinkedTarget.h"
#include "weft/runtime/Contract.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

llvm::SmallVector<std::string, 2>
weft::RuntimeLinkedTarget::runtimeBackends() const {
  const char *backend = runtime::runtimeBackendOf(device().str());
  if (!backend)
    return {};
  return {backend};
}

bool weft::RuntimeLinkedTarget::link(llvm::ArrayRef<std::string> objects,
                                     llvm::StringRef output,
                                     llvm::StringRef runtimeDirectory,
                                     bool partitioned, bool sharedLibrary,
                                     std::string &error) const {
  // The driver of the build that made the runtime ("c++" on PATH unless it
  // was a sanitized build, whose runtime needs its own compiler's
  // sanitizer libraries).
  auto linker = llvm::sys::findProgramByName(WEFT_LINK_DRIVER);
  if (!linker) {
    error = "no C++ compiler driver '" WEFT_LINK_DRIVER "' to link with";
    return false;
  }
  auto library = [&](llvm::StringRef name) {
    llvm::SmallString<256> path(runtimeDirectory);
    llvm::sys::path::append(path, name);
    return path.str().str();
  };
  std::string runtimeMain = library("libweft_runtime_main.a");
  std::string runtime = library("libweft_runtime.a");
  std::string runtimeMpi = library("libweft_runtime_mpi.a");
  std::string contract = library("libweft_contract.a");
  llvm::SmallVector<std::string, 2> backends = runtimeBackends();
  if (backends.empty()) {
    error = "the target '" + name().str() +
            "' names no runtime backend for "
            "its device '" +
            device().str() + "'";
    return false;
  }
  std::vector<std::string> backendLibraries;
  for (const std::string &backend : backends)
    backendLibraries.push_back(library("libweft_runtime_" + backend + ".a"));
  std::vector<std::string> required{runtimeMain, runtime, runtimeMpi, contract};
  required.insert(required.end(), backendLibraries.begin(),
                  backendLibraries.end());
  for (const std::string &lib : required)
    if (!llvm::sys::fs::exists(lib)) {
      error = "runtime library '" + lib + "' is missing";
      return false;
    }
  std::vector<llvm::StringRef> args{*linker};
  llvm::SmallVector<llvm::StringRef> buildFlags;
  llvm::StringRef(WEFT_EXECUTABLE_LINK_FLAGS).split(buildFlags, ' ', -1, false);
  args.insert(args.end(), buildFlags.begin(), buildFlags.end());
  args.insert(args.end(), objects.begin(), objects.end());
  // A partitioned model runs its ranks over MPI: the MPI world replaces
  // the runtime's weak one-rank definitions, so it is linked whole.
  llvm::SmallVector<llvm::StringRef> mpiLibraries;
  if (partitioned) {
    args.insert(args.end(),
                {"-Wl,--whole-archive", runtimeMpi, "-Wl,--no-whole-archive"});
    llvm::StringRef(WEFT_MPI_LIBRARIES).split(mpiLibraries, ';', -1, false);
  }
  // Each backend registers its device with a static object, which nothing
  // references: linked whole.
  args.push_back("-Wl,--whole-archive");
  args.insert(args.end(), backendLibraries.begin(), backendLibraries.end());
  args.push_back("-Wl,--no-whole-archive");
  if (sharedLibrary) {
    // The library exports the whole C API (weft_model_open, ...), which
    // the model's own code does not reference; every symbol it needs must
    // resolve now rather than when a process loads it.
    args.insert(args.end(), {"-shared", "-Wl,-z,defs", "-Wl,--whole-archive",
                             runtime, contract, "-Wl,--no-whole-archive"});
  } else {
    args.insert(args.end(), {runtimeMain, runtime, contract});
  }
  args.insert(args.end(), mpiLibraries.begin(), mpiLibraries.end());
  if (llvm::is_contained(backends, "cpu"))
    args.push_back("-lopenblas");
  // libomp comes from Debian's LLVM 22 (libomp-22-dev).
  args.insert(args.end(), {"-L" WEFT_LIBOMP_DIR, "-Wl,-rpath," WEFT_LIBOMP_DIR,
                           "-lomp", "-lm", "-ldl", "-o", output});
  std::string linkError;
  if (llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0,
                                &linkError) != 0) {
    error = "linking failed" +
            (linkError.empty() ? std::string() : ": " + linkError);
    return false;
  }
  return true;
}
