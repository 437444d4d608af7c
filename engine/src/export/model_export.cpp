// Canonical weights -> llama.cpp's GGUF names and hyperparameters (the inverse
// of gguf.cpp and of llama.cpp's convert_hf_to_gguf.py), and dense HF export.
#include "embedlab/model_export.hpp"

#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/name_table.hpp"
#include "embedlab/quant_types.hpp"
#include "io/canonical_weights.hpp"
#include "io/gguf_output.hpp"
#include "io/gguf_quants.hpp"
#include "model/manifest_support.hpp"

namespace embedlab {

namespace fs = std::filesystem;

namespace {

// A tensor as it will be written: its shape now, its values when the writer gets to
// it (float32, contiguous, row-major), so that at most one converted tensor (a
// padded, permuted, fused or reconstructed copy) exists at a time.
struct LazyTensor {
    std::vector<int64_t> shape;
    std::function<torch::Tensor()> make;
    // When set, the writer takes rows [begin, begin + count) a block at a time instead (a
    // compressed table rebuilt: no V x d copy at once).
    std::function<torch::Tensor(int64_t begin, int64_t count)> rows = {};
};

// The model's own tensor: no copy unless it is not float32 and contiguous.
LazyTensor held(const torch::Tensor& t)
{
    return {t.sizes().vec(), [t] { return t.to(torch::kFloat32).contiguous(); }};
}

// `in` through `fn` (which gives `shape`), computed when written.
LazyTensor mapped(LazyTensor in, std::vector<int64_t> shape, std::function<torch::Tensor(torch::Tensor)> fn)
{
    return {std::move(shape), [in = std::move(in), fn = std::move(fn)] {
                c10::InferenceMode guard;
                return fn(in.make()).to(torch::kFloat32).contiguous();
            }};
}

struct PlannedTensor {
    std::string name;
    LazyTensor data;
    bool matrix = true; // 2-D weights take the export type; norms and biases stay F32
};

struct GgufPlan {
    std::string arch;
    io::GgufMetadata metadata;
    std::vector<PlannedTensor> tensors;
    std::vector<std::string> notes;
};

// The dense token table, whatever the embedding is (factors are multiplied out).
torch::Tensor dense_tokens(const TokenEmbedding& e)
{
    c10::InferenceMode guard;
    if (const auto* table = dense_table(&e))
        return *table;
    return e.lookup(torch::arange(e.vocab_size(), torch::kLong)).contiguous();
}

// The same, rebuilt only when written (the embedding is the model's: it outlives the export).
LazyTensor lazy_dense_tokens(const TokenEmbedding& e)
{
    if (const auto* table = dense_table(&e))
        return held(*table);
    LazyTensor t{{e.vocab_size(), e.dim()}, [&e] { return dense_tokens(e); }};
    // Rows built each on its own (tt) are the same bits rebuilt in blocks as all at once;
    // a product over the whole table (pca's Z P) is not blocked, so that its export stays
    // bit-identical to the whole-table rebuild.
    if (e.rows_built_alone())
        t.rows = [&e](int64_t begin, int64_t count) {
            c10::InferenceMode guard;
            return e.lookup(torch::arange(begin, begin + count, torch::kLong)).contiguous();
        };
    return t;
}

// FLAT-LLM: value rows of each KV head (and output columns of each head) padded
// with zeros back to the head size; the padded dims carry exact zeros, so the
// function is unchanged.
torch::Tensor pad_head_rows(const torch::Tensor& w, int64_t heads, int64_t from, int64_t to)
{
    if (from == to)
        return w;
    const bool bias = w.dim() == 1;
    auto per_head = bias ? w.reshape({heads, from}) : w.reshape({heads, from, w.size(1)});
    auto padded =
        torch::zeros(bias ? std::vector<int64_t>{heads, to} : std::vector<int64_t>{heads, to, w.size(1)});
    padded.narrow(1, 0, from).copy_(per_head);
    return bias ? padded.reshape({heads * to}) : padded.reshape({heads * to, w.size(1)});
}

torch::Tensor pad_head_columns(const torch::Tensor& w, int64_t heads, int64_t from, int64_t to)
{
    if (from == to) // not narrowed: the tensor itself, not two transposed copies
        return w;
    return pad_head_rows(w.t().contiguous(), heads, from, to).t().contiguous();
}

std::string gguf_arch(const ModelConfig& c)
{
    if (c.arch == Architecture::GPT2)
        return "gpt2";
    if (c.is_encoder())
        return "bert"; // distilbert too: llama.cpp's converter writes it as bert without segment rows
    if (c.model_type == "gpt_neox")
        return "gptneox";
    if (c.model_type.empty() || c.model_type == "llama")
        return "llama";
    if (c.model_type == "gemma3_text")
        return "gemma3";
    return c.model_type;
}

// llama.cpp's sliding layers are periodic: layer l slides iff l % P < P - 1.
// The P that gives this model's layers, or 0 when none does.
int64_t sliding_period(const ModelConfig& c)
{
    for (int64_t period = 2; period <= c.num_layers + 1; ++period) {
        bool same = true;
        for (int64_t l = 0; l < c.num_layers && same; ++l)
            same = c.layer_slides(l) == (l % period < period - 1);
        if (same)
            return period;
    }
    return 0;
}

// Gemma 3's rope_scaling as llama.cpp holds it: one linear factor; 0 if none, -1
// if the divisors are not a single factor.
double linear_rope_factor(const ModelConfig& c)
{
    if (c.rope_freq_divisors.empty())
        return 0;
    for (double f : c.rope_freq_divisors)
        if (f != c.rope_freq_divisors.front())
            return -1;
    return c.rope_freq_divisors.front();
}

std::string refusal(const LoadedModel& lm)
{
    const auto& c = lm.model->config();
    if (c.is_encoder()) {
        if (c.encoder_head == EncoderHead::Classification)
            return "a sequence classifier: llama.cpp's bert graph has no pooler, so its head could not be "
                   "computed there (--format hf writes it)";
        if (c.pooling == "max")
            return "max pooling: llama.cpp pools by mean, CLS or last token only";
        if (lm.model->lora())
            return "the model has unmerged LoRA adapters (merge them first)";
        return "";
    }
    const std::string a = gguf_arch(c);
    static const std::set<std::string> known{"gpt2",   "llama",  "qwen2", "qwen3",  "gemma",
                                             "gemma2", "gemma3", "phi3",  "gptneox"};
    if (a == "opt")
        return "llama.cpp has no OPT architecture (export --format hf writes it for other tools)";
    if (!known.count(a))
        return c.type_name() + " has no GGUF mapping in EmbedLab";
    if (lm.model->lora())
        return "the model has unmerged LoRA adapters; llama.cpp would need them as a separate adapter file "
               "(merge them first: finetune --merge)";
    if ((a == "gemma2" || a == "gemma3") && c.query_scale > 0 &&
        std::abs(c.query_scale * std::sqrt(static_cast<double>(c.head_dim())) - 1.0) > 1e-12)
        return a + " with query_pre_attn_scalar other than head_dim: llama.cpp scales queries by "
                   "1/sqrt(head_dim) for this model size";
    if (a == "gemma2")
        for (int64_t l = 0; l < c.num_layers; ++l)
            if (c.sliding_window > 0 && c.layer_slides(l) != (l % 2 == 0))
                return "gemma2 whose sliding layers are not the even ones: llama.cpp fixes that pattern";
    if (a == "gemma3" && c.sliding_window > 0 && sliding_period(c) == 0)
        return "gemma3 whose sliding layers are not periodic (llama.cpp slides layer l iff l % P < P - 1)";
    if (a == "gemma3" && c.attn_softcap > 0)
        return "gemma3 with an attention soft-cap: llama.cpp's gemma3 graph has none";
    if (a == "gemma3" && linear_rope_factor(c) < 0)
        return "gemma3 with a rope_scaling other than linear: llama.cpp holds one factor";
    if (!c.rope_freq_divisors.empty() && a != "llama" && a != "gemma3")
        return "rope_scaling on " + c.type_name() + ": llama.cpp reads frequency factors only for llama";
    if (c.arch == Architecture::Llama && c.rotary_dims() != c.head_dim() && a != "gptneox" && a != "phi3")
        return "partial rotary embeddings on " + c.type_name() + " are not expressible in its GGUF form";
    if (a == "gptneox" && !c.value_head_dims.empty())
        return "FLAT-LLM on gpt_neox: its fused qkv tensor cannot hold narrower value heads";
    return "";
}

void add_vocabulary(GgufPlan& plan, const LoadedModel& lm)
{
    if (!lm.tokenizer)
        throw InputError(lm.files.path.string() + ": no tokenizer loaded; a GGUF needs its vocabulary");
    std::string why;
    const auto v = lm.tokenizer->gguf_vocabulary(&why);
    if (!v)
        throw InputError(why);
    auto& m = plan.metadata;
    m.set_string("tokenizer.ggml.model", v->model);
    if (!v->pre.empty())
        m.set_string("tokenizer.ggml.pre", v->pre);
    // Rows beyond the tokenizer (phi3's 32064 against 32000 pieces) get placeholder pieces.
    std::vector<std::string> tokens = v->tokens;
    std::vector<int32_t> types = v->types;
    std::vector<float> scores = v->scores;
    const auto V = static_cast<size_t>(lm.model->config().vocab_size);
    if (tokens.size() > V)
        throw InputError(lm.files.path.string() +
                         ": the tokenizer has more tokens than the embedding has rows");
    // Hugging Face's added_tokens.json names some of them (Phi-3's <|end|>, which
    // llama.cpp looks up by text); the rest are [PAD] as convert_hf_to_gguf writes them.
    std::map<int64_t, std::string> added;
    if (const fs::path file = lm.files.path / "added_tokens.json";
        fs::is_directory(lm.files.path) && fs::exists(file)) {
        const auto j = nlohmann::json::parse(read_text_file(file), nullptr, /*allow_exceptions=*/false);
        if (!j.is_object())
            throw InputError(file.string() + ": not a JSON object of token -> id");
        for (const auto& [text, id] : j.items())
            if (id.is_number_integer() && id.get<int64_t>() >= static_cast<int64_t>(tokens.size()))
                added[id.get<int64_t>()] = text;
    }
    for (size_t id = tokens.size(); id < V; ++id) {
        const auto it = added.find(static_cast<int64_t>(id));
        tokens.push_back(it != added.end() ? it->second : "[PAD" + std::to_string(id) + "]");
        types.push_back(it != added.end() ? 3 : 5); // control / unused
        if (!scores.empty())
            scores.push_back(0.0f);
    }
    if (tokens.size() > v->tokens.size())
        plan.notes.push_back(std::to_string(tokens.size() - v->tokens.size()) +
                             " embedding rows beyond the tokenizer (" + std::to_string(added.size()) +
                             " from added_tokens.json, the rest unused [PAD] tokens)");
    m.set_string_array("tokenizer.ggml.tokens", tokens);
    if (!scores.empty())
        m.set_float32_array("tokenizer.ggml.scores", scores);
    m.set_int32_array("tokenizer.ggml.token_type", types);
    // A byte-level BPE writes its list even when empty (a vocabulary trimmed to its byte
    // tokens): llama.cpp refuses a gpt2 vocabulary without the key, and so does EmbedLab.
    if (!v->merges.empty() || v->model == "gpt2")
        m.set_string_array("tokenizer.ggml.merges", v->merges);
    if (v->bos_id >= 0)
        m.set_uint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v->bos_id));
    if (v->eos_id >= 0)
        m.set_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v->eos_id));
    if (v->unk_id >= 0)
        m.set_uint32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v->unk_id));
    if (v->model == "llama")
        m.set_bool("tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    if (v->model == "bert") { // as convert_hf_to_gguf's BertModel and SpecialVocab write them
        const auto& tok = *lm.tokenizer;
        m.set_uint32("tokenizer.ggml.token_type_count",
                     static_cast<uint32_t>(std::max<int64_t>(1, lm.model->config().type_vocab_size)));
        m.set_uint32("tokenizer.ggml.seperator_token_id",
                     static_cast<uint32_t>(v->eos_id)); // llama.cpp's spelling
        if (const auto pad = tok.pad_id())
            m.set_uint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*pad));
        if (const auto mask = tok.mask_id())
            m.set_uint32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(*mask));
        m.set_bool("tokenizer.ggml.add_bos_token", true); // [CLS] .. [SEP]
        m.set_bool("tokenizer.ggml.add_eos_token", true);
        m.set_bool("tokenizer.ggml.add_sep_token", false);
        m.set_bool("tokenizer.ggml.normalizer.lowercase", true); // the only form gguf_vocabulary writes
    }
}

