#include "export/onnx_decoder.hpp"

#include <cmath>
#include <limits>

#include "export/onnx_layers.hpp"

namespace embedlab::onnx {

namespace {

class DecoderWriter {
public:
    DecoderWriter(const LanguageModel& model, Graph& graph, bool with_past)
        : m_(model), c_(model.config()), g_(graph), with_past_(with_past)
    {
    }

    DecoderGraph write(const ProgressFn& progress);

private:
    const torch::Tensor& w(const std::string& name) const { return m_.weights().at(name); }
    bool has(const std::string& name) const { return m_.weights().count(name) != 0; }
    std::string weight(const std::string& name) { return stored_weight(g_, m_.weights(), name); }
    std::string linear(const std::string& x, const std::string& name)
    {
        return gemm_linear(g_, m_.weights(), x, name);
    }
    // GPT-2's Conv1D: x W + b with W [in, out].
    std::string conv1d(const std::string& x, const std::string& name)
    {
        return g_.op("Gemm", {x, weight(name + ".weight"), weight(name + ".bias")}, {}, name);
    }
    std::string norm(const std::string& x, const std::string& name);
    std::string activation(const std::string& x) { return mlp_activation(g_, x, c_.activation); }
    std::string softcap(const std::string& x, double cap)
    {
        const auto c = g_.scalar(static_cast<float>(cap));
        return g_.mul(g_.op("Tanh", {g_.div(x, c)}), c);
    }

    void inputs();
    // [1, 1, S, T] bool: true where query i may not read key j (future, or `window` or
    // more positions behind), or [B, 1, S, T] with the attention mask's zeros.
    std::string mask(int64_t window);
    // The rotary tables [B, 1, S, rd] (cos, sin) for base `theta`.
    std::pair<std::string, std::string> rope_tables(double theta, bool scaled);
    std::string rope(const std::string& t, const std::pair<std::string, std::string>& table);
    // x [N, width] -> [B, S, heads, dim] -> [B, heads, S, dim].
    std::string heads(const std::string& x, int64_t heads, int64_t dim)
    {
        return g_.transpose(g_.reshape_to(x, g_.concat({batch_seq_, g_.ints({heads, dim})}, 0)),
                            {0, 2, 1, 3});
    }
    // Attention of layer l: q [B, H, S, hd], k [B, Hkv, S, hd], v [B, Hkv, S, vd] ->
    // [N, H * vd]; appends the past keys and values, and the present outputs.
    std::string attention(int64_t l, std::string q, std::string k, std::string v, int64_t vd, double scale,
                          double cap, int64_t window);
    std::string gpt2_layers(std::string x, const ProgressFn& progress);
    std::string llama_layers(std::string x, const ProgressFn& progress);

