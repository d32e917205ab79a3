//===- SyntheticModel.cpp - Transformers described by their shape ---------===//
//
// The model is written as weft IR text and parsed: the printed form is the
// dialect's contract, and the parser's verifiers check every op.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/Synthetic/SyntheticModel.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using llvm::formatv;

namespace weft {

std::optional<SyntheticModelSpec>
SyntheticModelSpec::parse(llvm::StringRef text, std::string &error) {
  SyntheticModelSpec spec;
  auto [family, rest] = text.split(':');
  if (family == "gpt")
    spec.family = Family::GPT;
  else if (family == "llama")
    spec.family = Family::Llama;
  else {
    error = "unknown model family '" + family.str() +
            "' (gpt or llama, e.g. gpt:layers=12,hidden=768,heads=12,"
            "vocab=50257,seq=1024)";
    return std::nullopt;
  }
  llvm::StringMap<int64_t *> keys = {
      {"layers", &spec.layers},    {"hidden", &spec.hidden},
      {"heads", &spec.heads},      {"kv-heads", &spec.kvHeads},
      {"ffn", &spec.ffn},          {"vocab", &spec.vocab},
      {"seq", &spec.seq},          {"batch", &spec.batch},
      {"experts", &spec.experts},  {"top-k", &spec.topK},
      {"capacity", &spec.capacity}};
  llvm::SmallVector<llvm::StringRef> items;
  rest.split(items, ',', -1, /*KeepEmpty=*/false);
  bool batchGiven = false;
  for (llvm::StringRef item : items) {
    auto [key, value] = item.split('=');
    auto it = keys.find(key.trim());
    if (it == keys.end()) {
      error = "unknown key '" + key.trim().str() + "' in '" + text.str() + "'";
      return std::nullopt;
    }
    int64_t number;
    if (value.trim().getAsInteger(10, number) || number <= 0) {
      error = "'" + key.trim().str() + "' must be a positive integer, not '" +
              value.str() + "'";
      return std::nullopt;
    }
    *it->second = number;
    batchGiven |= key.trim() == "batch";
  }
  for (const char *required : {"layers", "hidden", "heads", "vocab", "seq"})
    if (*keys[required] == 0) {
      error = "the model needs '" + std::string(required) + "=' in '" +
              text.str() + "'";
      return std::nullopt;
    }
  if (spec.kvHeads == 0)
    spec.kvHeads = spec.heads;
  if (spec.family == Family::GPT && spec.kvHeads != spec.heads) {
    error = "kv-heads is a Llama option (GPT attention has one key/value "
            "head per query head)";
    return std::nullopt;
  }
  if (spec.ffn == 0)
    spec.ffn = 4 * spec.hidden;
  if (spec.hidden % spec.heads != 0) {
    error = formatv("hidden={0} is not a multiple of heads={1}", spec.hidden,
                    spec.heads);
    return std::nullopt;
  }
  if ((spec.topK || spec.capacity) && !spec.experts) {
    error = "top-k and capacity need experts=";
    return std::nullopt;
  }
  if (spec.experts) {
    if (spec.topK == 0)
      spec.topK = 2;
    if (spec.topK > spec.experts) {
      error = formatv("top-k={0} exceeds experts={1}", spec.topK, spec.experts);
      return std::nullopt;
    }
    // Expert parallelism's profile splits the batch over two ranks.
    if (!batchGiven)
      spec.batch = 2;
    if (spec.capacity == 0)
      spec.capacity = (5 * spec.topK * spec.seq + 4 * spec.experts - 1) /
                      (4 * spec.experts);
  }
  if (spec.heads % spec.kvHeads != 0) {
    error = formatv("heads={0} is not a multiple of kv-heads={1}", spec.heads,
                    spec.kvHeads);
    return std::nullopt;
  }
  return spec;
}

int64_t SyntheticModelSpec::parameters() const {
  int64_t h = hidden, f = ffn, kv = kvHeads * (hidden / heads);
  if (family == Family::GPT) {
    int64_t mlp =
        experts ? h * experts + experts * 2 * h * f : h * f + f + f * h + h;
    int64_t layer = 4 * h + 3 * h * h + 3 * h + h * h + h + mlp;
    return vocab * h + seq * h + layers * layer + 2 * h;
  }
  int64_t mlp = experts ? h * experts + experts * 3 * h * f : 3 * h * f;
  int64_t layer = 2 * h + 2 * h * h + 2 * h * kv + mlp;
  return 2 * vocab * h + layers * layer + h;
}

namespace {

/// Writes the function body: one SSA value per op, named by a counter, each
/// with the location an exporter would give it.
class Writer {
public:
  explicit Writer(const SyntheticModelSpec &spec) : spec(spec) {}