void add_hparams(GgufPlan& plan, const ModelConfig& c)
{
    auto& m = plan.metadata;
    const std::string& a = plan.arch;
    m.set_uint32(a + ".context_length", static_cast<uint32_t>(c.max_positions));
    m.set_uint32(a + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
    m.set_uint32(a + ".block_count", static_cast<uint32_t>(c.num_layers));
    // FLAT-LLM's narrowed MLPs are zero-padded back: llama.cpp sizes every
    // layer's MLP from one feed_forward_length.
    m.set_uint32(a + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
    m.set_uint32(a + ".attention.head_count", static_cast<uint32_t>(c.num_heads));
    if (c.is_encoder()) {
        m.set_float32(a + ".attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
        m.set_bool(a + ".attention.causal", false);
        if (!c.pooling.empty()) // llama.cpp's LLAMA_POOLING_TYPE_MEAN 1, _CLS 2
            m.set_uint32(a + ".pooling_type", c.pooling == "mean" ? 1u : 2u);
        return;
    }
    m.set_uint32(a + ".vocab_size", static_cast<uint32_t>(c.vocab_size));
    if (c.arch == Architecture::GPT2) {
        m.set_float32(a + ".attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
        return;
    }
    m.set_uint32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
    m.set_float32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
    m.set_uint32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rotary_dims()));
    m.set_uint32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim()));
    m.set_uint32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim()));
    if (c.norm == NormKind::LayerNorm)
        m.set_float32(a + ".attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
    else
        m.set_float32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
    if (a == "gptneox")
        m.set_bool(a + ".use_parallel_residual", c.parallel_residual);
    if (a == "gemma2") {
        m.set_float32(a + ".attn_logit_softcapping", static_cast<float>(c.attn_softcap));
        m.set_float32(a + ".final_logit_softcapping", static_cast<float>(c.final_softcap));
        if (c.sliding_window > 0)
            m.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
    }
    if (a == "gemma3") {
        if (c.final_softcap > 0)
            m.set_float32(a + ".final_logit_softcapping", static_cast<float>(c.final_softcap));
        if (c.sliding_window > 0) {
            m.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
            m.set_uint32(a + ".attention.sliding_window_pattern", static_cast<uint32_t>(sliding_period(c)));
            m.set_float32(a + ".rope.freq_base_swa",
                          static_cast<float>(c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta));
        }
        if (const double factor = linear_rope_factor(c); factor > 0) {
            m.set_string(a + ".rope.scaling.type", "linear");
            m.set_float32(a + ".rope.scaling.factor", static_cast<float>(factor));
        }
    }
    if (a == "phi3" && c.sliding_window > 0)
        m.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
}