    const LanguageModel& m_;
    const ModelConfig& c_;
    Graph& g_;
    bool with_past_;
    DecoderGraph io_;
    std::string ids_, flat_ids_, attention_mask_, position_ids_;
    std::string batch_seq_; // Shape(input_ids): [B, S]
    std::string masks_[2];  // global, local (sliding)
    std::pair<std::string, std::string> ropes_[2];
};

std::string DecoderWriter::norm(const std::string& x, const std::string& name)
{
    const double eps = c_.norm_eps;
    if (c_.norm == NormKind::LayerNorm)
        return layer_norm(g_, m_.weights(), x, name, eps);
    // RMS: x * rsqrt(mean(x^2) + eps) * w; Gemma's (1 + w) is folded into the stored weight.
    const auto mean = g_.op("ReduceMean", {g_.mul(x, x)}, {{"axes", std::vector<int64_t>{-1}}});
    const auto inv = g_.op("Reciprocal", {g_.op("Sqrt", {g_.add(mean, g_.scalar(static_cast<float>(eps)))})});
    const auto scale = c_.norm == NormKind::RMSOnePlus
                           ? g_.initializer(name + ".weight", (w(name + ".weight").to(torch::kFloat32) + 1.0))
                           : weight(name + ".weight");
    return g_.mul(g_.mul(x, inv), scale);
}

void DecoderWriter::inputs()
{
    using Dims = std::vector<std::variant<int64_t, std::string>>;
    io_.inputs.push_back({"input_ids", kInt64, Dims{"batch", "sequence"}});
    io_.inputs.push_back({"attention_mask", kInt64, Dims{"batch", "total_sequence"}});
    io_.inputs.push_back({"position_ids", kInt64, Dims{"batch", "sequence"}});
    ids_ = "input_ids";
    attention_mask_ = "attention_mask";
    position_ids_ = "position_ids";
    batch_seq_ = g_.op("Shape", {ids_}, {}, "batch_seq");
    flat_ids_ = g_.reshape(ids_, std::vector<int64_t>{-1});
}

std::string DecoderWriter::mask(int64_t window)
{
    auto& cached = masks_[window > 0 ? 1 : 0];
    if (!cached.empty())
        return cached;
    // Queries sit at the last S of the T positions the attention mask covers.
    const auto to_scalar = [&](const std::string& one) { return g_.squeeze(one, {0}); };
    const auto total =
        to_scalar(g_.op("Shape", {attention_mask_}, {{"start", int64_t{1}}, {"end", int64_t{2}}}));
    const auto seq = to_scalar(g_.op("Shape", {ids_}, {{"start", int64_t{1}}, {"end", int64_t{2}}}));
    const auto past = g_.sub(total, seq);
    const auto one = g_.int_scalar(1);
    const auto query = g_.unsqueeze(g_.op("Range", {past, total, one}), {1});           // [S, 1]
    const auto key = g_.unsqueeze(g_.op("Range", {g_.int_scalar(0), total, one}), {0}); // [1, T]
    auto blocked = g_.op("Greater", {key, query});
    if (window > 0)
        blocked = g_.op("Or", {blocked, g_.op("LessOrEqual", {key, g_.sub(query, g_.int_scalar(window))})});
    const auto padding =
        g_.unsqueeze(g_.op("Equal", {attention_mask_, g_.int_scalar(0)}), {1, 2}); // [B,1,1,T]
    cached = g_.op("Or", {g_.unsqueeze(blocked, {0, 1}), padding}, {}, window > 0 ? "local_mask" : "mask");
    return cached;
}

std::pair<std::string, std::string> DecoderWriter::rope_tables(double theta, bool scaled)
{
    const int64_t rd = c_.rotary_dims();
    // As language_model.cpp builds them: float32 inv_freq, rope_scaling's divisors.
    auto inv_freq = 1.0 / torch::pow(theta, torch::arange(0, rd, 2, torch::kLong).to(torch::kFloat32) / rd);
    inv_freq = inv_freq.to(torch::kFloat32);
    if (scaled && !c_.rope_freq_divisors.empty())
        inv_freq = inv_freq / torch::tensor(c_.rope_freq_divisors, torch::kFloat64).to(torch::kFloat32);
    const auto positions = g_.unsqueeze(g_.cast(position_ids_, kFloat), {2});        // [B, S, 1]
    const auto freqs = g_.mul(positions, g_.initializer("rope.inv_freq", inv_freq)); // [B, S, rd/2]
    const auto angles = g_.unsqueeze(g_.concat({freqs, freqs}, -1), {1});            // [B, 1, S, rd]
    return {g_.op("Cos", {angles}, {}, "rope.cos"), g_.op("Sin", {angles}, {}, "rope.sin")};
}

std::string DecoderWriter::rope(const std::string& t, const std::pair<std::string, std::string>& table)
{
    const int64_t rd = c_.rotary_dims(), hd = c_.head_dim(), half = rd / 2;
    if (rd == 0)
        return t;
    const auto r = rd == hd ? t : g_.slice(t, {0}, {rd}, {-1});
    const auto rotated =
        g_.concat({g_.op("Neg", {g_.slice(r, {half}, {rd}, {-1})}), g_.slice(r, {0}, {half}, {-1})}, -1);
    const auto out = g_.add(g_.mul(r, table.first), g_.mul(rotated, table.second));
    return rd == hd ? out : g_.concat({out, g_.slice(t, {rd}, {hd}, {-1})}, -1);
}

std::string DecoderWriter::attention(int64_t l, std::string q, std::string k, std::string v, int64_t vd,
                                     double scale, double cap, int64_t window)
{
    const int64_t H = c_.num_heads, Hkv = c_.arch == Architecture::GPT2 ? H : c_.num_kv_heads,
                  hd = c_.head_dim();
    const int64_t rep = H / Hkv;
    if (with_past_) {
        using Dims = std::vector<std::variant<int64_t, std::string>>;
        const std::string p = "past_key_values." + std::to_string(l), o = "present." + std::to_string(l);
        io_.inputs.push_back({p + ".key", kFloat, Dims{"batch", Hkv, "past_sequence", hd}});
        io_.inputs.push_back({p + ".value", kFloat, Dims{"batch", Hkv, "past_sequence", vd}});
        k = g_.op("Concat", {p + ".key", k}, {{"axis", int64_t{2}}}, o + ".key");
        v = g_.op("Concat", {p + ".value", v}, {{"axis", int64_t{2}}}, o + ".value");
        io_.outputs.push_back({k, kFloat, Dims{"batch", Hkv, "total_sequence", hd}});
        io_.outputs.push_back({v, kFloat, Dims{"batch", Hkv, "total_sequence", vd}});
    }
    // Grouped queries: KV head j serves query heads j*rep .. j*rep + rep - 1, read as one
    // [rep * S] block (as language_model.cpp does), so k and v are never repeated.
    if (rep > 1)
        q = g_.reshape(q, std::vector<int64_t>{0, Hkv, -1, hd});
    auto scores = g_.mul(g_.matmul(q, g_.transpose(k, {0, 1, 3, 2})), g_.scalar(static_cast<float>(scale)));
    if (rep > 1)
        scores = g_.reshape(scores, std::vector<int64_t>{0, H, -1, 0});
    if (cap > 0)
        scores = softcap(scores, cap);
    scores = g_.op("Where", {mask(window), g_.scalar(std::numeric_limits<float>::lowest()), scores});
    auto probs = g_.op("Softmax", {scores}, {{"axis", int64_t{-1}}});
    if (rep > 1)
        probs = g_.reshape(probs, std::vector<int64_t>{0, Hkv, -1, 0});
    auto y = g_.matmul(probs, v); // [B, Hkv, rep * S, vd]
    if (rep > 1)
        y = g_.reshape(y, std::vector<int64_t>{0, H, -1, vd});
    return g_.reshape(g_.transpose(y, {0, 2, 1, 3}), std::vector<int64_t>{-1, H * vd});
}

std::string DecoderWriter::gpt2_layers(std::string x, const ProgressFn& progress)
{
    const int64_t d = c_.hidden_size, H = c_.num_heads, hd = c_.head_dim();
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int64_t l = 0; l < c_.num_layers; ++l) {
        const std::string p = "h." + std::to_string(l) + ".";
        const int64_t vd = c_.value_dim(l);
        const auto a = layer_norm(g_, m_.weights(), x, p + "ln_1", c_.norm_eps);
        const auto qkv = conv1d(a, p + "attn.c_attn"); // columns: q, k, then v (H x vd)
        const auto q = heads(g_.slice(qkv, {0}, {d}, {1}), H, hd);
        const auto k = heads(g_.slice(qkv, {d}, {2 * d}, {1}), H, hd);
        const auto v = heads(g_.slice(qkv, {2 * d}, {2 * d + H * vd}, {1}), H, vd);
        const auto y = attention(l, q, k, v, vd, scale, 0.0, 0);
        x = g_.add(x, conv1d(y, p + "attn.c_proj"));
        const auto m = layer_norm(g_, m_.weights(), x, p + "ln_2", c_.norm_eps);
        x = g_.add(x, conv1d(activation(conv1d(m, p + "mlp.c_fc")), p + "mlp.c_proj"));
        report_progress(progress, l + 1, c_.num_layers);
    }
    return layer_norm(g_, m_.weights(), x, "ln_f", c_.norm_eps);
}

std::string DecoderWriter::llama_layers(std::string x, const ProgressFn& progress)
{
    const auto& c = c_;
    const int64_t H = c.num_heads, Hkv = c.num_kv_heads, hd = c.head_dim();
    const double scale = c.query_scale > 0 ? c.query_scale : 1.0 / std::sqrt(static_cast<double>(hd));
    if (c.rotary_dims() > 0) {
        ropes_[0] = rope_tables(c.rope_theta, true);
        ropes_[1] = c.rope_local_theta > 0 ? rope_tables(c.rope_local_theta, false) : ropes_[0];
    }
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const int64_t vd = c.value_dim(l);
        const bool slides = c.layer_slides(l);
        const auto a = c.post_norm ? x : norm(x, p + "input_layernorm");
        auto q = linear(a, p + "self_attn.q_proj");
        auto k = linear(a, p + "self_attn.k_proj");
        const auto v = heads(linear(a, p + "self_attn.v_proj"), Hkv, vd);
        if (c.qk_norm) { // per head, over hd
            q = g_.reshape(norm(g_.reshape(q, std::vector<int64_t>{-1, hd}), p + "self_attn.q_norm"),
                           std::vector<int64_t>{-1, H * hd});
            k = g_.reshape(norm(g_.reshape(k, std::vector<int64_t>{-1, hd}), p + "self_attn.k_norm"),
                           std::vector<int64_t>{-1, Hkv * hd});
        }
        const auto& table = ropes_[slides ? 1 : 0];
        const auto qh = rope(heads(q, H, hd), table), kh = rope(heads(k, Hkv, hd), table);
        const auto y = attention(l, qh, kh, v, vd, scale, c.attn_softcap, slides ? c.sliding_window : 0);
        auto attn_out = linear(y, p + "self_attn.o_proj");
        if (c.sandwich_norms)
            attn_out = norm(attn_out, p + "post_attention_layernorm");
        auto mlp_in = c.parallel_residual ? x : g_.add(x, attn_out);
        if (c.post_norm)
            mlp_in = norm(mlp_in, p + "input_layernorm");
        const auto mn = c.post_norm ? mlp_in
                                    : norm(mlp_in, p + (c.sandwich_norms ? "pre_feedforward_layernorm"
                                                                         : "post_attention_layernorm"));
        const auto act =
            c.gated_mlp ? g_.mul(activation(linear(mn, p + "mlp.gate_proj")), linear(mn, p + "mlp.up_proj"))
                        : activation(linear(mn, p + "mlp.up_proj"));
        auto mlp_out = linear(act, p + "mlp.down_proj");
        if (c.sandwich_norms)
            mlp_out = norm(mlp_out, p + "post_feedforward_layernorm");
        x = g_.add(mlp_in, mlp_out);
        if (c.parallel_residual)
            x = g_.add(x, attn_out);
        if (c.post_norm)
            x = norm(x, p + "post_attention_layernorm");
        report_progress(progress, l + 1, c.num_layers);
    }
    if (c.final_norm)
        x = norm(x, "model.norm");
    if (c.projects_embedding())
        x = g_.op("Gemm", {x, weight("model.project_out.weight")}, {{"transB", int64_t{1}}});
    return x;
}

