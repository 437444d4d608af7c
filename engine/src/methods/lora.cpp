#include "embedlab/lora.hpp"

#include <cmath>

#include "embedlab/low_rank.hpp"
#include "model/manifest_layout.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

const TokenEmbedding& base_of(const TokenEmbedding& e)
{
    const auto* base = e.lora_base();
    return base ? *base : e;
}

// The factors of `base` plus the scaled embedding adapters (Z + dZ, P + dP); empty
// when `base` has no low-rank factors.
std::optional<LowRankFactors> adapted_factors(const TokenEmbedding& base, const LoraAdapters& adapters)
{
    auto f = base.low_rank_factors();
    if (!f)
        return std::nullopt;
    const double s = adapters.scale();
    // Z + dZ is [V, k]: cheaper to form once than to push every hidden state through B.
    if (const auto it = adapters.adapters.find("embedding.Z"); it != adapters.adapters.end())
        f->Z = f->Z + it->second.delta() * s;
    if (const auto it = adapters.adapters.find("embedding.P"); it != adapters.adapters.end())
        f->P = f->P + it->second.delta() * s;
    return f;
}

std::string shape_text(c10::IntArrayRef s)
{
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) {
        if (i)
            out += ", ";
        out += std::to_string(s[i]);
    }
    return out + "]";
}

int64_t capped_rank(int64_t rank, const LoraTarget& t)
{
    return std::min({rank, t.out, t.in});
}

} // namespace

int64_t LoraAdapters::parameter_count() const
{
    int64_t n = 0;
    for (const auto& [name, a] : adapters)
        n += a.A.numel() + a.B.numel();
    return n;
}

std::vector<torch::Tensor> LoraAdapters::trainable() const
{
    std::vector<torch::Tensor> out;
    for (const auto& [name, a] : adapters) {
        out.push_back(a.A);
        out.push_back(a.B);
    }
    return out;
}

std::vector<std::pair<std::string, torch::Tensor>> LoraAdapters::tensors() const
{
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& [name, a] : adapters) {
        out.emplace_back("lora." + name + ".A", a.A.detach());
        out.emplace_back("lora." + name + ".B", a.B.detach());
    }
    return out;
}

Json LoraAdapters::json() const
{
    Json shapes = Json::object();
    for (const auto& [name, a] : adapters)
        shapes[name] = {{"A", a.A.sizes().vec()}, {"B", a.B.sizes().vec()}};
    return {{"rank", rank},
            {"alpha", alpha},
            {"scale", scale()},
            {"parameters", parameter_count()},
            {"adapters", shapes}};
}

std::vector<LoraTarget> lora_targets(const LanguageModel& model)
{
    const auto& c = model.config();
    if (c.is_encoder())
        throw InputError("LoRA adapters on an encoder's layers are not implemented (" + c.type_name() + ")");
    const int64_t d = c.hidden_size;
    std::vector<LoraTarget> t;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const int64_t fi = c.mlp_width(l);
        if (c.arch == Architecture::GPT2) {
            const std::string p = "h." + std::to_string(l) + ".";
            const int64_t vd = c.num_heads * c.value_dim(l);
            t.push_back({p + "attn.q", "q", d, d});
            t.push_back({p + "attn.k", "k", d, d});
            t.push_back({p + "attn.v", "v", vd, d});
            t.push_back({p + "attn.c_proj", "o", d, vd});
            t.push_back({p + "mlp.c_fc", "mlp", fi, d});
            t.push_back({p + "mlp.c_proj", "mlp", d, fi});
        } else {
            const std::string p = "model.layers." + std::to_string(l) + ".";
            const int64_t hd = c.head_dim(), vd = c.value_dim(l);
            t.push_back({p + "self_attn.q_proj", "q", c.num_heads * hd, d});
            t.push_back({p + "self_attn.k_proj", "k", c.num_kv_heads * hd, d});
            t.push_back({p + "self_attn.v_proj", "v", c.num_kv_heads * vd, d});
            t.push_back({p + "self_attn.o_proj", "o", d, c.num_heads * vd});
            if (c.gated_mlp)
                t.push_back({p + "mlp.gate_proj", "mlp", fi, d});
            t.push_back({p + "mlp.up_proj", "mlp", fi, d});
            t.push_back({p + "mlp.down_proj", "mlp", d, fi});
        }
    }
    const auto& e = base_of(model.token_embedding());
    if (const auto f = e.low_rank_factors()) {
        t.push_back({"embedding.Z", "embedding", f->Z.size(0), f->Z.size(1)});
        t.push_back({"embedding.P", "embedding", f->P.size(0), f->P.size(1)});
    } else if (!dense_table(&e)) {
        t.push_back({"embedding.E", "embedding", e.vocab_size(), e.dim()});
    }
    return t;
}

