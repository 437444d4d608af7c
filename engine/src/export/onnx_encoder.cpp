#include "export/onnx_encoder.hpp"

#include <cmath>
#include <limits>

#include "embedlab/encoder.hpp"
#include "export/onnx_layers.hpp"

namespace embedlab::onnx {

namespace {

using Dims = std::vector<std::variant<int64_t, std::string>>;

class EncoderWriter {
public:
    EncoderWriter(const LanguageModel& model, Graph& graph) : m_(model), c_(model.config()), g_(graph) {}

    DecoderGraph write(const ProgressFn& progress);

private:
    bool has(const std::string& name) const { return m_.weights().count(name) != 0; }
    std::string weight(const std::string& name) { return stored_weight(g_, m_.weights(), name); }
    std::string linear(const std::string& x, const std::string& name)
    {
        return gemm_linear(g_, m_.weights(), x, name);
    }
    std::string layer_norm(const std::string& x, const std::string& name)
    {
        return onnx::layer_norm(g_, m_.weights(), x, name, c_.norm_eps);
    }
    std::string activation(const std::string& x) { return mlp_activation(g_, x, c_.activation); }
    // x [N, d] -> [B, H, S, hd].
    std::string heads(const std::string& x)
    {
        return g_.transpose(
            g_.reshape_to(x, g_.concat({batch_seq_, g_.ints({c_.num_heads, c_.head_dim()})}, 0)),
            {0, 2, 1, 3});
    }
    // [N, width] <-> [B, S, width]
    std::string unflat(const std::string& x, int64_t width)
    {
        return g_.reshape_to(x, g_.concat({batch_seq_, g_.ints({width})}, 0));
    }
    std::string embeddings();
    std::string layer(int64_t l, const std::string& x, const std::string& score_bias);
    std::string pooled(const std::string& hidden3);