DecoderGraph DecoderWriter::write(const ProgressFn& progress)
{
    if (m_.lora())
        throw InputError("the model has unmerged LoRA adapters on its linear layers; merge them first "
                         "(finetune --merge) to export it as ONNX");
    inputs();
    const auto& e = m_.token_embedding();
    auto x = e.onnx_lookup(g_, flat_ids_); // [N, d]
    if (x.empty())
        throw InputError("the " + e.kind() + " token embedding has no ONNX lookup yet; export it as GGUF");
    if (c_.arch == Architecture::GPT2) {
        const auto pos =
            m_.position_embedding()->onnx_lookup(g_, g_.reshape(position_ids_, std::vector<int64_t>{-1}));
        if (pos.empty())
            throw InputError("the " + m_.position_embedding()->kind() +
                             " position embedding has no ONNX lookup yet; export it as GGUF");
        x = gpt2_layers(g_.add(x, pos), progress);
    } else {
        if (c_.embedding_scale != 1.0)
            x = g_.mul(x, g_.scalar(static_cast<float>(c_.embedding_scale)));
        if (c_.projects_embedding())
            x = g_.op("Gemm", {x, weight("model.project_in.weight")}, {{"transB", int64_t{1}}});
        if (c_.learned_positions) {
            const auto at = g_.add(g_.reshape(position_ids_, std::vector<int64_t>{-1}),
                                   g_.int_scalar(c_.position_offset));
            x = g_.add(x, g_.gather(weight("model.embed_positions.weight"), at));
        }
        x = llama_layers(x, progress);
    }
    auto logits = c_.tied_embeddings ? e.onnx_project(g_, x)
                                     : g_.op("Gemm", {x, weight("lm_head.weight")}, {{"transB", int64_t{1}}});
    if (logits.empty())
        throw InputError("the " + e.kind() + " token embedding has no ONNX head yet; export it as GGUF");
    if (c_.final_softcap > 0)
        logits = softcap(logits, c_.final_softcap);
    const auto shape = g_.concat({batch_seq_, g_.ints({c_.vocab_size})}, 0);
    const auto out = g_.op("Reshape", {logits, shape}, {}, "logits");
    using Dims = std::vector<std::variant<int64_t, std::string>>;
    io_.outputs.insert(io_.outputs.begin(),
                       GraphValue{out, kFloat, Dims{"batch", "sequence", c_.vocab_size}});
    return io_;
}

} // namespace

DecoderGraph write_decoder(const LanguageModel& model, Graph& graph, bool with_past,
                           const ProgressFn& progress)
{
    return DecoderWriter(model, graph, with_past).write(progress);
}

} // namespace embedlab::onnx
