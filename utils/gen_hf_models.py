#!/usr/bin/env python3
"""Exports tiny Hugging Face `transformers` models to ONNX the way a user
exports a checkpoint: the library's own modeling code (transformers 4.45.2,
eager attention, no KV cache) through `torch.onnx.export` at opset 14 with
the default constant folding. Run it with the virtual environment that
`make hf-venv` creates (Debian's torch 1.13 plus transformers 4.45.2):

    build/hf-venv/bin/python utils/gen_hf_models.py --model llama -o /tmp/llama.onnx

Every family has the same tiny shape: vocabulary 256 (the bundled byte-level
token file), hidden size 64, 4 attention heads, 2 layers, feed-forward 128
(Bloom's is fixed at 4 x hidden = 256). `--model` is one of

* `gpt2`: GPT2LMHeadModel (Conv1D projections, a fused QKV, tied head).
* `llama`, `qwen2`: grouped-query attention over `--kv-heads` (2) K/V
  heads, RoPE, RMSNorm, SwiGLU; Qwen2 with QKV biases.
* `mistral`: Llama's layout with a sliding window of 8 positions, smaller
  than the sequence. torch 1.13's exporter has no symbolic for
  `aten::bitwise_or` (the window's mask); this script registers one (ONNX
  `Or`), as a user would.
* `gemma`: multi-query attention (`--kv-heads` 1, head dim 16), embeddings
  scaled by sqrt(hidden), RMSNorm with 1 + weight, a tied head.
* `gpt-neox`: a fused interleaved QKV, rotary on a quarter of each head
  (rotary_pct 0.25), parallel residual.
* `phi`: partial rotary (factor 0.5), parallel residual (one LayerNorm
  feeding attention and MLP), biased projections.
* `opt`: learned positions offset by 2, biased q/k/v projections, ReLU.
* `bloom`: ALiBi position biases, a fused QKV, an embedding LayerNorm.
* `falcon`: multi-query attention (one K/V head in the fused QKV;
  `--kv-heads 4` exports ordinary multi-head attention), parallel
  attention and MLP, RoPE, no biases, no ALiBi.
* `gptj`: rotary on the first 8 of each head's 16 dims (interleaved
  pairs), parallel residual.
* `bert`: BertForMaskedLM, a bidirectional encoder (no causal mask).
* `t5-encoder`: T5EncoderModel; its one output is the encoder's last
  hidden state [batch, seq, 64], named `hidden`.
* `t5`: T5ForConditionalGeneration with two token inputs, `input_ids`
  [batch, seq] and `decoder_input_ids` [batch, seq / 2]; relative position
  buckets, cross-attention, a tied head.

The token input is `input_ids`; the output is `logits` [batch, seq,
vocab] (t5: [batch, seq / 2, vocab]), except t5-encoder's `hidden`.
Weights come from `torch.manual_seed(--seed)`: the library's
initialisation, then N(0, 0.02) noise on every parameter as a trained
checkpoint would have (torch's exporter merges initializers of equal
value, so norm scales all 1 would become one tensor). `--reference PREFIX`
saves each input as `PREFIX.<input>.npy` and torch's output for them as
`PREFIX.<output>.npy` (`PREFIX.logits.npy`; t5-encoder:
`PREFIX.hidden.npy`): the independent reference for the compiled model.
"""

import argparse
import sys
import warnings

# torch and transformers are imported where used: utils/check_hf_exports.py
# imports the family lists below without them.

VOCAB, HIDDEN, HEADS, LAYERS, FFN, POSITIONS = 256, 64, 4, 2, 128, 64
MODELS = ["gpt2", "llama", "mistral", "qwen2", "gemma", "gpt-neox", "phi", "opt",
          "bloom", "falcon", "gptj", "bert", "t5-encoder", "t5"]
# Families with a K/V head count of their own, and its default.
KV_HEADS = {"llama": 2, "mistral": 2, "qwen2": 2, "gemma": 1, "falcon": 1}
# The causal language models (the rest: bert, t5-encoder, t5).
CAUSAL = ["gpt2", "llama", "mistral", "qwen2", "gemma", "gpt-neox", "phi", "opt",
          "bloom", "falcon", "gptj"]


def output_name(model):
    return "hidden" if model == "t5-encoder" else "logits"


def input_names(model):
    return ["input_ids", "decoder_input_ids"] if model == "t5" else ["input_ids"]


def bitwise_or(g, a, b):
    """aten::bitwise_or, which torch 1.13's exporter lacks (Mistral's
    sliding-window mask), as ONNX `Or`."""
    return g.op("Or", a, b)