  std::string module() {
    std::string body = spec.family == SyntheticModelSpec::Family::GPT
                           ? gptBody()
                           : llamaBody();
    std::string out;
    llvm::raw_string_ostream os(out);
    os << "module {\n  func.func @main(%input_ids: tensor<"
       << formatv("{0}x{1}xi64", spec.batch, spec.seq)
       << "> {weft.input = \"input_ids\"}";
    for (auto &[name, type] : params)
      os << ",\n      %" << sanitize(name) << ": " << type
         << " {weft.param = \"" << name << "\"}";
    if (spec.experts)
      os << ") -> (" << act(spec.vocab) << ", tensor<f32>)"
         << " attributes {weft.outputs = [\"logits\", \"aux_loss\"]} {\n";
    else
      os << ") -> " << act(spec.vocab)
         << " attributes {weft.outputs = [\"logits\"]} {\n";
    os << body << "  }\n}\n";
    return out;
  }

private:
  const SyntheticModelSpec &spec;
  std::vector<std::pair<std::string, std::string>> params;
  std::string body;
  int64_t next = 0;
  /// The sum of the mixtures' load-balancing losses so far.
  std::string auxTotal;

  static std::string sanitize(llvm::StringRef name) {
    std::string s = name.str();
    for (char &c : s)
      if (c == '.')
        c = '_';
    return s;
  }
  static std::string tensor(llvm::ArrayRef<int64_t> shape,
                            llvm::StringRef element = "f32") {
    std::string s = "tensor<";
    for (int64_t d : shape)
      s += std::to_string(d) + "x";
    return s + element.str() + ">";
  }
  /// An activation [batch, seq, width].
  std::string act(int64_t width) const {
    return tensor({spec.batch, spec.seq, width});
  }
  std::string param(const std::string &name, llvm::ArrayRef<int64_t> shape) {
    params.push_back({name, tensor(shape)});
    return "%" + sanitize(name);
  }
  /// `<prefix>.weight` then `<prefix>.bias` (an argument list's order of
  /// evaluation is unspecified, so the two are not made in one call).
  std::pair<std::string, std::string>
  weightAndBias(const std::string &prefix, llvm::ArrayRef<int64_t> weight,
                int64_t bias) {
    std::string w = param(prefix + ".weight", weight);
    return {w, param(prefix + ".bias", {bias})};
  }
  std::string emit(const std::string &op, llvm::StringRef loc,
                   int64_t results = 1) {
    std::string value = "%v" + std::to_string(next++);
    body += "    " + value +
            (results > 1 ? ":" + std::to_string(results) : "") + " = " + op +
            " loc(\"" + loc.str() + "\")\n";
    return value;
  }
  std::string paramType(const std::string &value) const {
    for (auto &[name, type] : params)
      if ("%" + sanitize(name) == value)
        return type;
    return "";
  }

