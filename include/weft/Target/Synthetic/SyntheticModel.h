//===- SyntheticModel.h - Transformers described by their shape -*- C++ -*-===//
//
// Planning needs a model's IR, not its weights: a GPT (learned positions,
// LayerNorm, GELU MLP, tied embeddings) or a Llama (RMSNorm, grouped-query
// attention, SwiGLU MLP, untied head) is written straight into the weft
// dialect from a few numbers, laid out and named as the ONNX importer would
// write an exported model ("/h.3/attn/qkv", "h.3.attn.c_attn.weight").
// With `experts`, every MLP is a mixture of experts as utils/gen_moe.py
// exports one (GShard's top-k routing with a capacity per sequence, dense
// one-hot dispatch and combine, stacked expert weights, and the Switch
// Transformer's load-balancing loss as a second output, `aux_loss`).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_SYNTHETIC_SYNTHETICMODEL_H
#define WEFT_TARGET_SYNTHETIC_SYNTHETICMODEL_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace weft {

struct SyntheticModelSpec {
  enum class Family { GPT, Llama };
  Family family = Family::GPT;
  int64_t layers = 0, hidden = 0, heads = 0;
  int64_t kvHeads = 0; // grouped-query attention (Llama); = heads for GPT
  int64_t ffn = 0;     // MLP width: 4·hidden (GPT) unless given
  int64_t vocab = 0, seq = 0;
  int64_t batch = 1;
  /// A mixture of experts: `experts` MLPs of width `ffn` per layer, each
  /// token sent to `topK` of them, at most `capacity` tokens per expert and
  /// sequence (default ceil(1.25·topK·seq/experts), GShard's factor).
  int64_t experts = 0, topK = 0, capacity = 0;

  /// "gpt:layers=96,hidden=12288,heads=96,vocab=51200,seq=2048" or
  /// "llama:layers=32,hidden=4096,heads=32,kv-heads=8,ffn=11008,
  /// vocab=32000,seq=4096"; `batch` is optional (1; 2 with experts, which
  /// the planner profiles split over two ranks), and `experts`, `top-k` (2)
  /// and `capacity` make the MLPs mixtures of experts. `error` names the
  /// missing or bad key.
  static std::optional<SyntheticModelSpec> parse(llvm::StringRef text,
                                                 std::string &error);
  /// The number of parameters the model has.
  int64_t parameters() const;
};

/// The forward function `main(input_ids) -> logits` of `spec`.
mlir::OwningOpRef<mlir::ModuleOp>
buildSyntheticModel(const SyntheticModelSpec &spec, mlir::MLIRContext *context);

} // namespace weft

#endif // WEFT_TARGET_SYNTHETIC_SYNTHETICMODEL_H
