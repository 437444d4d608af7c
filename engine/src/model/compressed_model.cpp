#include "embedlab/compressed_model.hpp"

#include "embedlab/table_method.hpp"

#include <algorithm>
#include <chrono>
#include <set>

#include "embedlab/file_output.hpp"
#include "embedlab/quant_types.hpp"
#include "embedlab/quantised_table.hpp"
#include "io/canonical_weights.hpp"
#include "io/gguf_quants.hpp"
#include "io/safetensors_output.hpp"
#include "model/manifest_layout.hpp"
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
    return token_table_name(arch);
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

// The model's weights but `skip`, plus `extra`, under the names its config.json expects.
Tensors weights_except(const LanguageModel& m, const std::set<std::string>& skip, WeightMap extra = {})
{
    for (const auto& [name, t] : m.weights())
        if (!skip.count(name))
            extra.emplace(name, t);
    return io::native_hf_tensors(m.config(), extra);
}

// The stored type of one factor at `store` ("": float32): a float32 tensor whose rows
// (last dimension) the type's blocks divide; null for the rest (and ids).
const QuantType* factor_stored_type(const torch::Tensor& t, const std::string& store)
{
    if (store.empty() || store == "f32" || t.scalar_type() != torch::kFloat32 || t.dim() < 1 ||
        t.numel() == 0)
        return nullptr;
    const auto* q = find_quant_type(store);
    return q && t.size(-1) % q->block_values == 0 ? q : nullptr;
}

// t's rows at type q, as ggml stores them: uint8 [numel / last, row bytes] (quant's
// quantiser, each row of the last dimension a row of its table).
torch::Tensor quantise_factor(const torch::Tensor& t, const QuantType& q)
{
    return quantise_table(t.reshape({-1, t.size(-1)}), q.name)->blocks();
}

// The float32 tensor of `shape` that quantise_factor's bytes hold (quant's dequantiser).
torch::Tensor dequantise_factor(const torch::Tensor& bytes, const QuantType& q,
                                const std::vector<int64_t>& shape, const std::string& name,
                                const std::string& label)
{
    const int64_t n = shape.back();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i)
        rows *= shape[i];
    const auto row_bytes = static_cast<int64_t>(io::ggml_row_bytes(q.ggml_type, n));
    if (bytes.scalar_type() != torch::kUInt8 || bytes.sizes().vec() != std::vector<int64_t>{rows, row_bytes})
        throw InputError(label + "/model.safetensors: tensor '" + name + "' is stored as " + q.name +
                         " and must be uint8 " + shape_text(std::vector<int64_t>{rows, row_bytes}) +
                         ", but is " + std::string(c10::toString(bytes.scalar_type())) + " " +
                         shape_text(bytes.sizes()));
    return QuantisedTokenEmbedding(q.name, n, bytes).rebuilt_rows().reshape(shape);
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
    if (!c.stored_types.empty())
        j["stored_types"] = c.stored_types;
    return j;
}

} // namespace

std::vector<std::pair<std::string, torch::Tensor>> TokenEmbedding::stored_tensors() const
{
    throw InputError("embedding kind '" + kind() + "' cannot be stored as factors");
}