  /// `weights`: the weight and the bias ("" for none).
  std::string linear(const std::string &x, int64_t in, int64_t out,
                     const std::pair<std::string, std::string> &weights,
                     llvm::StringRef loc) {
    auto &[weight, bias] = weights;
    std::string op = "weft.linear " + x + ", " + weight;
    std::string types = act(in) + ", " + paramType(weight);
    if (!bias.empty()) {
      op += ", " + bias;
      types += ", " + paramType(bias);
    }
    return emit(op + " : " + types, loc);
  }
  std::string norm(llvm::StringRef kind, const std::string &x,
                   const std::pair<std::string, std::string> &weights,
                   llvm::StringRef loc) {
    auto &[scale, bias] = weights;
    std::string op = "weft." + kind.str() + " " + x + ", " + scale;
    std::string types = act(spec.hidden) + ", " + paramType(scale);
    if (!bias.empty()) {
      op += ", " + bias;
      types += ", " + paramType(bias);
    }
    return emit(op + " {axis = 2 : i64, epsilon = 1.0e-05 : f64} : " + types,
                loc);
  }
  std::string binary(llvm::StringRef kind, const std::string &x,
                     const std::string &y, int64_t width, llvm::StringRef loc) {
    return emit("weft." + kind.str() + " " + x + ", " + y + " : " + act(width) +
                    ", " + act(width),
                loc);
  }
  /// [b, s, heads·d] -> [b, heads, s, d].
  std::string toHeads(const std::string &x, int64_t heads,
                      const std::string &loc) {
    int64_t d = spec.hidden / spec.heads;
    std::string split = tensor({spec.batch, spec.seq, heads, d});
    std::string r =
        emit("weft.reshape " + x + " : " + act(heads * d) + " -> " + split,
             loc + "/Reshape");
    return emit("weft.transpose " + r +
                    " <{permutation = array<i64: 0, 2, 1, 3>}> : " + split,
                loc + "/Transpose");
  }
  std::string attention(const std::string &q, const std::string &k,
                        const std::string &v, const std::string &prefix) {
    int64_t d = spec.hidden / spec.heads;
    std::string qt = tensor({spec.batch, spec.heads, spec.seq, d});
    std::string kvt = tensor({spec.batch, spec.kvHeads, spec.seq, d});
    std::string o = emit("weft.attention " + q + ", " + k + ", " + v +
                             " <{causal}> : " + qt + ", " + kvt + ", " + kvt,
                         prefix + "/attention");
    std::string t =
        emit("weft.transpose " + o +
                 " <{permutation = array<i64: 0, 2, 1, 3>}> : " + qt,
             prefix + "/Transpose");
    return emit("weft.reshape " + t + " : " +
                    tensor({spec.batch, spec.seq, spec.heads, d}) + " -> " +
                    act(spec.hidden),
                prefix + "/Reshape");
  }

  std::string gptBody() {
    int64_t h = spec.hidden, f = spec.ffn;
    std::string wte = param("wte.weight", {spec.vocab, h});
    std::string wpe = param("wpe.weight", {spec.seq, h});
    std::string ids = tensor({spec.batch, spec.seq}, "i64");
    std::string positions =
        emit("weft.range {start = 0 : i64, step = 1 : i64} : " +
                 tensor({spec.seq}, "i64"),
             "/positions");
    std::string tokens = emit("weft.gather " + wte +
                                  ", %input_ids <{axis = "
                                  "0 : i64}> : " +
                                  paramType(wte) + ", " + ids,
                              "/wte/Gather");
    std::string pos = emit("weft.gather " + wpe + ", " + positions +
                               " <{axis = 0 : i64}> : " + paramType(wpe) +
                               ", " + tensor({spec.seq}, "i64"),
                           "/wpe/Gather");
    std::string x = emit("weft.add " + tokens + ", " + pos + " : " + act(h) +
                             ", " + tensor({spec.seq, h}),
                         "/Add");
    for (int64_t l = 0; l < spec.layers; ++l) {
      std::string n = "h." + std::to_string(l), at = "/" + n;
      std::string ln1 = norm("layer_norm", x,
                             weightAndBias(n + ".ln_1", {h}, h), at + "/ln_1");
      std::string qkv = linear(
          ln1, h, 3 * h, weightAndBias(n + ".attn.c_attn", {h, 3 * h}, 3 * h),
          at + "/attn/c_attn");
      std::string parts =
          emit("weft.split " + qkv +
                   formatv(" <{{axis = 2 : i64, sizes = array<i64: {0}, {0}, "
                           "{0}>}> : {1}",
                           h, act(3 * h))
                       .str(),
               at + "/attn/Split", /*results=*/3);
      // The parser names the three results `<parts>#0..2`.
      std::string q = toHeads(parts + "#0", spec.heads, at + "/attn/q");
      std::string k = toHeads(parts + "#1", spec.heads, at + "/attn/k");
      std::string v = toHeads(parts + "#2", spec.heads, at + "/attn/v");
      std::string o = attention(q, k, v, at + "/attn");
      std::string proj =
          linear(o, h, h, weightAndBias(n + ".attn.c_proj", {h, h}, h),
                 at + "/attn/c_proj");
      x = binary("add", x, proj, h, at + "/Add");
      std::string ln2 = norm("layer_norm", x,
                             weightAndBias(n + ".ln_2", {h}, h), at + "/ln_2");
      if (spec.experts) {
        x = binary("add", x, mixture(ln2, n + ".moe", at + "/moe", false), h,
                   at + "/Add_1");
        continue;
      }
      std::string fc =
          linear(ln2, h, f, weightAndBias(n + ".mlp.c_fc", {h, f}, f),
                 at + "/mlp/c_fc");
      std::string gelu =
          emit("weft.gelu " + fc + " : " + act(f), at + "/mlp/Gelu");
      std::string down =
          linear(gelu, f, h, weightAndBias(n + ".mlp.c_proj", {f, h}, h),
                 at + "/mlp/c_proj");
      x = binary("add", x, down, h, at + "/Add_1");
    }
    std::string final =
        norm("layer_norm", x, weightAndBias("ln_f", {h}, h), "/ln_f");
    std::string logits =
        emit("weft.linear " + final + ", " + wte +
                 " <{transpose_weight}> : " + act(h) + ", " + paramType(wte),
             "/lm_head");
    body += ret(logits);
    return body;
  }