def config(model, kv_heads):
    import transformers as T
    llama_like = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                      num_key_value_heads=kv_heads, num_hidden_layers=LAYERS,
                      intermediate_size=FFN, max_position_embeddings=POSITIONS)
    if model == "gpt2":
        return T.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_head=HEADS, n_layer=LAYERS,
                            n_inner=FFN, n_positions=POSITIONS)
    if model == "llama":
        return T.LlamaConfig(**llama_like)
    if model == "mistral":
        return T.MistralConfig(**llama_like, sliding_window=8)
    if model == "qwen2":
        return T.Qwen2Config(**llama_like)
    if model == "gemma":
        return T.GemmaConfig(**llama_like, head_dim=HIDDEN // HEADS,
                             hidden_activation="gelu_pytorch_tanh")
    if model == "gpt-neox":
        return T.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                               num_hidden_layers=LAYERS, intermediate_size=FFN,
                               rotary_pct=0.25, use_parallel_residual=True,
                               max_position_embeddings=POSITIONS)
    if model == "phi":
        return T.PhiConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                           num_hidden_layers=LAYERS, intermediate_size=FFN,
                           partial_rotary_factor=0.5, max_position_embeddings=POSITIONS)
    if model == "opt":
        return T.OPTConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                           num_hidden_layers=LAYERS, ffn_dim=FFN, word_embed_proj_dim=HIDDEN,
                           max_position_embeddings=POSITIONS)
    if model == "bloom":
        return T.BloomConfig(vocab_size=VOCAB, hidden_size=HIDDEN, n_head=HEADS, n_layer=LAYERS)
    if model == "falcon":
        if kv_heads not in (1, HEADS):
            raise SystemExit("falcon: --kv-heads is 1 (multi-query) or the head count")
        return T.FalconConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                              num_hidden_layers=LAYERS, ffn_hidden_size=FFN,
                              multi_query=kv_heads == 1, parallel_attn=True,
                              new_decoder_architecture=False, alibi=False, bias=False,
                              max_position_embeddings=POSITIONS)
    if model == "gptj":
        return T.GPTJConfig(vocab_size=VOCAB, n_embd=HIDDEN, n_head=HEADS, n_layer=LAYERS,
                            n_inner=FFN, rotary_dim=8, n_positions=POSITIONS)
    if model == "bert":
        return T.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS,
                            num_hidden_layers=LAYERS, intermediate_size=FFN,
                            max_position_embeddings=POSITIONS)
    return T.T5Config(vocab_size=VOCAB, d_model=HIDDEN, num_heads=HEADS, num_layers=LAYERS,
                      d_ff=FFN, d_kv=HIDDEN // HEADS)


def build(model, kv_heads):
    """The `transformers` model `--model` names, in eval mode, with a
    forward that takes the token inputs positionally and returns the one
    output tensor."""
    import torch
    import transformers as T
    T.logging.set_verbosity_error()  # notes on future versions
    cfg = config(model, kv_heads)
    cfg._attn_implementation = "eager"  # what the exporter can trace
    cfg.use_cache = False
    if model == "bert":
        hf = T.BertForMaskedLM(cfg)
    elif model == "t5":
        hf = T.T5ForConditionalGeneration(cfg)
    elif model == "t5-encoder":
        hf = T.T5EncoderModel(cfg)
    else:
        hf = T.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.02)

    class Export(torch.nn.Module):
        """Positional token inputs in, the output tensor out."""

        def __init__(self, hf):
            super().__init__()
            self.m = hf

        def forward(self, input_ids, decoder_input_ids=None):
            if model == "t5":
                return self.m(input_ids=input_ids, decoder_input_ids=decoder_input_ids,
                              use_cache=False, return_dict=False)[0]
            if model in ("bert", "t5-encoder"):
                return self.m(input_ids=input_ids, return_dict=False)[0]
            return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]

    # After wrapping: torch.onnx.export restores the module's own training
    # mode when it is done, and a wrapper left in training mode would turn
    # dropout on for the reference run.
    return Export(hf).eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--kv-heads", type=int,
                        help="K/V heads (llama, mistral, qwen2: 2; gemma, falcon: 1)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", metavar="PREFIX",
                        help="save the inputs and torch's output as PREFIX.<name>.npy")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    if args.kv_heads is not None and args.model not in KV_HEADS:
        parser.error(f"--kv-heads: {args.model} has no K/V head count of its own")
    kv_heads = args.kv_heads or KV_HEADS.get(args.model, HEADS)

    import torch
    import torch.onnx
    warnings.filterwarnings("ignore")  # the tracer's notes on shapes
    torch.onnx.register_custom_op_symbolic("aten::bitwise_or", bitwise_or, 14)
    torch.manual_seed(args.seed)
    model = build(args.model, kv_heads)
    inputs = [torch.randint(0, VOCAB, (args.batch, args.seq))]
    if args.model == "t5":
        inputs.append(torch.randint(0, VOCAB, (args.batch, args.seq // 2)))
    names, output = input_names(args.model), output_name(args.model)
    torch.onnx.export(model, tuple(inputs), args.output, opset_version=14,
                      input_names=names, output_names=[output])
    if args.reference:
        import numpy
        with torch.no_grad():
            result = model(*inputs)
        for name, tensor in zip(names, inputs):
            numpy.save(f"{args.reference}.{name}.npy", tensor.numpy())
        numpy.save(f"{args.reference}.{output}.npy", result.numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main())