std::vector<std::pair<std::string, torch::Tensor>> embedding_factor_tensors(const TokenEmbedding& embedding,
                                                                            const std::string& prefix)
{
    Tensors out = embedding.stored_tensors();
    for (auto& [name, t] : out)
        name.insert(0, prefix);
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
    // The weights left as they were keep the input's dtype (f16 -> f32 -> f16 is exact), so
    // the directory is not twice an f16 model's bytes; converted one at a time as written.
    std::map<std::string, torch::ScalarType> input_dtypes;
    if (const auto& dtype = source.files.stored_dtype; dtype == "F16" || dtype == "BF16")
        for (const auto& [name, t] : tensors)
            if (t.scalar_type() == torch::kFloat32)
                input_dtypes[name] = dtype == "F16" ? torch::kHalf : torch::kBFloat16;
    // Stored factors (spec.store) are written as the bytes the embedding was built from.
    auto add_factors = [&](const CompressedEmbedding& c, const std::string& prefix) {
        if (!c.spec.store.empty() && !c.factors_stored)
            throw std::logic_error("save_compressed_model: the factors were never stored as " + c.spec.store +
                                   " (store_factors)");
        std::map<std::string, torch::Tensor> stored(c.stored_tensors.begin(), c.stored_tensors.end());
        Json shapes = Json::object();
        for (const auto& [name, t] : embedding_factor_tensors(*c.embedding, prefix)) {
            shapes[name] = t.sizes().vec();
            const auto it = stored.find(name);
            tensors.emplace_back(name, it == stored.end() ? t : it->second);
        }
        return shapes;
    };
    const Json token_factors = add_factors(compressed, factor_prefix(config.arch));
    const Json position_factors = positions ? add_factors(*positions, "wpe.") : Json();
    const std::map<std::string, std::string> metadata{{"format", "pt"},
                                                      {"embedlab_method", compressed.spec.method}};
    io::write_safetensors_as(dir.path() / "model.safetensors", tensors, input_dtypes, metadata, progress);

    // Token-table fields sit at the top level; a compressed wpe gets its own block.
    Json manifest = {{"format", "embedlab-compressed-model"}, {"format_version", kFormatVersion}};
    manifest.update(table_json(compressed, table_name(config.arch), token_factors));
    manifest["tied_output_head"] = config.tied_embeddings;
    if (positions)
        manifest["positions"] = table_json(*positions, "wpe.weight", position_factors);
    // From sizes: the CLI may already have swapped the compressed tables in.
    auto before = model.parameter_breakdown();
    before.token_embedding = config.vocab_size * config.embedding_dim();
    if (config.arch == Architecture::GPT2)
        before.position_embedding = config.max_positions * config.hidden_size;
    auto after = before;
    after.token_embedding = compressed.embedding->parameter_count();
    if (positions)
        after.position_embedding = positions->embedding->parameter_count();
    manifest["model_params"] = {{"before", before.total()}, {"after", after.total()}};
    manifest["weights_files"] = detail::file_digests(dir.path(), {"model.safetensors"});
    manifest["source"] = source_json(source);
    // A fit drawing from a seed records it; the other methods are deterministic (0 for uniformity).
    const auto* method = find_table_method(compressed.spec.method);
    manifest["seed"] = method && method->fit_is_seeded() ? compressed.spec.seed : 0;
    manifest["versions"] = detail::manifest_versions();
    manifest["created"] = utc_now();
    if (!options.evaluation.is_null())
        manifest["evaluation"] = options.evaluation;
    // An object in `extra` adds to the manifest's object of that name (a chain's
    // source.path) rather than replacing it: its file digests are computed once.
    if (options.extra.is_object())
        manifest.update(options.extra, /*merge_objects=*/true);

    if (options.dense) {
        const fs::path dense = dir.path() / "dense";
        fs::create_directory(dense);
        copy_support_files(source.files.path, dense);
        WeightMap tables{{table_name(config.arch), reconstruct_table(*compressed.embedding)}};
        if (positions)
            tables.emplace("wpe.weight", reconstruct_table(*positions->embedding));
        const Tensors dense_tensors = weights_except(model, replaced, std::move(tables));
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

// One table's embedding from its checked layout, consuming its factors: every tensor
// its stored form declared, checked before any is used, then the form's rebuild.
std::shared_ptr<const TokenEmbedding> build_table(const detail::TableLayout& t, WeightMap& factors,
                                                  const std::string& where, const std::string& label)
{
    const auto& rebuild = stored_rebuild(t.stored, where);
    StoredTensors f;
    for (const auto& [full, shape] : t.tensors) {
        const auto it = factors.find(full);
        if (it == factors.end())
            throw InputError(where + ": method '" + t.method + "' needs tensor '" + full + "'");
        if (it->second.sizes().vec() != shape)
            throw InputError(label + "/model.safetensors: tensor '" + full + "' has shape " +
                             shape_text(it->second.sizes()) + ", expected " + shape_text(shape) +
                             " from embedlab.json and config.json");
        f[full.substr(t.prefix.size())] = std::move(it->second);
        factors.erase(it);
    }
    // The tables check their tensors' contents; their messages gain the file (issue 24 item 15).
    try {
        return rebuild.rebuild(t, f);
    } catch (const InputError& e) {
        throw InputError(label + "/model.safetensors: " + e.what());
    }
}

} // namespace

StoredFactorBytes store_factors(CompressedEmbedding& c, const ModelConfig& config, bool positions)
{
    const std::string prefix = positions ? "wpe." : factor_prefix(config.arch);
    StoredFactorBytes bytes;
    WeightMap factors;
    Json shapes = Json::object();
    c.stored_tensors.clear();
    c.stored_types = Json::object();
    for (auto& [name, t] : embedding_factor_tensors(*c.embedding, prefix)) {
        shapes[name] = t.sizes().vec();
        if (const auto* q = factor_stored_type(t, c.spec.store)) {
            auto stored = quantise_factor(t, *q);
            bytes.values += stored.numel();
            factors[name] = dequantise_factor(stored, *q, t.sizes().vec(), name, "store");
            c.stored_types[name] = q->name;
            c.stored_tensors.emplace_back(name, std::move(stored));
        } else {
            (t.is_floating_point() ? bytes.values : bytes.ids) +=
                t.numel() * static_cast<int64_t>(t.element_size());
            factors[name] = t;
        }
    }
    // Read back through the layout a reload uses: the same tensors, the same checks.
    const std::string where = "the " + c.spec.method + " factors stored as " + c.spec.store;
    const auto layout = detail::parse_table_layout(table_json(c, prefix + "weight", shapes), prefix,
                                                   c.embedding->vocab_size(), c.embedding->dim(), where);
    c.embedding = build_table(layout, factors, where, where);
    c.factors_stored = true;
    return bytes;
}

ManifestEmbeddings embeddings_from_manifest(const std::string& manifest_text, WeightMap& factors,
                                            const ModelConfig& config, const std::string& label)
{
    const std::string where = label + "/embedlab.json";
    const detail::ManifestDims dims{.vocab = config.vocab_size,
                                    .max_positions = config.max_positions,
                                    .dim = config.embedding_dim(),
                                    .has_position_table = config.arch == Architecture::GPT2,
                                    .architecture = architecture_name(config.arch),
                                    .token_prefix = factor_prefix(config.arch)};
    const auto layout = detail::parse_manifest_layout(manifest_text, dims, label);
    if (layout.flat) {
        if (!factors.empty())
            throw InputError(where +
                             ": a flat model stores no embedding factors, but model.safetensors has '" +
                             factors.begin()->first + "'");
        return {};
    }
    // Factors stored at a ggml type (--store) become the float32 tensors they hold.
    for (const auto* table :
         {layout.tokens ? &*layout.tokens : nullptr, layout.positions ? &*layout.positions : nullptr})
        if (table)
            for (const auto& stored : table->stored_types) {
                const std::string& name = stored.first;
                const auto it = factors.find(name);
                if (it == factors.end())
                    continue; // the check below names it
                const auto expected = std::find_if(table->tensors.begin(), table->tensors.end(),
                                                   [&](const auto& t) { return t.first == name; });
                it->second = dequantise_factor(it->second, *find_quant_type(stored.second), expected->second,
                                               name, label);
            }
    // The manifest's lists of factor tensors must match the file exactly.
    for (const auto& [name, shape] : layout.listed) {
        const auto it = factors.find(name);
        if (it == factors.end())
            throw InputError(where + ": lists tensor '" + name + "' but model.safetensors does not have it");
        if (shape != it->second.sizes().vec())
            throw InputError(where + ": says '" + name + "' has shape " + shape_text(shape) +
                             " but model.safetensors stores " + shape_text(it->second.sizes()));
        if (!torch::isfinite(it->second).all().item<bool>())
            throw InputError(label + "/model.safetensors: tensor '" + name + "' has NaN or Inf values");
    }
    for (const auto& [name, t] : factors)
        if (!layout.listed.count(name))
            throw InputError(where + ": does not list tensor '" + name + "' found in model.safetensors");

    ManifestEmbeddings out;
    out.tokens = build_table(*layout.tokens, factors, where, label);
    if (layout.positions)
        out.positions = build_table(*layout.positions, factors, where, label);
    if (!factors.empty())
        throw InputError(where + ": tensor '" + factors.begin()->first + "' is not used by its method");
    return out;
}

} // namespace embedlab