std::shared_ptr<LoraAdapters> make_lora_adapters(const LanguageModel& model, const LoraOptions& o)
{
    if (o.rank < 1)
        throw InputError("lora: the rank must be at least 1, got " + std::to_string(o.rank));
    if (!(o.alpha > 0) || !std::isfinite(o.alpha))
        throw InputError("lora: alpha must be a positive number, got " + std::to_string(o.alpha));
    static const std::set<std::string> known{"q", "k", "v", "o", "mlp", "embedding"};
    for (const auto& t : o.targets)
        if (!known.count(t))
            throw InputError("lora: unknown target '" + t + "' (q, k, v, o, mlp, embedding)");
    if (model.lora())
        throw InputError("lora: the model already has adapters; merge them first");
    const auto targets = lora_targets(model);
    if (o.targets.count("embedding") && dense_table(&base_of(model.token_embedding())))
        throw InputError("lora: the token embedding is dense; embedding adapters need a compressed table");

    c10::InferenceMode no_inference(false);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
    auto adapters = std::make_shared<LoraAdapters>();
    adapters->rank = o.rank;
    adapters->alpha = o.alpha;
    for (const auto& t : targets) {
        if (!o.targets.count(t.kind))
            continue;
        const int64_t r = capped_rank(o.rank, t);
        const double bound = 1.0 / std::sqrt(static_cast<double>(t.in));
        LoraAdapter a;
        a.A = torch::empty({r, t.in}, torch::kFloat32);
        a.A.uniform_(-bound, bound, gen);
        a.A.requires_grad_(true);
        a.B = torch::zeros({t.out, r}, torch::kFloat32).requires_grad_(true);
        adapters->adapters.emplace(t.name, std::move(a));
    }
    return adapters;
}

void attach_lora(LanguageModel& model, std::shared_ptr<const LoraAdapters> adapters)
{
    if (model.lora())
        throw InputError("lora: the model already has adapters attached");
    std::map<std::string, LoraTarget> by_name;
    for (const auto& t : lora_targets(model))
        by_name.emplace(t.name, t);
    bool embedding = false;
    for (const auto& [name, a] : adapters->adapters) {
        const auto it = by_name.find(name);
        if (it == by_name.end())
            throw InputError("lora: adapter '" + name + "' matches no weight of this model");
        const auto& t = it->second;
        if (a.A.dim() != 2 || a.B.dim() != 2 || a.A.size(1) != t.in || a.B.size(0) != t.out ||
            a.A.size(0) != a.B.size(1) || a.A.size(0) < 1)
            throw InputError("lora: adapter '" + name + "' has A " + shape_text(a.A.sizes()) + " and B " +
                             shape_text(a.B.sizes()) + ", which do not make a correction of [" +
                             std::to_string(t.out) + ", " + std::to_string(t.in) + "]");
        embedding = embedding || t.kind == "embedding";
    }
    if (embedding)
        model.set_token_embedding(
            std::make_shared<LoraTokenEmbedding>(model.shared_token_embedding(), adapters));
    model.set_lora(std::move(adapters));
}

