//===- TargetAttrNames.h - weft attributes the targets set ------*- C++ -*-===//
//
// Attributes a target's lowering puts on the IR for the compiler to read
// back, kept out of the dialect's TableGen so that a target's fact does not
// rebuild every user of the dialect. The dialect's verifier accepts them.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_TARGETATTRNAMES_H
#define WEFT_DIALECT_WEFT_IR_TARGETATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace weft {

/// Module attribute: what each kernel and library call of the CUDA target's
/// host code does (weft-gpu-kernel-report; a dictionary).
inline constexpr llvm::StringLiteral kKernelReportAttrName =
    "weft.kernel_report";
/// On a `gpu.launch` or a library call: its place in the kernel report (an
/// integer), by which the emulation counts its bytes.
inline constexpr llvm::StringLiteral kLaunchIdAttrName = "weft.launch_id";
/// On a `gpu.launch` that runs several kernels (weft-gpu-merge-launches): the
/// first block of each, in order (a dense i64 array starting at 0). Each
/// block runs one kernel, picked by its id.
inline constexpr llvm::StringLiteral kBlockSegmentsAttrName =
    "weft.block_segments";
/// On a `weft.attention` or `weft.attention_grad`: the runtime function it
/// bufferizes into, a fused kernel (weft-attention-to-library; a symbol).
inline constexpr llvm::StringLiteral kLibraryCallAttrName = "weft.library_call";
/// On the declaration of a fused attention kernel (weft-attention-to-
/// library): "forward" or "backward", the signatures of
/// weft/runtime/Contract.h. Passes that reason about memory read which
/// arguments a call overwrites from it, not from the function's name.
inline constexpr llvm::StringLiteral kFusedAttentionAttrName =
    "weft.fused_attention";
/// On the declaration of a GEMM library function (weft-contractions-to-
/// blas; the signature of weft/runtime/Contract.h): it writes its c
/// operand and only reads the others.
inline constexpr llvm::StringLiteral kGemmAttrName = "weft.gemm";

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_TARGETATTRNAMES_H