    const LanguageModel& m_;
    const ModelConfig& c_;
    Graph& g_;
    DecoderGraph io_;
    std::string batch_seq_, mask_;
};

// Token rows + position rows 0..S-1 + segment rows, then LayerNorm: [N, d].
std::string EncoderWriter::embeddings()
{
    const auto& e = m_.token_embedding();
    auto x = e.onnx_lookup(g_, g_.reshape("input_ids", std::vector<int64_t>{-1}));
    if (x.empty())
        throw InputError("the " + e.kind() + " token embedding has no ONNX lookup yet");
    const auto length = g_.gather(batch_seq_, g_.int_scalar(1));
    const auto positions = g_.op("Range", {g_.int_scalar(0), length, g_.int_scalar(1)}, {}, "positions");
    const auto pos = m_.position_embedding()->onnx_lookup(g_, positions); // [S, d]
    if (pos.empty())
        throw InputError("the " + m_.position_embedding()->kind() +
                         " position embedding has no ONNX lookup yet");
    x = g_.reshape(g_.add(unflat(x, c_.hidden_size), pos), {-1, c_.hidden_size});
    if (c_.type_vocab_size > 0)
        x = g_.add(x, g_.gather(weight("embeddings.token_type_embeddings.weight"),
                                g_.reshape("token_type_ids", std::vector<int64_t>{-1})));
    return layer_norm(x, "embeddings.LayerNorm");
}

std::string EncoderWriter::layer(int64_t l, const std::string& x, const std::string& score_bias)
{
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    const auto q = heads(linear(x, p + "attention.self.query"));
    const auto k = heads(linear(x, p + "attention.self.key"));
    const auto v = heads(linear(x, p + "attention.self.value"));
    const double scale = 1.0 / std::sqrt(static_cast<double>(c_.head_dim()));
    auto scores = g_.mul(g_.matmul(q, g_.transpose(k, {0, 1, 3, 2})), g_.scalar(static_cast<float>(scale)));
    scores = g_.add(scores, score_bias);
    const auto probs = g_.op("Softmax", {scores}, {{"axis", int64_t{-1}}});
    const auto y = g_.reshape(g_.transpose(g_.matmul(probs, v), {0, 2, 1, 3}), {-1, c_.hidden_size});
    const auto a =
        layer_norm(g_.add(linear(y, p + "attention.output.dense"), x), p + "attention.output.LayerNorm");
    const auto h = activation(linear(a, p + "intermediate.dense"));
    return layer_norm(g_.add(linear(h, p + "output.dense"), a), p + "output.LayerNorm");
}

// eval/embed.cpp's pool_hidden and Normalize over hidden [B, S, d].
std::string EncoderWriter::pooled(const std::string& hidden3)
{
    const Pooling pooling = default_pooling(c_);
    std::string out;
    const auto mask = g_.unsqueeze(g_.cast(mask_, kFloat), {2}); // [B, S, 1]
    if (pooling == Pooling::Cls) {
        out = g_.gather(hidden3, g_.int_scalar(0), 1);
    } else if (pooling == Pooling::Max) { // padding set to -1e9 first (sentence-transformers)
        const auto padded =
            g_.op("Where", {g_.op("Equal", {mask, g_.scalar(0.0f)}), g_.scalar(-1e9f), hidden3});
        out = g_.op("ReduceMax", {padded}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
    } else {
        const auto count = g_.op("Max", {g_.reduce_sum(mask, {1}, false), g_.scalar(1e-9f)});
        out = g_.div(g_.reduce_sum(g_.mul(hidden3, mask), {1}, false), count);
    }
    if (c_.normalize_embeddings) { // x / max(|x|, 1e-12)
        const auto norm = g_.op("Sqrt", {g_.reduce_sum(g_.mul(out, out), {-1}, true)});
        out = g_.div(out, g_.op("Max", {norm, g_.scalar(1e-12f)}));
    }
    return g_.op("Identity", {out}, {}, "sentence_embedding");
}

DecoderGraph EncoderWriter::write(const ProgressFn& progress)
{
    if (m_.lora())
        throw InputError("the model has unmerged LoRA adapters; merge them first to export it as ONNX");
    io_.inputs.push_back({"input_ids", kInt64, Dims{"batch", "sequence"}});
    io_.inputs.push_back({"attention_mask", kInt64, Dims{"batch", "sequence"}});
    if (c_.type_vocab_size > 0)
        io_.inputs.push_back({"token_type_ids", kInt64, Dims{"batch", "sequence"}});
    batch_seq_ = g_.op("Shape", {"input_ids"}, {}, "batch_seq");
    mask_ = "attention_mask";
    // Hugging Face's extended mask: (1 - mask) * finfo(float32).min, [B, 1, 1, S].
    const auto score_bias = g_.unsqueeze(g_.mul(g_.sub(g_.scalar(1.0f), g_.cast(mask_, kFloat)),
                                                g_.scalar(std::numeric_limits<float>::lowest())),
                                         {1, 2});
    auto x = embeddings();
    for (int64_t l = 0; l < c_.num_layers; ++l) {
        x = layer(l, x, score_bias);
        report_progress(progress, l + 1, c_.num_layers);
    }
    const auto hidden3 = g_.op("Identity", {unflat(x, c_.hidden_size)}, {}, "last_hidden_state");
    io_.outputs.push_back({hidden3, kFloat, Dims{"batch", "sequence", c_.hidden_size}});
    io_.outputs.push_back({pooled(hidden3), kFloat, Dims{"batch", c_.hidden_size}});
    if (c_.encoder_head == EncoderHead::Classification) {
        const auto first = g_.gather(hidden3, g_.int_scalar(0), 1); // [B, d], [CLS]
        const auto features = has("pre_classifier.weight") ? g_.op("Relu", {linear(first, "pre_classifier")})
                                                           : g_.op("Tanh", {linear(first, "pooler.dense")});
        const auto logits = g_.op("Identity", {linear(features, "classifier")}, {}, "logits");
        io_.outputs.push_back({logits, kFloat, Dims{"batch", static_cast<int64_t>(c_.labels.size())}});
    } else if (c_.encoder_head == EncoderHead::MaskedLM) {
        const auto t = layer_norm(activation(linear(x, "cls.predictions.transform.dense")),
                                  "cls.predictions.transform.LayerNorm");
        const auto rows = m_.token_embedding().onnx_project(g_, t);
        if (rows.empty())
            throw InputError("the " + m_.token_embedding().kind() + " token embedding has no ONNX head yet");
        const auto logits = g_.op(
            "Identity", {unflat(g_.add(rows, weight("cls.predictions.bias")), c_.vocab_size)}, {}, "logits");
        io_.outputs.push_back({logits, kFloat, Dims{"batch", "sequence", c_.vocab_size}});
    }
    return io_;
}

} // namespace

DecoderGraph write_encoder(const LanguageModel& model, Graph& graph, const ProgressFn& progress)
{
    return EncoderWriter(model, graph).write(progress);
}

} // namespace embedlab::onnx