// The rotary family's tensors under llama.cpp's names: the canonical weights
// put in the layout llama.cpp computes with, then named through the table the
// GGUF reader uses (canonical_weights.hpp). A tensor without a GGUF name is an
// error, never dropped.
void add_decoder_tensors(GgufPlan& plan, const ModelConfig& c, const WeightMap& weights)
{
    const std::string& a = plan.arch;
    const int64_t H = c.num_heads, Hkv = c.num_kv_heads, hd = c.head_dim(), F = c.intermediate_size;
    // Handles and recipes only: every tensor is converted when the writer reaches it.
    std::map<std::string, LazyTensor> w;
    for (const auto& [name, t] : weights)
        if (name != "model.embed_tokens.weight") { // written by plan_gguf, reconstructed if compressed
            if (io::gguf_norms_store_one_plus(a) && io::is_norm_weight(name))
                w.emplace(name, mapped(held(t), t.sizes().vec(), [](torch::Tensor x) { return x + 1.0; }));
            else
                w.emplace(name, held(t));
        }
    bool padded = false, narrowed_mlp = false;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const int64_t vd = c.value_dim(l), f = c.mlp_width(l);
        padded = padded || vd != hd;
        narrowed_mlp = narrowed_mlp || f != F;
        // dim: the dimension `fn` resizes to `size` (-1: the shape is kept).
        auto change = [&](const std::string& name, int64_t dim, int64_t size,
                          std::function<torch::Tensor(torch::Tensor)> fn) {
            if (const auto it = w.find(p + name); it != w.end()) {
                auto shape = it->second.shape;
                if (dim >= 0 && dim < static_cast<int64_t>(shape.size()))
                    shape[static_cast<size_t>(dim)] = size;
                it->second = mapped(std::move(it->second), std::move(shape), std::move(fn));
            }
        };
        for (const char* kind : {"weight", "bias"}) {
            const std::string k = kind;
            if (vd != hd)
                change("self_attn.v_proj." + k, 0, Hkv * hd,
                       [=](torch::Tensor t) { return pad_head_rows(t, Hkv, vd, hd); });
            if (f != F)
                for (const char* mlp : {"mlp.gate_proj.", "mlp.up_proj."})
                    change(mlp + k, 0, F, [=](torch::Tensor t) { return pad_head_rows(t, 1, f, F); });
            if (a == "llama") // Meta's interleaved RoPE rows
                for (const auto& [proj, heads] : {std::pair{"q_proj", H}, {"k_proj", Hkv}})
                    change("self_attn." + std::string(proj) + "." + k, -1, 0,
                           [heads = heads](torch::Tensor t) { return io::hf_rope_rows_to_meta(t, heads); });
        }
        if (vd != hd)
            change("self_attn.o_proj.weight", 1, H * hd,
                   [=](torch::Tensor t) { return pad_head_columns(t, H, vd, hd); });
        if (f != F)
            change("mlp.down_proj.weight", 1, F,
                   [=](torch::Tensor t) { return pad_head_columns(t, 1, f, F); });
        // Fused tensors: [q | k | v] rows (phi3, gptneox), phi3's [gate | up].
        auto fuse = [&](const std::vector<std::string>& parts, const std::string& into) {
            std::vector<LazyTensor> ts;
            std::vector<int64_t> shape;
            for (const auto& part : parts) {
                ts.push_back(w.at(p + part));
                w.erase(p + part);
                if (shape.empty())
                    shape = ts.back().shape;
                else
                    shape[0] += ts.back().shape[0];
            }
            w.emplace(p + into, LazyTensor{shape, [ts = std::move(ts)] {
                                               std::vector<torch::Tensor> parts;
                                               for (const auto& t : ts)
                                                   parts.push_back(t.make());
                                               return torch::cat(parts, 0);
                                           }});
        };
        if (a == "phi3" || a == "gptneox")
            for (const std::string k : {".weight", ".bias"})
                if (w.count(p + "self_attn.q_proj" + k))
                    fuse({"self_attn.q_proj" + k, "self_attn.k_proj" + k, "self_attn.v_proj" + k},
                         "self_attn.qkv_proj" + k);
        if (a == "phi3")
            fuse({"mlp.gate_proj.weight", "mlp.up_proj.weight"}, "mlp.gate_up_proj.weight");
    }
    for (auto& [name, t] : w) {
        const auto gguf = io::gguf_tensor_name(a, name);
        if (!gguf)
            throw InputError("cannot write GGUF: tensor '" + name + "' has no llama.cpp name for " + a);
        const bool matrix = t.shape.size() == 2;
        plan.tensors.push_back({*gguf, std::move(t), matrix});
    }
    if (!c.rope_freq_divisors.empty() && a == "llama") { // gemma3: rope.scaling.* (add_hparams)
        std::vector<float> f(c.rope_freq_divisors.begin(), c.rope_freq_divisors.end());
        plan.tensors.push_back({"rope_freqs.weight", held(torch::tensor(f, torch::kFloat32)), false});
    }
    if (padded)
        plan.notes.push_back("FLAT-LLM value heads zero-padded to the head size " + std::to_string(hd) +
                             " (llama.cpp needs value heads as wide as key heads; same outputs, no saving "
                             "in the attention)");
    if (narrowed_mlp)
        plan.notes.push_back(
            "FLAT-LLM MLP widths zero-padded to " + std::to_string(F) +
            " (llama.cpp sizes every layer's MLP alike; same outputs, no saving in the MLP)");
}