void merge_lora(LanguageModel& model)
{
    const LoraAdapters* lora = model.lora();
    if (!lora)
        return;
    // attach_lora wrapped the table with these same adapters when any is an embedding's.
    const auto* base = model.token_embedding().lora_base();
    std::shared_ptr<const TokenEmbedding> embedding = base ? low_rank_with_adapters(*base, *lora) : nullptr;
    c10::InferenceMode no_inference(false);
    torch::NoGradGuard no_grad;
    const double s = lora->scale();
    const bool gpt2 = model.config().arch == Architecture::GPT2;
    const int64_t d = model.config().hidden_size;
    std::map<std::string, torch::Tensor> updated; // weight name -> merged copy
    auto weight = [&](const std::string& name) -> torch::Tensor& {
        auto it = updated.find(name);
        if (it == updated.end())
            it = updated.emplace(name, model.weights().at(name).clone()).first;
        return it->second;
    };
    for (const auto& [name, a] : lora->adapters) {
        if (name.rfind("embedding.", 0) == 0)
            continue;
        const auto delta = a.delta().detach() * s; // [out, in]
        if (!gpt2) {
            weight(name + ".weight").add_(delta);
            continue;
        }
        // Conv1D [in, out]; q, k, v are column blocks of the fused c_attn.
        const auto dot = name.rfind('.');
        const std::string block = name.substr(dot + 1), layer = name.substr(0, dot + 1);
        if (block == "q" || block == "k" || block == "v") {
            const int64_t offset = block == "q" ? 0 : block == "k" ? d : 2 * d;
            weight(layer + "c_attn.weight").narrow(1, offset, delta.size(0)).add_(delta.t());
        } else {
            weight(name + ".weight").add_(delta.t());
        }
    }
    for (auto& [name, t] : updated)
        model.set_weight(name, t.contiguous());
    if (embedding)
        model.set_token_embedding(embedding);
    model.set_lora(nullptr);
}

LoraTokenEmbedding::LoraTokenEmbedding(std::shared_ptr<const TokenEmbedding> base,
                                       std::shared_ptr<const LoraAdapters> adapters)
    : base_(std::move(base)), adapters_(std::move(adapters))
{
}

std::shared_ptr<const TokenEmbedding> LoraTokenEmbedding::effective_low_rank() const
{
    const auto f = adapted_factors(*base_, *adapters_);
    return f ? base_->with_low_rank_factors(*f) : nullptr;
}

torch::Tensor LoraTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    if (const auto e = effective_low_rank())
        return e->lookup(ids);
    auto rows = base_->lookup(ids);
    if (const auto it = adapters_->adapters.find("embedding.E"); it != adapters_->adapters.end())
        rows = rows + torch::matmul(torch::embedding(it->second.B, ids), it->second.A) * adapters_->scale();
    return rows;
}

torch::Tensor LoraTokenEmbedding::project(const torch::Tensor& hidden) const
{
    if (const auto e = effective_low_rank())
        return e->project(hidden);
    auto logits = base_->project(hidden);
    if (const auto it = adapters_->adapters.find("embedding.E"); it != adapters_->adapters.end())
        logits = logits + torch::matmul(torch::matmul(hidden, it->second.A.t()), it->second.B.t()) *
                              adapters_->scale();
    return logits;
}

std::shared_ptr<const TokenEmbedding> LoraTokenEmbedding::merged() const
{
    return low_rank_with_adapters(*base_, *adapters_);
}

std::shared_ptr<const TokenEmbedding> low_rank_with_adapters(const TokenEmbedding& base,
                                                             const LoraAdapters& adapters)
{
    auto f = adapted_factors(base, adapters);
    if (!f)
        throw InputError("lora: merging embedding adapters needs a pca, svd or lrf table, not " +
                         base.kind() + " (save without --merge)");
    c10::InferenceMode no_inference(false);
    torch::NoGradGuard no_grad;
    f->mu = f->mu.detach().clone();
    f->Z = f->Z.detach().clone();
    f->P = f->P.detach().clone();
    return base.with_low_rank_factors(*f);
}

