#include "embedlab/compressed_model.hpp"

#include <chrono>
#include <set>

#include "embedlab/file_output.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/tensor_train.hpp"
#include "model/manifest_support.hpp"

namespace embedlab {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr int kFormatVersion = detail::kManifestFormatVersion;
using detail::copy_support_files;
using detail::source_json;
using detail::utc_now;

std::string table_name(Architecture arch)
{
    return arch == Architecture::GPT2 ? "wte.weight" : "model.embed_tokens.weight";
}

std::string factor_prefix(Architecture arch)
{
    const std::string t = table_name(arch);
    return t.substr(0, t.size() - std::string("weight").size());
}

std::string shape_text(c10::IntArrayRef s)
{
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i)
        out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// Every row of the embedding, block by block: only for the dense export.
torch::Tensor reconstruct_table(const TokenEmbedding& e)
{
    std::vector<torch::Tensor> blocks;
    for (int64_t v0 = 0; v0 < e.vocab_size(); v0 += 8192) {
        const int64_t n = std::min<int64_t>(8192, e.vocab_size() - v0);
        blocks.push_back(e.lookup(torch::arange(v0, v0 + n, torch::kLong)));
    }
    return torch::cat(blocks, 0);
}

using Tensors = std::vector<std::pair<std::string, torch::Tensor>>;

Tensors weights_except(const LanguageModel& m, const std::set<std::string>& skip)
{
    Tensors out;
    for (const auto& [name, t] : m.weights())
        if (!skip.count(name))
            out.emplace_back(name, t);
    return out;
}

// The manifest entries describing one compressed table.
Json table_json(const CompressedEmbedding& c, const std::string& table, const Json& factor_shapes)
{
    Json j = {{"method", c.spec.method},
              {"parameters", spec_json(c.spec)},
              {"embedding_tensor", table},
              {"factor_tensors", factor_shapes},
              {"accounting", accounting_json(c.accounting)},
              {"reconstruction", reconstruction_json(c.reconstruction)},
              {"fit", c.fit}};
    j["fit"]["seconds"] = c.fit_seconds;
    return j;
}

} // namespace

std::vector<std::pair<std::string, torch::Tensor>> embedding_factor_tensors(const TokenEmbedding& embedding,
                                                                            const std::string& prefix)
{
    Tensors out;
    if (const auto* lr = dynamic_cast<const LowRankTokenEmbedding*>(&embedding)) {
        const std::string p = prefix + lr->kind() + ".";
        if (lr->low_rank_kind() == LowRankKind::PCA)
            out.emplace_back(p + "mu", lr->mu());
        out.emplace_back(p + "Z", lr->Z());
        out.emplace_back(p + "P", lr->P());
    } else if (const auto* tt = dynamic_cast<const TensorTrainTokenEmbedding*>(&embedding)) {
        const auto cores = tt->cores();
        for (size_t k = 0; k < cores.size(); ++k)
            out.emplace_back(prefix + "tt.core" + std::to_string(k), cores[k]);
    } else if (const auto* ps = dynamic_cast<const PartialSparseTokenEmbedding*>(&embedding)) {
        const auto& f = ps->fit();
        const std::string p = prefix + ps->kind() + ".";
        out.emplace_back(p + "common_ids", f.common_ids);
        out.emplace_back(p + "rare_ids", f.rare_ids);
        out.emplace_back(p + "common_rows", f.common_rows);
        if (f.kind == PartialSparseKind::LLE) {
            out.emplace_back(p + "neighbour_ids", f.neighbour_ids);
            out.emplace_back(p + "weights", f.weights);
            out.emplace_back(p + "norms", f.norms);
        } else if (f.kind == PartialSparseKind::Unk) {
            out.emplace_back(p + "fallback", f.fallback);
        } else {
            out.emplace_back(p + "mean", f.mean);
            out.emplace_back(p + "basis", f.basis);
            out.emplace_back(p + "coords", f.coords);
        }
    } else if (const auto* fe = dynamic_cast<const FourierTokenEmbedding*>(&embedding)) {
        const auto& f = fe->params();
        const std::string p = prefix + "fourier.";
        out.emplace_back(p + "w_in", f.w_in);
        out.emplace_back(p + "b_in", f.b_in);
        if (f.mlp == FourierMlp::GeGLU) {
            out.emplace_back(p + "w_out", f.w_out);
            out.emplace_back(p + "b_out", f.b_out);
        }
        if (f.norm)
            out.emplace_back(p + "norm", f.norm_weight);
    } else {
        throw InputError("embedding kind '" + embedding.kind() + "' cannot be stored as factors");
    }
    return out;
}