// gpt2: Conv1D weights [in, out] become llama.cpp's [out, in] rows.
void add_gpt2_tensors(GgufPlan& plan, const ModelConfig& c, const WeightMap& w)
{
    auto put = [&](const std::string& name, LazyTensor t) {
        const bool matrix = t.shape.size() == 2;
        plan.tensors.push_back({name, std::move(t), matrix});
    };
    auto put_held = [&](const std::string& name, const torch::Tensor& t) { put(name, held(t)); };
    put_held("output_norm.weight", w.at("ln_f.weight"));
    put_held("output_norm.bias", w.at("ln_f.bias"));
    if (!c.tied_embeddings)
        put_held("output.weight", w.at("lm_head.weight"));
    const int64_t d = c.hidden_size, H = c.num_heads, hd = c.head_dim();
    bool padded = false;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "h." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
        const int64_t vd = c.value_dim(l);
        padded = padded || vd != hd;
        put_held(b + "attn_norm.weight", w.at(p + "ln_1.weight"));
        put_held(b + "attn_norm.bias", w.at(p + "ln_1.bias"));
        const auto qkv = w.at(p + "attn.c_attn.weight"); // [d, 2d + H vd]
        const auto qkv_b = w.at(p + "attn.c_attn.bias");
        put(b + "attn_qkv.weight",
            {{2 * d + H * hd, d}, [=] {
                 const auto t = qkv.t();
                 return torch::cat({t.narrow(0, 0, 2 * d),
                                    pad_head_rows(t.narrow(0, 2 * d, H * vd).contiguous(), H, vd, hd)},
                                   0);
             }});
        put(b + "attn_qkv.bias",
            {{2 * d + H * hd}, [=] {
                 return torch::cat({qkv_b.narrow(0, 0, 2 * d),
                                    pad_head_rows(qkv_b.narrow(0, 2 * d, H * vd).contiguous(), H, vd, hd)},
                                   0);
             }});
        const auto o = w.at(p + "attn.c_proj.weight"); // [H vd, d]
        put(b + "attn_output.weight",
            {{d, H * hd}, [=] { return pad_head_columns(o.t().contiguous(), H, vd, hd).contiguous(); }});
        put_held(b + "attn_output.bias", w.at(p + "attn.c_proj.bias"));
        put_held(b + "ffn_norm.weight", w.at(p + "ln_2.weight"));
        put_held(b + "ffn_norm.bias", w.at(p + "ln_2.bias"));
        const int64_t f = c.mlp_width(l), F = c.intermediate_size;
        padded = padded || f != F;
        const auto up = w.at(p + "mlp.c_fc.weight"), up_b = w.at(p + "mlp.c_fc.bias"); // [d, f], [f]
        const auto down = w.at(p + "mlp.c_proj.weight");                               // [f, d]
        put(b + "ffn_up.weight", {{F, d}, [=] { return pad_head_rows(up.t().contiguous(), 1, f, F); }});
        put(b + "ffn_up.bias", {{F}, [=] { return pad_head_rows(up_b, 1, f, F); }});
        put(b + "ffn_down.weight",
            {{d, F}, [=] { return pad_head_columns(down.t().contiguous(), 1, f, F).contiguous(); }});
        put_held(b + "ffn_down.bias", w.at(p + "mlp.c_proj.bias"));
    }
    if (padded)
        plan.notes.push_back("FLAT-LLM value heads and MLP widths zero-padded to the original sizes (same "
                             "outputs; llama.cpp cannot hold narrower ones)");
}