  std::string llamaBody() {
    int64_t h = spec.hidden, f = spec.ffn;
    int64_t kv = spec.kvHeads * (h / spec.heads);
    std::string embed = param("model.embed_tokens.weight", {spec.vocab, h});
    std::string x =
        emit("weft.gather " + embed +
                 ", %input_ids <{axis = 0 : i64}> : " + paramType(embed) +
                 ", " + tensor({spec.batch, spec.seq}, "i64"),
             "/model/embed_tokens/Gather");
    for (int64_t l = 0; l < spec.layers; ++l) {
      std::string n = "model.layers." + std::to_string(l);
      std::string at = "/model/layers." + std::to_string(l);
      std::string norm1 =
          norm("rms_norm", x, {param(n + ".input_layernorm.weight", {h}), ""},
               at + "/input_layernorm");
      auto proj = [&](const char *name, int64_t out) {
        return linear(
            norm1, h, out,
            {param(n + ".self_attn." + name + ".weight", {h, out}), ""},
            at + "/self_attn/" + name);
      };
      std::string q =
          toHeads(proj("q_proj", h), spec.heads, at + "/self_attn/q");
      std::string k =
          toHeads(proj("k_proj", kv), spec.kvHeads, at + "/self_attn/k");
      std::string v =
          toHeads(proj("v_proj", kv), spec.kvHeads, at + "/self_attn/v");
      std::string o = attention(q, k, v, at + "/self_attn");
      std::string out =
          linear(o, h, h, {param(n + ".self_attn.o_proj.weight", {h, h}), ""},
                 at + "/self_attn/o_proj");
      x = binary("add", x, out, h, at + "/Add");
      std::string norm2 =
          norm("rms_norm", x,
               {param(n + ".post_attention_layernorm.weight", {h}), ""},
               at + "/post_attention_layernorm");
      if (spec.experts) {
        x = binary("add", x,
                   mixture(norm2, n + ".block_sparse_moe",
                           at + "/block_sparse_moe", true),
                   h, at + "/Add_1");
        continue;
      }
      std::string gate =
          linear(norm2, h, f, {param(n + ".mlp.gate_proj.weight", {h, f}), ""},
                 at + "/mlp/gate_proj");
      std::string up =
          linear(norm2, h, f, {param(n + ".mlp.up_proj.weight", {h, f}), ""},
                 at + "/mlp/up_proj");
      std::string silu =
          emit("weft.silu " + gate + " : " + act(f), at + "/mlp/act_fn");
      std::string gated = binary("mul", silu, up, f, at + "/mlp/Mul");
      std::string down =
          linear(gated, f, h, {param(n + ".mlp.down_proj.weight", {f, h}), ""},
                 at + "/mlp/down_proj");
      x = binary("add", x, down, h, at + "/Add_1");
    }
    std::string final = norm(
        "rms_norm", x, {param("model.norm.weight", {h}), ""}, "/model/norm");
    std::string head = param("lm_head.weight", {spec.vocab, h});
    std::string logits =
        emit("weft.linear " + final + ", " + head +
                 " <{transpose_weight}> : " + act(h) + ", " + paramType(head),
             "/lm_head");
    body += ret(logits);
    return body;
  }