Json save_compressed_model(const LoadedModel& source, const CompressedEmbedding& compressed,
                           const fs::path& out, const SaveCompressedOptions& options,
                           const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    const std::string label = source.files.path.string();
    detail::require_original_hf_source(source);
    const auto& model = *source.model;
    const auto& config = model.config();
    const std::string prefix = factor_prefix(config.arch);

    const CompressedEmbedding* positions = options.positions;
    if (positions && config.arch != Architecture::GPT2)
        throw InputError(label + ": only gpt2 models have a learned position table to compress");
    std::set<std::string> replaced{table_name(config.arch)};
    if (positions)
        replaced.insert("wpe.weight");

    AtomicDirectory dir(out, options.overwrite);
    copy_support_files(source.files.path, dir.path());

    Tensors tensors = weights_except(model, replaced);
    auto add_factors = [&](const TokenEmbedding& e, const std::string& prefix) {
        Json shapes = Json::object();
        for (const auto& [name, t] : embedding_factor_tensors(e, prefix)) {
            shapes[name] = t.sizes().vec();
            tensors.emplace_back(name, t);
        }
        return shapes;
    };
    const Json token_factors = add_factors(*compressed.embedding, factor_prefix(config.arch));
    const Json position_factors = positions ? add_factors(*positions->embedding, "wpe.") : Json();
    const std::map<std::string, std::string> metadata{{"format", "pt"},
                                                      {"embedlab_method", compressed.spec.method}};
    write_safetensors(dir.path() / "model.safetensors", tensors, metadata, progress);

    // Token-table fields sit at the top level; a compressed wpe gets its own block.
    Json manifest = {{"format", "embedlab-compressed-model"}, {"format_version", kFormatVersion}};
    manifest.update(table_json(compressed, table_name(config.arch), token_factors));
    manifest["tied_output_head"] = config.tied_embeddings;
    if (positions)
        manifest["positions"] = table_json(*positions, "wpe.weight", position_factors);
    // From sizes: the CLI may already have swapped the compressed tables in.
    auto before = model.parameter_breakdown();
    before.token_embedding = config.vocab_size * config.hidden_size;
    if (config.arch == Architecture::GPT2)
        before.position_embedding = config.max_positions * config.hidden_size;
    auto after = before;
    after.token_embedding = compressed.embedding->parameter_count();
    if (positions)
        after.position_embedding = positions->embedding->parameter_count();
    manifest["model_params"] = {{"before", before.total()}, {"after", after.total()}};
    manifest["weights_files"] = detail::file_digests(dir.path(), {"model.safetensors"});
    manifest["source"] = source_json(source);
    // fourier trains from a seed; the other methods are deterministic (0 for uniformity).
    manifest["seed"] = compressed.spec.method == "fourier" ? compressed.spec.seed : 0;
    manifest["versions"] = detail::manifest_versions();
    manifest["created"] = utc_now();
    if (!options.evaluation.is_null())
        manifest["evaluation"] = options.evaluation;
    if (options.extra.is_object())
        for (const auto& [key, value] : options.extra.items())
            manifest[key] = value;

    if (options.dense) {
        const fs::path dense = dir.path() / "dense";
        fs::create_directory(dense);
        copy_support_files(source.files.path, dense);
        Tensors dense_tensors = weights_except(model, replaced);
        dense_tensors.emplace_back(table_name(config.arch), reconstruct_table(*compressed.embedding));
        if (positions)
            dense_tensors.emplace_back("wpe.weight", reconstruct_table(*positions->embedding));
        write_safetensors(dense / "model.safetensors", dense_tensors, {{"format", "pt"}});
        manifest["dense_export"] = "dense";
    }
    manifest["wall_seconds"] = compressed.total_seconds +
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_file_atomic(dir.path() / "embedlab.json", manifest.dump(1) + "\n");
    dir.commit();
    return manifest;
}