// bert / distilbert: llama.cpp's names for the body (io::encoder_gguf_name, the GGUF
// reader's table); the heads are left out, as llama.cpp's converter leaves them.
void add_encoder_tensors(GgufPlan& plan, const ModelConfig& c, const WeightMap& weights)
{
    bool dropped = false;
    for (const auto& [name, t] : weights) {
        if (name == token_table_name(c.arch))
            continue;
        if (name.starts_with("cls.") || name.starts_with("pooler.")) {
            dropped = true;
            continue;
        }
        const auto gguf = io::encoder_gguf_name(name, /*to_gguf=*/true);
        if (!gguf)
            throw InputError("cannot write GGUF: tensor '" + name + "' has no llama.cpp name for bert");
        plan.tensors.push_back(
            {*gguf, held(t),
             t.dim() == 2 && *gguf != "position_embd.weight" && *gguf != "token_types.weight"});
    }
    if (c.normalize_embeddings)
        plan.notes.push_back("sentence-transformers' Normalize is not recorded in GGUF: normalise the pooled "
                             "embeddings yourself (llama.cpp's embedding tool does by default; embedlab-cli "
                             "embed --normalize)");
    if (dropped)
        plan.notes.push_back(
            std::string(c.encoder_head == EncoderHead::MaskedLM ? "masked-LM head" : "pooler") +
            " left out: llama.cpp's bert computes the body's hidden states and pooled "
            "embeddings (its converter leaves it out too)");
}

