//===- Blas.h - The CPU backend's OpenBLAS ----------------------*- C++ -*-===//

#ifndef WEFT_RUNTIME_BLAS_H
#define WEFT_RUNTIME_BLAS_H

namespace weft::runtime {

/// OpenBLAS (0.3.21, Debian 12) does not recognize recent Xeons and falls
/// back to its SSE3 "Prescott" kernels, 3x slower than its AVX-512 ones.
/// The core type can only be chosen before the library initializes, so the
/// process re-executes itself once with OPENBLAS_CORETYPE set. A core type
/// set by the user is left alone. Call first in main, before MPI starts.
void selectBlasKernels(char **argv);

/// What the CPU backend (and the emulation, whose GEMMs are its) prepares
/// first in main: the kernels above, and OpenBLAS on one thread, the
/// OpenMP threads being the only ones (the GEMM wrapper splits work).
void prepareCpuProcess(char **argv);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_BLAS_H