  std::string ret(const std::string &logits) {
    if (!spec.experts)
      return "    return " + logits + " : " + act(spec.vocab) + "\n";
    // The Switch Transformer's weight of the load-balancing loss.
    std::string aux =
        emit("weft.mul " + auxTotal + ", " + scalar("1.000000e-02", "f32") +
                 " : tensor<f32>, tensor<f32>",
             "/aux_loss");
    return "    return " + logits + ", " + aux + " : " + act(spec.vocab) +
           ", tensor<f32>\n";
  }

  /// A constant scalar.
  std::string scalar(llvm::StringRef value, llvm::StringRef element) {
    return emit("weft.constant dense<" + value.str() + "> : tensor<" +
                    element.str() + ">",
                "/moe/constant");
  }

  /// GShard's mixture of experts over `x` [b, s, h]: the tokens of each
  /// sequence routed to their top-k experts by a softmax router, at most
  /// `capacity` per expert (later choices dropped), by dense one-hot
  /// dispatch and combine tensors [b, s, e, c]; the experts' weights
  /// stacked [e, ...]. Adds the layer's load-balancing loss to `auxTotal`.
  std::string mixture(const std::string &x, const std::string &n,
                      const std::string &at, bool swiglu) {
    int64_t b = spec.batch, s = spec.seq, h = spec.hidden, f = spec.ffn;
    int64_t e = spec.experts, c = spec.capacity;
    std::string bse = tensor({b, s, e}), bse1 = tensor({b, s, e, 1});
    std::string bsec = tensor({b, s, e, c});
    std::string router = param(n + ".router.weight", {h, e});
    std::string probs =
        emit("weft.softmax " + linear(x, h, e, {router, ""}, at + "/router") +
                 " {axis = 2 : i64} : " + bse,
             at + "/Softmax");
    // Cumulative sums over the sequence: a product with the upper
    // triangle (ones where row <= column).
    std::string positions = emit(
        "weft.range {start = 0 : i64, step = 1 : i64} : " + tensor({s}, "i64"),
        at + "/positions");
    std::string column =
        emit("weft.unsqueeze " + positions +
                 " <{axes = array<i64: 1>}> : " + tensor({s}, "i64"),
             at + "/positions/Unsqueeze");
    std::string upper =
        emit("weft.cast " +
                 emit("weft.less_equal " + column + ", " + positions + " : " +
                          tensor({s, 1}, "i64") + ", " + tensor({s}, "i64"),
                      at + "/upper") +
                 " : " + tensor({s, s}, "i1") + " to " + tensor({s, s}),
             at + "/upper/Cast");
    std::string slots = emit("weft.range {start = 0 : i64, step = 1 : i64} : " +
                                 tensor({c}, "i64"),
                             at + "/slots");
    std::string one = scalar("1.000000e+00", "f32");
    std::string oneIndex = scalar("1", "i64");
    std::string limit = scalar(formatv("{0}.0", c).str(), "f32");
    std::string remaining = probs, before, dispatch, combine, first;
    for (int64_t k = 0; k < spec.topK; ++k) {
      std::string step = at + "/top" + std::to_string(k);
      std::string gate =
          emit("weft.reduce_max " + remaining +
                   " <{axes = array<i64: 2>, keepdims}> : " + bse,
               step + "/ReduceMax");
      std::string choice =
          emit("weft.cast " +
                   emit("weft.equal " + remaining + ", " + gate + " : " + bse +
                            ", " + tensor({b, s, 1}),
                        step + "/Equal") +
                   " : " + tensor({b, s, e}, "i1") + " to " + bse,
               step + "/Cast");
      if (k == 0)
        first = choice;
      // The 1-based place of each token in its expert's queue.
      std::string bes = tensor({b, e, s});
      std::string position = emit(
          "weft.transpose " +
              emit("weft.linear " +
                       emit("weft.transpose " + choice +
                                " <{permutation = array<i64: 0, 2, 1>}> : " +
                                bse,
                            step + "/CumSum/Transpose") +
                       ", " + upper + " : " + bes + ", " + tensor({s, s}),
                   step + "/CumSum") +
              " <{permutation = array<i64: 0, 2, 1>}> : " + bes,
          step + "/CumSum/Transpose_1");
      if (k > 0)
        position = emit("weft.add " + position + ", " + before + " : " + bse +
                            ", " + tensor({b, 1, e}),
                        step + "/Add");
      std::string kept =
          emit("weft.mul " + choice + ", " +
                   emit("weft.cast " +
                            emit("weft.less_equal " + position + ", " + limit +
                                     " : " + bse + ", tensor<f32>",
                                 step + "/LessEqual") +
                            " : " + tensor({b, s, e}, "i1") + " to " + bse,
                        step + "/LessEqual/Cast") +
                   " : " + bse + ", " + bse,
               step + "/Mul");
      std::string place = emit("weft.sub " +
                                   emit("weft.cast " + position + " : " + bse +
                                            " to " + tensor({b, s, e}, "i64"),
                                        step + "/Cast_1") +
                                   ", " + oneIndex + " : " +
                                   tensor({b, s, e}, "i64") + ", tensor<i64>",
                               step + "/Sub");
      std::string slot =
          emit("weft.cast " +
                   emit("weft.equal " +
                            emit("weft.unsqueeze " + place +
                                     " <{axes = array<i64: 3>}> : " +
                                     tensor({b, s, e}, "i64"),
                                 step + "/Unsqueeze") +
                            ", " + slots + " : " + tensor({b, s, e, 1}, "i64") +
                            ", " + tensor({c}, "i64"),
                        step + "/Equal_1") +
                   " : " + tensor({b, s, e, c}, "i1") + " to " + bsec,
               step + "/Cast_2");
      std::string sent = emit("weft.mul " +
                                  emit("weft.unsqueeze " + kept +
                                           " <{axes = array<i64: 3>}> : " + bse,
                                       step + "/Unsqueeze_1") +
                                  ", " + slot + " : " + bse1 + ", " + bsec,
                              step + "/Mul_1");
      std::string weighted =
          emit("weft.mul " + sent + ", " +
                   emit("weft.unsqueeze " + gate +
                            " <{axes = array<i64: 3>}> : " + tensor({b, s, 1}),
                        step + "/Unsqueeze_2") +
                   " : " + bsec + ", " + tensor({b, s, 1, 1}),
               step + "/Mul_2");
      dispatch = k == 0 ? sent
                        : emit("weft.add " + dispatch + ", " + sent + " : " +
                                   bsec + ", " + bsec,
                               step + "/Add_1");
      combine = k == 0 ? weighted
                       : emit("weft.add " + combine + ", " + weighted + " : " +
                                  bsec + ", " + bsec,
                              step + "/Add_2");
      if (k + 1 == spec.topK)
        break;
      std::string queued =
          emit("weft.reduce_sum " + choice +
                   " <{axes = array<i64: 1>, keepdims}> : " + bse,
               step + "/ReduceSum");
      before = k == 0 ? queued
                      : emit("weft.add " + before + ", " + queued + " : " +
                                 tensor({b, 1, e}) + ", " + tensor({b, 1, e}),
                             step + "/Add_3");
      remaining = emit(
          "weft.mul " + remaining + ", " +
              emit("weft.sub " + one + ", " + choice + " : tensor<f32>, " + bse,
                   step + "/Sub_1") +
              " : " + bse + ", " + bse,
          step + "/Mul_3");
    }
    // Dispatch: [b, e·c, s] x [b, s, h], then experts first.
    std::string becs = tensor({b, e, c, s}), bech = tensor({b, e, c, h});
    std::string ebch = tensor({e, b, c, h});
    std::string tokens = emit(
        "weft.matmul " +
            emit("weft.reshape " +
                     emit("weft.transpose " + dispatch +
                              " <{permutation = array<i64: 0, 2, 3, 1>}> : " +
                              bsec,
                          at + "/dispatch/Transpose") +
                     " : " + becs + " -> " + tensor({b, e * c, s}),
                 at + "/dispatch/Reshape") +
            ", " + x + " : " + tensor({b, e * c, s}) + ", " + act(h),
        at + "/dispatch");
    std::string expertTokens =
        emit("weft.reshape " +
                 emit("weft.transpose " +
                          emit("weft.reshape " + tokens + " : " +
                                   tensor({b, e * c, h}) + " -> " + bech,
                               at + "/dispatch/Reshape_1") +
                          " <{permutation = array<i64: 1, 0, 2, 3>}> : " + bech,
                      at + "/dispatch/Transpose_1") +
                 " : " + ebch + " -> " + tensor({e, b * c, h}),
             at + "/dispatch/Reshape_2");
    std::string ebh = tensor({e, b * c, h}), ebf = tensor({e, b * c, f});
    auto expertMatmul = [&](const std::string &in, const std::string &inType,
                            const char *name, int64_t rows, int64_t cols) {
      std::string w = param(n + "." + name, {e, rows, cols});
      return emit("weft.matmul " + in + ", " + w + " : " + inType + ", " +
                      tensor({e, rows, cols}),
                  at + "/experts/" + name);
    };
    std::string hidden;
    if (swiglu) {
      std::string gate = expertMatmul(expertTokens, ebh, "w1", h, f);
      std::string up = expertMatmul(expertTokens, ebh, "w3", h, f);
      hidden = emit(
          "weft.mul " +
              emit("weft.silu " + gate + " : " + ebf, at + "/experts/act_fn") +
              ", " + up + " : " + ebf + ", " + ebf,
          at + "/experts/Mul");
    } else {
      hidden = emit("weft.gelu " + expertMatmul(expertTokens, ebh, "w1", h, f) +
                        " {approximate = \"tanh\"} : " + ebf,
                    at + "/experts/Gelu");
    }
    std::string out = expertMatmul(hidden, ebf, "w2", f, h);
    // Combine: back to the tokens' order, [b, s, e·c] x [b, e·c, h].
    std::string back = emit(
        "weft.reshape " +
            emit("weft.transpose " +
                     emit("weft.reshape " + out + " : " + ebh + " -> " + ebch,
                          at + "/combine/Reshape") +
                     " <{permutation = array<i64: 1, 0, 2, 3>}> : " + ebch,
                 at + "/combine/Transpose") +
            " : " + bech + " -> " + tensor({b, e * c, h}),
        at + "/combine/Reshape_1");
    std::string y = emit("weft.matmul " +
                             emit("weft.reshape " + combine + " : " + bsec +
                                      " -> " + tensor({b, s, e * c}),
                                  at + "/combine/Reshape_2") +
                             ", " + back + " : " + tensor({b, s, e * c}) +
                             ", " + tensor({b, e * c, h}),
                         at + "/combine");
    // experts x <fraction routed first to each, mean router probability>.
    auto mean = [&](const std::string &v, const std::string &loc) {
      return emit("weft.reduce_mean " + v +
                      " <{axes = array<i64: 0, 1>}> : " + bse,
                  loc);
    };
    std::string balance = emit(
        "weft.mul " +
            emit("weft.reduce_sum " +
                     emit("weft.mul " + mean(first, at + "/aux/ReduceMean") +
                              ", " + mean(probs, at + "/aux/ReduceMean_1") +
                              " : " + tensor({e}) + ", " + tensor({e}),
                          at + "/aux/Mul") +
                     " <{axes = array<i64: 0>}> : " + tensor({e}),
                 at + "/aux/ReduceSum") +
            ", " + scalar(formatv("{0}.0", e).str(), "f32") +
            " : tensor<f32>, tensor<f32>",
        at + "/aux/Mul_1");
    auxTotal = auxTotal.empty() ? balance
                                : emit("weft.add " + auxTotal + ", " + balance +
                                           " : tensor<f32>, tensor<f32>",
                                       "/aux/Add");
    return y;
  }
};

} // namespace

OwningOpRef<ModuleOp> buildSyntheticModel(const SyntheticModelSpec &spec,
                                          MLIRContext *context) {
  std::string text = Writer(spec).module();
  return parseSourceString<ModuleOp>(text, ParserConfig(context),
                                     "synthetic-model");
}

} // namespace weft