GgufPlan plan_gguf(const LoadedModel& lm)
{
    const auto& model = *lm.model;
    const auto& c = model.config();
    if (const std::string why = refusal(lm); !why.empty())
        throw InputError(lm.files.path.string() + ": cannot write GGUF: " + why);
    GgufPlan plan;
    plan.arch = gguf_arch(c);
    plan.metadata.set_string("general.architecture", plan.arch);
    plan.metadata.set_string("general.name", lm.files.path.filename().string());
    plan.metadata.set_string(io::kGgufWrittenByKey, "EmbedLab"); // --force replaces only our own exports
    add_hparams(plan, c);
    add_vocabulary(plan, lm);

    const auto& embedding = model.token_embedding();
    if (!dense_table(&embedding))
        plan.notes.push_back("token embedding (" + embedding.kind() +
                             ") reconstructed as a dense table: llama.cpp has no factorised embedding");
    plan.tensors.push_back({"token_embd.weight", lazy_dense_tokens(embedding), true});
    if (c.is_encoder()) {
        add_encoder_tensors(plan, c, model.weights());
    } else if (c.arch == Architecture::GPT2) {
        plan.tensors.push_back(
            {"position_embd.weight", lazy_dense_tokens(*model.position_embedding()), true});
        add_gpt2_tensors(plan, c, model.weights());
    } else {
        add_decoder_tensors(plan, c, model.weights());
    }
    return plan;
}

