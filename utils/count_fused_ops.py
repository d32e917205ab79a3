#!/usr/bin/env python3
"""Import each model of ../shared/models with `weft-translate --fuse` and print
how many fused ops (attention, gelu, layer_norm, rms_norm) and leftover
softmaxes its IR has, one line per model; models the importer rejects print
the one-line error. The symbolic dims of each model are bound here."""

import argparse
import pathlib
import re
import subprocess
import sys

# --dim bindings per model: the sizes used by the models' test data.
DIMS = {
    "ortdata_bert_toy_mlm_nsp_pytorch11_opset12": ["batch=2", "max_seq_len_in_batch=4"],
    "ortdata_gpt2_tiny_l12_past_pytorch16_opset11": ["batch_size=2", "seq_len=3"],
    "ortdata_gpt2_megatron_tiny_past_pytorch19_opset12": ["batch_size=2", "seq_len=4", "past_seq_len=3"],
    "ortdata_gpt2_attention_block_past_pytorch15_opset11": ["batch=2", "seq_len=4", "past_sequence_length=3"],
    "ortdata_tfbert_qa_tiny_keras2onnx_opset11": ["batch_size=2"],
    "ortdata_megatron_self_attention_opset12": ["batch=2", "seqlen=4"],
}
ORDER = [
    "torch_transformer_encoder_l2_d64_h4_opset17",
    "torch_multihead_attention_d32_h4_opset14",
    "torchvision_vit_img32_p8_l2_d64_h4_opset14",
    "ortdata_bert_toy_mlm_nsp_pytorch11_opset12",
    "ortdata_gpt2_tiny_l12_past_pytorch16_opset11",
    "ortdata_gpt2_megatron_tiny_past_pytorch19_opset12",
    "ortdata_gpt2_attention_block_past_pytorch15_opset11",
    "ortdata_tfbert_qa_tiny_keras2onnx_opset11",
    "ortdata_megatron_self_attention_opset12",
    "ortdata_megatron_bart_self_attention_opset12",
]
COUNTED = ["attention", "gelu", "layer_norm", "rms_norm", "softmax"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", required=True, type=pathlib.Path)
    parser.add_argument("--weft-translate", default="weft-translate")
    args = parser.parse_args()
    names = ORDER + sorted(
        "fused_contrib/" + p.name for p in (args.models / "fused_contrib").iterdir())
    for name in names:
        cmd = [args.weft_translate, "--import-onnx", str(args.models / name / "model.onnx"), "--fuse"]
        for dim in DIMS.get(name, []):
            cmd += ["--dim", dim]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name}: rejected: {proc.stderr.strip()}")
            continue
        counts = {op: len(re.findall(rf"= weft\.{op} ", proc.stdout)) for op in COUNTED}
        print(f"{name}: " + " ".join(f"{op}={counts[op]}" for op in COUNTED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