namespace {

// One table's embedding from its manifest block, consuming its factors.
std::shared_ptr<const TokenEmbedding> build_table(const nlohmann::json& block, WeightMap& factors,
                                                  const std::string& prefix, int64_t rows, int64_t d,
                                                  const std::string& where, const std::string& label)
{
    auto field = [&](const nlohmann::json& obj, const char* name) -> const nlohmann::json& {
        if (!obj.is_object() || !obj.contains(name))
            throw InputError(where + ": missing field '" + name + "'");
        return obj.at(name);
    };
    const std::string method = field(block, "method").get<std::string>();
    const auto& params = field(block, "parameters");
    auto take = [&](const std::string& name, std::vector<int64_t> shape) {
        const auto it = factors.find(prefix + name);
        if (it == factors.end())
            throw InputError(where + ": method '" + method + "' needs tensor '" + prefix + name + "'");
        if (it->second.sizes().vec() != shape)
            throw InputError(label + "/model.safetensors: tensor '" + prefix + name + "' has shape " +
                             shape_text(it->second.sizes()) + ", expected " + shape_text(shape) +
                             " from embedlab.json and config.json");
        auto t = std::move(it->second);
        factors.erase(it);
        return t;
    };
    if (method == "pca" || method == "svd" || method == "lrf") {
        const int64_t k = field(params, "rank").get<int64_t>();
        if (k < 1 || k > d)
            throw InputError(where + ": rank " + std::to_string(k) + " is outside 1.." + std::to_string(d));
        LowRankFit fit;
        fit.kind = method == "pca" ? LowRankKind::PCA : method == "svd" ? LowRankKind::SVD : LowRankKind::LRF;
        fit.rank = k;
        fit.mu = method == "pca" ? take("pca.mu", {d}) : torch::zeros({d}, torch::kFloat32);
        fit.Z = take(method + ".Z", {rows, k});
        fit.P = take(method + ".P", {k, d});
        return std::make_shared<LowRankTokenEmbedding>(fit);
    }
    if (method == "tt") {
        const auto shape = field(params, "shape").get<std::vector<int64_t>>();
        const auto ranks = field(params, "ranks").get<std::vector<int64_t>>();
        check_tt_shape_and_ranks(d, shape, ranks);
        std::vector<torch::Tensor> cores;
        for (size_t k = 0; k < shape.size(); ++k)
            cores.push_back(take("tt.core" + std::to_string(k), {rows, ranks[k], shape[k], ranks[k + 1]}));
        return std::make_shared<TensorTrainTokenEmbedding>(shape, std::move(cores));
    }
    if (method == "lle" || method == "lle-unk" || method == "lle-pca") {
        const int64_t C = field(params, "common").get<int64_t>(), R = field(params, "rare").get<int64_t>();
        const int64_t k = method == "lle-unk" ? 0 : field(params, "k").get<int64_t>();
        if (C < 1 || R < 0 || C + R != rows)
            throw InputError(where + ": common " + std::to_string(C) + " + rare " + std::to_string(R) +
                             " does not make the " + std::to_string(rows) + " rows of the table");
        PartialSparseFit fit;
        fit.kind = method == "lle"       ? PartialSparseKind::LLE
                   : method == "lle-unk" ? PartialSparseKind::Unk
                                         : PartialSparseKind::PCA;
        fit.vocab = rows;
        fit.dim = d;
        fit.k = k;
        fit.reg = params.contains("reg") ? params["reg"].get<double>() : 0.0;
        const std::string m = method + ".";
        fit.common_ids = take(m + "common_ids", {C});
        fit.rare_ids = take(m + "rare_ids", {R});
        fit.common_rows = take(m + "common_rows", {C, d});
        if (fit.kind == PartialSparseKind::LLE) {
            fit.neighbour_ids = take(m + "neighbour_ids", {R, k});
            fit.weights = take(m + "weights", {R, k});
            fit.norms = take(m + "norms", {R});
        } else if (fit.kind == PartialSparseKind::Unk) {
            fit.fallback = take(m + "fallback", {d});
        } else {
            fit.mean = take(m + "mean", {d});
            fit.basis = take(m + "basis", {k, d});
            fit.coords = take(m + "coords", {R, k});
        }
        return std::make_shared<PartialSparseTokenEmbedding>(std::move(fit));
    }
    if (method == "fourier") {
        FourierParams p;
        p.mlp = parse_fourier_mlp(field(params, "mlp").get<std::string>());
        p.vocab = rows;
        p.dim = d;
        p.norm = field(params, "norm").get<bool>();
        if (rows < 2)
            throw InputError(where + ": fourier needs at least 2 rows, the table has " +
                             std::to_string(rows));
        if (p.mlp == FourierMlp::Linear) {
            p.w_in = take("fourier.w_in", {d, d});
            p.b_in = take("fourier.b_in", {d});
        } else {
            const double ratio = field(params, "hidden_ratio").get<double>();
            if (!(ratio > 0))
                throw InputError(where + ": hidden_ratio must be positive, got " + std::to_string(ratio));
            p.hidden = fourier_hidden_size(d, ratio);
            p.w_in = take("fourier.w_in", {2 * p.hidden, d});
            p.b_in = take("fourier.b_in", {2 * p.hidden});
            p.w_out = take("fourier.w_out", {d, p.hidden});
            p.b_out = take("fourier.b_out", {d});
        }
        if (p.norm)
            p.norm_weight = take("fourier.norm", {d});
        return std::make_shared<FourierTokenEmbedding>(std::move(p));
    }
    throw InputError(where + ": unknown method '" + method + "'");
}

} // namespace