// --type's names and the GGUF tensor type each writes.
struct GgufExportRow {
    GgufExportType value;
    const char* name;
    io::GgufTensorType tensor;
};
constexpr GgufExportRow kGgufExportTypes[]{{GgufExportType::F32, "f32", io::GgufTensorType::F32},
                                           {GgufExportType::F16, "f16", io::GgufTensorType::F16},
                                           {GgufExportType::Q8_0, "q8_0", io::GgufTensorType::Q8_0}};

io::GgufTensorType tensor_type(GgufExportType t)
{
    return row_with_value(kGgufExportTypes, t)->tensor;
}

// "q4_0": a stored type's name as llama-quantize takes it.
std::string type_name(io::GgufTensorType t)
{
    std::string name = io::ggml_type_traits(static_cast<uint32_t>(t))->name;
    for (char& ch : name)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return name;
}

// --embedding-type / --output-type: f32 or a ggml block type whose blocks divide a row of
// d values (llama.cpp asserts otherwise), else InputError naming the types that fit.
io::GgufTensorType named_tensor_type(const std::string& name, int64_t d, const std::string& option)
{
    if (name == "f32" || name == "F32")
        return io::GgufTensorType::F32;
    const auto* t = find_quant_type(name);
    if (!t)
        throw InputError("export: " + option + " '" + name + "': a GGUF table is f32, " + quant_type_names());
    if (const std::string misfit = quant_type_misfit(*t, d, "f32, "); !misfit.empty())
        throw InputError("export: " + option + " " + misfit);
    return static_cast<io::GgufTensorType>(t->ggml_type);
}

} // namespace

GgufExportType gguf_export_type(const std::string& name)
{
    return value_named(kGgufExportTypes, name, "--type '" + name + "': GGUF exports are f32, f16 or q8_0");
}

std::string gguf_export_refusal(const LoadedModel& model)
{
    return refusal(model);
}