std::shared_ptr<const TokenEmbedding> random_low_rank_embedding(int64_t vocab, int64_t dim, int64_t rank,
                                                                uint64_t seed)
{
    if (rank < 1 || rank > dim)
        throw InputError("lrf: rank must be between 1 and d = " + std::to_string(dim) + ", got " +
                         std::to_string(rank));
    c10::InferenceMode no_inference(false);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    LowRankFit fit;
    fit.kind = LowRankKind::LRF;
    fit.rank = rank;
    fit.mu = torch::zeros({dim}, torch::kFloat32);
    fit.Z = torch::empty({vocab, rank}, torch::kFloat32);
    fit.Z.normal_(0.0, 1.0, gen);
    fit.P = torch::empty({rank, dim}, torch::kFloat32);
    fit.P.normal_(0.0, 0.02 / std::sqrt(static_cast<double>(rank)), gen);
    fit.Z.requires_grad_(true);
    fit.P.requires_grad_(true);
    return std::make_shared<LowRankTokenEmbedding>(fit);
}

std::shared_ptr<LoraAdapters> lora_from_tensors(const LanguageModel& model, const WeightMap& tensors,
                                                int64_t rank, double alpha, const std::string& label)
{
    if (rank < 1 || !(alpha > 0))
        throw InputError(label + ": lora rank " + std::to_string(rank) + " / alpha " + std::to_string(alpha) +
                         " must be positive");
    auto adapters = std::make_shared<LoraAdapters>();
    adapters->rank = rank;
    adapters->alpha = alpha;
    size_t used = 0;
    for (const auto& t : lora_targets(model)) {
        const auto a = tensors.find("lora." + t.name + ".A"), b = tensors.find("lora." + t.name + ".B");
        if (a == tensors.end() && b == tensors.end())
            continue;
        if (a == tensors.end() || b == tensors.end())
            throw InputError(label + ": adapter '" + t.name + "' needs both lora." + t.name + ".A and .B");
        const int64_t r = capped_rank(rank, t);
        const std::vector<int64_t> want_a{r, t.in}, want_b{t.out, r};
        if (a->second.sizes().vec() != want_a || b->second.sizes().vec() != want_b)
            throw InputError(label + ": adapter '" + t.name + "' has A " + shape_text(a->second.sizes()) +
                             " and B " + shape_text(b->second.sizes()) + ", expected " + shape_text(want_a) +
                             " and " + shape_text(want_b));
        for (const auto& x : {a->second, b->second})
            if (!torch::isfinite(x).all().item<bool>())
                throw InputError(label + ": adapter '" + t.name + "' has NaN or Inf values");
        adapters->adapters.emplace(t.name, LoraAdapter{a->second, b->second});
        used += 2;
    }
    if (used != tensors.size())
        for (const auto& [name, x] : tensors)
            if (name.size() < 7 || !adapters->adapters.count(name.substr(5, name.size() - 7)))
                throw InputError(label + ": tensor '" + name + "' matches no adapter target of this model");
    return adapters;
}

void attach_lora_from_directory(LanguageModel& model, const std::string& manifest_text,
                                const std::filesystem::path& dir)
{
    const auto m = nlohmann::json::parse(manifest_text, nullptr, /*allow_exceptions=*/false);
    if (!m.is_object() || !m.contains("lora"))
        return;
    const std::string where = (dir / "embedlab.json").string();
    try {
        const auto& block = m["lora"];
        if (block.value("merged", false))
            return; // folded into the weights on export
        const std::string file = block.at("file").get<std::string>();
        if (file.empty() || file.find('/') != std::string::npos)
            throw InputError(where + ": lora.file '" + file + "' is not a file in the directory");
        if (!std::filesystem::exists(dir / file))
            throw InputError(where + ": lists adapters in '" + file + "' but the file is missing");
        const auto tensors = load_safetensors(dir / file);
        attach_lora(model, lora_from_tensors(model, tensors,
                                             detail::json_integer(block.at("rank"), "lora.rank", where),
                                             block.at("alpha").get<double>(), (dir / file).string()));
    } catch (const nlohmann::json::exception& e) {
        throw InputError(where + ": the 'lora' block has a missing or mistyped field (" + e.what() + ")");
    }
}

} // namespace embedlab