ManifestEmbeddings embeddings_from_manifest(const std::string& manifest_text, WeightMap& factors,
                                            const ModelConfig& config, const std::string& label)
{
    const std::string where = label + "/embedlab.json";
    nlohmann::json m;
    try {
        m = nlohmann::json::parse(manifest_text);
    } catch (const nlohmann::json::exception& e) {
        throw InputError(where + ": not valid JSON (" + e.what() + ")");
    }
    try {
        if (!m.is_object() || !m.contains("format_version"))
            throw InputError(where + ": missing field 'format_version'");
        if (m["format_version"] != kFormatVersion)
            throw InputError(where + ": format_version " + m["format_version"].dump() +
                             " is not supported (this build reads " + std::to_string(kFormatVersion) + ")");
        // FLAT-LLM narrows the attention; the tables stay dense weights.
        if (m.contains("method") && m["method"] == "flat") {
            if (!factors.empty())
                throw InputError(where +
                                 ": a flat model stores no embedding factors, but model.safetensors has '" +
                                 factors.begin()->first + "'");
            return {};
        }
        const bool has_positions = m.contains("positions");
        if (has_positions && config.arch != Architecture::GPT2)
            throw InputError(where + ": has a 'positions' block but " + architecture_name(config.arch) +
                             " models have no learned position table");

        // The manifest's lists of factor tensors must match the file exactly.
        std::map<std::string, nlohmann::json> listed;
        for (const auto* block : {&m, has_positions ? &m["positions"] : nullptr}) {
            if (!block)
                continue;
            if (!block->contains("factor_tensors") || !(*block)["factor_tensors"].is_object())
                throw InputError(where + ": missing field 'factor_tensors' (tensor name -> shape)");
            for (const auto& [name, shape] : (*block)["factor_tensors"].items())
                listed[name] = shape;
        }
        for (const auto& [name, shape] : listed) {
            const auto it = factors.find(name);
            if (it == factors.end())
                throw InputError(where + ": lists tensor '" + name +
                                 "' but model.safetensors does not have it");
            if (shape.get<std::vector<int64_t>>() != it->second.sizes().vec())
                throw InputError(where + ": says '" + name + "' has shape " + shape.dump() +
                                 " but model.safetensors stores " + shape_text(it->second.sizes()));
            if (!torch::isfinite(it->second).all().item<bool>())
                throw InputError(label + "/model.safetensors: tensor '" + name + "' has NaN or Inf values");
        }
        for (const auto& [name, t] : factors)
            if (!listed.count(name))
                throw InputError(where + ": does not list tensor '" + name + "' found in model.safetensors");

        ManifestEmbeddings out;
        out.tokens = build_table(m, factors, factor_prefix(config.arch), config.vocab_size,
                                 config.hidden_size, where, label);
        if (has_positions)
            out.positions = build_table(m["positions"], factors, "wpe.", config.max_positions,
                                        config.hidden_size, where, label);
        if (!factors.empty())
            throw InputError(where + ": tensor '" + factors.begin()->first + "' is not used by its method");
        return out;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(where + ": a field has the wrong type (" + e.what() + ")");
    } catch (const InputError& e) {
        const std::string msg = e.what();
        if (msg.rfind(label, 0) == 0)
            throw;
        throw InputError(where + ": " + msg); // errors from the shape/rank checks name no file
    }
}

} // namespace embedlab