ModelExportReport export_gguf(const LoadedModel& lm, const fs::path& out, const GgufExportOptions& options,
                              const ProgressFn& progress)
{
    check_gguf_export_target(out, options.overwrite, {lm.files.path});
    const auto& config = lm.model->config();
    const int64_t d = config.embedding_dim(); // the table's rows; the head's are hidden_size wide
    // The token table's type: as asked, a quantised table's own, or --type's.
    std::optional<io::GgufTensorType> embedding_type, output_type;
    if (!options.embedding_type.empty())
        embedding_type = named_tensor_type(options.embedding_type, d, "--embedding-type");
    if (!options.output_type.empty()) {
        if (config.tied_embeddings)
            throw InputError(lm.files.path.string() +
                             ": --output-type: the output head is tied to the token table, which llama.cpp "
                             "reads for both; --embedding-type sets the type of both");
        output_type = named_tensor_type(options.output_type, config.hidden_size, "--output-type");
    }
    GgufPlan plan = plan_gguf(lm);
    if (const std::string own = lm.model->token_embedding().stored_row_type();
        !own.empty() && !embedding_type) {
        embedding_type = named_tensor_type(own, d, "the table's type");
        plan.notes.push_back("token table kept at its own type " + own +
                             " (its dequantised rows quantised again by ggml's reference quantizer)");
    }
    const auto type = tensor_type(options.type);
    std::vector<io::GgufTensorSource> tensors;
    int64_t fallbacks = 0;
    // Converted tensors alive at once (loaded, not yet released by the writer), and the most.
    struct Held {
        int64_t now = 0, most = 0;
    };
    const auto held_count = std::make_shared<Held>();
    ModelExportReport report;
    for (const auto& t : plan.tensors) {
        auto stored = t.matrix ? type : io::GgufTensorType::F32;
        if (t.name == "token_embd.weight" && embedding_type)
            stored = *embedding_type;
        else if (t.name == "output.weight" && output_type)
            stored = *output_type;
        else if (stored == io::GgufTensorType::Q8_0 &&
                 (t.data.shape.empty() || t.data.shape.back() % 32 != 0)) {
            stored = io::GgufTensorType::F16; // Q8_0 blocks are 32 wide, as llama-quantize falls back
            ++fallbacks;
        }
        // Each converted tensor (or block of rows) is counted while the writer holds it.
        auto hold = [name = t.name, held_count](torch::Tensor data, const std::vector<int64_t>& shape) {
            if (data.sizes().vec() != shape)
                throw std::logic_error("GGUF export: tensor '" + name +
                                       "' came out in another shape than planned");
            held_count->most = std::max(held_count->most, ++held_count->now);
            auto* keep = new torch::Tensor(std::move(data));
            return io::GgufTensorData{keep->data_ptr<float>(),
                                      std::shared_ptr<const void>(keep, [held_count](const void* p) {
                                          delete static_cast<const torch::Tensor*>(p);
                                          --held_count->now;
                                      })};
        };
        auto as_float = [](const auto& make, auto... args) {
            c10::InferenceMode guard;
            return make(args...).to(torch::kFloat32).contiguous();
        };
        const LazyTensor& lazy = t.data;
        io::GgufTensorSource source{t.name, lazy.shape, nullptr, stored};
        if (t.name == "token_embd.weight")
            report.embedding_type = type_name(stored);
        else if (t.name == "output.weight")
            report.output_type = type_name(stored);
        if (lazy.rows) {
            source.block_rows = 4096;
            source.load_rows = [&lazy, hold, as_float](int64_t begin, int64_t count) {
                auto shape = lazy.shape;
                shape.front() = count;
                return hold(as_float(lazy.rows, begin, count), shape);
            };
        } else {
            source.load = [&lazy, hold, as_float] { return hold(as_float(lazy.make), lazy.shape); };
        }
        tensors.push_back(std::move(source));
    }
    if (fallbacks)
        plan.notes.push_back(std::to_string(fallbacks) +
                             " tensors with rows not a multiple of 32 stored as F16");
    report.path = out;
    report.architecture = plan.arch;
    report.tensors = static_cast<int64_t>(tensors.size());
    report.bytes = io::write_gguf(out, plan.metadata, tensors, options.overwrite, progress);
    report.most_tensors_held = held_count->most;
    report.notes = std::move(plan.notes);
    return report;
}

void check_gguf_export_target(const fs::path& out, bool overwrite, const std::vector<fs::path>& inputs)
{
    check_output_file(out, overwrite, inputs, io::gguf_written_by_embedlab);
}

ModelExportReport export_hf_dense(const LoadedModel& lm, const fs::path& out, bool overwrite,
                                  const ProgressFn& progress)
{
    if (lm.files.format != ModelFormat::HuggingFace || !fs::is_directory(lm.files.path))
        throw InputError(lm.files.path.string() +
                         ": --format hf exports Hugging Face-sourced models (config.json "
                         "beside the weights); this is " +
                         model_format_name(lm.files.format));
    const auto& model = *lm.model;
    if (model.lora())
        throw InputError(lm.files.path.string() + ": the model has unmerged LoRA adapters; merge them first");
    WeightMap w = model.weights();
    const auto& c = model.config();
    w[io::embedding_name(c.arch)] = dense_tokens(model.token_embedding());
    if (c.arch == Architecture::GPT2)
        w["wpe.weight"] = dense_tokens(*model.position_embedding());
    if (!c.value_head_dims.empty() || !c.mlp_widths.empty())
        throw InputError(lm.files.path.string() +
                         ": a FLAT-LLM model is already a plain directory with narrowed shapes that "
                         "transformers cannot load; export it as GGUF instead");
    check_replaceable_directory(out, overwrite, "use --force to replace it", {lm.files.path});
    AtomicDirectory dir(out, overwrite);
    detail::copy_support_files(lm.files.path, dir.path());
    const auto tensors = io::native_hf_tensors(c, w);
    write_safetensors(dir.path() / "model.safetensors", tensors, {{"format", "pt"}}, progress);
    ModelExportReport report;
    report.path = out;
    report.architecture = c.type_name();
    report.tensors = static_cast<int64_t>(tensors.size());
    dir.commit();
    report.bytes = fs::file_size(out / "model.safetensors");
    if (!dense_table(&model.token_embedding()))
        report.notes.push_back("token embedding (" + model.token_embedding().kind() +
                               ") reconstructed densely");
    return report;
}

} // namespace embedlab
