// Runs a kernel of host-pointer.mlir, lowered by weft-emulated-gpu-to-llvm,
// on a buffer of the emulated device.
#include "weft/runtime/Contract.h"
#include "weft/runtime/Device.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

struct Memref1D {
  float *allocated, *aligned;
  int64_t offset, size, stride;
};

extern "C" void _mlir_ciface_write_device(Memref1D *out);
extern "C" void _mlir_ciface_read_host(Memref1D *out);

int main(int argc, char **argv) {
  std::string error;
  auto device =
      weft::runtime::createDevice(weft::runtime::kEmulatedCudaDevice, error);
  if (!device) {
    fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  auto *data = static_cast<float *>(device->allocate(4 * sizeof(float)));
  Memref1D out{data, data, 0, 4, 1};
  if (argc > 1 && !strcmp(argv[1], "read_host"))
    _mlir_ciface_read_host(&out);
  else
    _mlir_ciface_write_device(&out);
  printf("out: %g %g %g %g\n", data[0], data[1], data[2], data[3]);
  device->deallocate(data);
  return 0;
}
