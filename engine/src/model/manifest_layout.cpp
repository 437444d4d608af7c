#include "model/manifest_layout.hpp"

#include "embedlab/method_registry.hpp"
#include "embedlab/name_table.hpp"

#include <utility>

#include <nlohmann/json.hpp>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/fourier_mlp.hpp"
#include "embedlab/json_input.hpp"
#include "embedlab/quant_types.hpp"
#include "io/gguf_quants.hpp"

namespace embedlab::detail {

using Json = nlohmann::json;

// JSON integers only: nlohmann's get<int64_t>() casts a float such as 1e58
// without a check (undefined behaviour), and lets 2.5 pass as 2.
int64_t json_integer(const Json& v, const std::string& what, const std::string& where)
{
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
        throw InputError(where + ": " + what + " must be an integer, got " + v.dump());
    return v.get<int64_t>();
}

std::vector<int64_t> json_integers(const Json& v, const std::string& what, const std::string& where)
{
    if (!v.is_array())
        throw InputError(where + ": " + what + " must be a list of integers, got " + v.dump());
    std::vector<int64_t> out;
    for (const auto& x : v)
        out.push_back(json_integer(x, what + " entries", where));
    return out;
}

namespace {

const Json& field(const Json& obj, const char* name, const std::string& where)
{
    if (!obj.is_object() || !obj.contains(name))
        throw InputError(where + ": missing field '" + name + "'");
    return obj.at(name);
}

// The stored layout a manifest's method names: its registry row's stored_as, or lrf
// (finetune --from-scratch's factors, a stored kind of no method).
std::string stored_kind(const std::string& method, const std::string& where)
{
    if (method == "lrf")
        return method;
    const auto* m = find_method(method);
    if (!m || m->part != CompressedPart::TokenEmbedding)
        throw InputError(where + ": unknown method '" + method + "'");
    return m->stored_as;
}

TableKind table_kind(const std::string& stored, const std::string& where)
{
    constexpr Named<TableKind> kinds[]{
        {TableKind::PCA, "pca"},        {TableKind::SVD, "svd"},        {TableKind::LRF, "lrf"},
        {TableKind::TT, "tt"},          {TableKind::Tucker, "tucker"},  {TableKind::LLE, "lle"},
        {TableKind::LLEUnk, "lle-unk"}, {TableKind::LLEPCA, "lle-pca"}, {TableKind::Fourier, "fourier"},
        {TableKind::Quant, "quant"},    {TableKind::AQ, "aq"}};
    if (const auto* row = row_with_name(kinds, stored))
        return row->value;
    throw InputError(where + ": stored layout '" + stored + "' is not one EmbedLab reads");
}

// Whether the block's factor_tensors lists `name` (checked to be an object by the caller).
bool listed_in(const Json& block, const std::string& name)
{
    return block.contains("factor_tensors") && block["factor_tensors"].is_object() &&
           block["factor_tensors"].contains(name);
}

TensorShape listed_shape(const Json& block, const std::string& name, const std::string& where)
{
    return json_integers(block["factor_tensors"][name], "the shape of '" + name + "'", where);
}

// A table's "stored_types" (name -> ggml type): each a float tensor of the method whose
// rows (last dimension) the type's blocks divide.
std::map<std::string, std::string> stored_types(const Json& types, const TableLayout& t,
                                                const std::string& where)
{
    if (!types.is_object())
        throw InputError(where + ": stored_types must be an object (tensor name -> stored type)");
    std::map<std::string, std::string> out;
    for (const auto& item : types.items()) {
        const std::string name = item.key();
        const Json& type = item.value();
        const auto it = std::find_if(t.tensors.begin(), t.tensors.end(),
                                     [&](const auto& tensor) { return tensor.first == name; });
        if (it == t.tensors.end())
            throw InputError(where + ": stored_types names '" + name +
                             "', which is not a tensor of method '" + t.method + "'");
        if (std::find(t.index_tensors.begin(), t.index_tensors.end(), name) != t.index_tensors.end())
            throw InputError(where + ": stored_types names '" + name +
                             "', which holds ids (stored as integers)");
        const auto* q = type.is_string() ? find_quant_type(type.get<std::string>()) : nullptr;
        if (!q)
            throw InputError(where + ": stored type " + type.dump() + " of '" + name +
                             "' is not one EmbedLab reads (" + quant_type_names() + ")");
        const TensorShape& shape = it->second;
        if (shape.empty() || shape.back() < 1 || shape.back() % q->block_values != 0)
            throw InputError(where + ": '" + name + "' is stored as " + q->name + ", whose blocks of " +
                             std::to_string(q->block_values) + " values do not divide its rows");
        out[name] = q->name;
    }
    return out;
}

TableLayout table_layout(const Json& block, const std::string& prefix, int64_t rows, int64_t d,
                         const std::string& where)
{
    TableLayout t;
    t.method = field(block, "method", where).get<std::string>();
    t.stored = stored_kind(t.method, where);
    t.kind = table_kind(t.stored, where);
    using K = TableKind;
    t.prefix = prefix;
    t.rows = rows;
    t.dim = d;
    const Json& params = field(block, "parameters", where);
    // Fields other tools read: they must say what the rest of the manifest says.
    if (params.is_object() && params.contains("method") && params["method"] != t.method)
        throw InputError(where + ": parameters.method " + params["method"].dump() + " differs from method '" +
                         t.method + "'");
    if (block.contains("embedding_tensor") && block["embedding_tensor"] != prefix + "weight")
        throw InputError(where + ": embedding_tensor " + block["embedding_tensor"].dump() +
                         " is not this model's table '" + prefix + "weight'");
    auto needs = [&](const std::string& name, TensorShape shape) {
        t.tensors.emplace_back(prefix + name, shape);
        if (name.ends_with("_ids") || name == "tt.token_ranks" || name == "aq.codes")
            t.index_tensors.push_back(prefix + name);
    };
    const std::string& method = t.stored;
    if (t.kind == K::PCA || t.kind == K::SVD || t.kind == K::LRF) {
        t.rank = json_integer(field(params, "rank", where), "rank", where);
        if (t.rank < 1 || t.rank > d)
            throw InputError(where + ": rank " + std::to_string(t.rank) + " is outside 1.." +
                             std::to_string(d));
        if (t.kind == K::PCA)
            needs("pca.mu", {d});
        needs(method + ".Z", {rows, t.rank});
        needs(method + ".P", {t.rank, d});
    } else if (t.kind == K::TT) {
        t.tt_shape = json_integers(field(params, "shape", where), "shape", where);
        t.tt_ranks = json_integers(field(params, "ranks", where), "ranks", where);
        check_tt_shape_and_ranks(d, t.tt_shape, t.tt_ranks);
        if (params.contains("rank_mode")) {
            const Json& mode = params["rank_mode"];
            if (mode != "per_token" && mode != "uniform")
                throw InputError(where + ": rank_mode must be \"per_token\" or \"uniform\", got " +
                                 mode.dump());
            t.tt_per_token = mode == "per_token";
        }
        // Per-token cores are packed since issue 36 (1-D, each token's own values; their
        // lengths follow from tt.token_ranks, checked by the embedding); earlier
        // directories hold them padded to `ranks`, as uniform cores are.
        t.tt_packed = t.tt_per_token && listed_in(block, prefix + "tt.packed_core0");
        if (!t.tt_per_token &&
            (listed_in(block, prefix + "tt.token_ranks") || listed_in(block, prefix + "tt.packed_core0")))
            throw InputError(where + ": lists per-token tensors (tt.token_ranks, tt.packed_core<k>) but its "
                                     "rank_mode is not \"per_token\"");
        for (size_t k = 0; k < t.tt_shape.size(); ++k) {
            if (t.tt_packed) {
                const std::string name = "tt.packed_core" + std::to_string(k);
                const auto shape = listed_shape(block, prefix + name, where);
                if (shape.size() != 1 || shape[0] < 0)
                    throw InputError(where + ": '" + prefix + name + "' must be one-dimensional (packed)");
                needs(name, shape);
            } else {
                needs("tt.core" + std::to_string(k), {rows, t.tt_ranks[k], t.tt_shape[k], t.tt_ranks[k + 1]});
            }
        }
        if (t.tt_per_token)
            needs("tt.token_ranks", {rows, static_cast<int64_t>(t.tt_shape.size()) - 1});
    } else if (t.kind == K::Tucker) {
        // The same tensorisation as tt; ranks r_1..r_N, one per mode.
        t.tt_shape = json_integers(field(params, "shape", where), "shape", where);
        t.tt_ranks = json_integers(field(params, "ranks", where), "ranks", where);
        check_tucker_shape_and_ranks(d, t.tt_shape, t.tt_ranks);
        TensorShape core{rows};
        core.insert(core.end(), t.tt_ranks.begin(), t.tt_ranks.end());
        needs("tucker.core", core);
        for (size_t k = 0; k < t.tt_shape.size(); ++k)
            needs("tucker.factor" + std::to_string(k), {t.tt_shape[k], t.tt_ranks[k]});
    } else if (t.kind == K::LLE || t.kind == K::LLEUnk || t.kind == K::LLEPCA) {
        t.common = json_integer(field(params, "common", where), "common", where);
        t.rare = json_integer(field(params, "rare", where), "rare", where);
        t.k = t.kind == K::LLEUnk ? 0 : json_integer(field(params, "k", where), "k", where);
        // Compared without adding, so huge counts cannot overflow.
        if (t.common < 1 || t.rare < 0 || t.common > rows || t.rare != rows - t.common)
            throw InputError(where + ": common " + std::to_string(t.common) + " + rare " +
                             std::to_string(t.rare) + " does not make the " + std::to_string(rows) +
                             " rows of the table");
        if (t.kind != K::LLEUnk && t.k < 1)
            throw InputError(where + ": k must be at least 1, got " + std::to_string(t.k));
        t.reg = params.contains("reg") ? params["reg"].get<double>() : 0.0;
        const std::string m = method + ".";
        needs(m + "common_ids", {t.common});
        // Before issue 36 the rare list was stored too; now it is derived (the complement).
        t.rare_ids_stored = listed_in(block, prefix + m + "rare_ids");
        if (t.rare_ids_stored)
            needs(m + "rare_ids", {t.rare});
        needs(m + "common_rows", {t.common, d});
        if (t.kind == K::LLE) {
            needs(m + "neighbour_ids", {t.rare, t.k});
            needs(m + "weights", {t.rare, t.k});
            needs(m + "norms", {t.rare});
        } else if (t.kind == K::LLEUnk) {
            needs(m + "fallback", {d});
        } else {
            needs(m + "mean", {d});
            needs(m + "basis", {t.k, d});
            needs(m + "coords", {t.rare, t.k});
        }
    } else if (t.kind == K::Quant) {
        // The ggml blocks of every row, as bytes: the type fixes a row's length.
        const Json& type = field(params, "type", where);
        const auto* q = type.is_string() ? find_quant_type(type.get<std::string>()) : nullptr;
        if (!q)
            throw InputError(where + ": quant type " + type.dump() + " is not one EmbedLab reads (" +
                             quant_type_names() + ")");
        if (d % q->block_values != 0)
            throw InputError(where + ": quant type " + q->name +
                             " does not fit rows of d = " + std::to_string(d));
        t.quant_type = q->name;
        needs("quant.blocks", {rows, static_cast<int64_t>(io::ggml_row_bytes(q->ggml_type, d))});
    } else if (t.kind == K::AQ) {
        // Codes of log2 K bits, packed a row at a time; M codebooks of K codewords.
        t.codebooks = json_integer(field(params, "codebooks", where), "codebooks", where);
        t.codewords = json_integer(field(params, "codewords", where), "codewords", where);
        if (t.codebooks < 1 || t.codebooks > 1024 || t.codewords < 2 || t.codewords > 256 ||
            (t.codewords & (t.codewords - 1)) != 0)
            throw InputError(where +
                             ": aq needs 1..1024 codebooks of a power of two in 2..256 codewords, got " +
                             std::to_string(t.codebooks) + " of " + std::to_string(t.codewords));
        int64_t bits = 0;
        while ((int64_t{1} << bits) < t.codewords)
            ++bits;
        needs("aq.codes", {rows, (t.codebooks * bits + 7) / 8});
        needs("aq.codebooks", {t.codebooks, t.codewords, d});
    } else { // K::Fourier
        t.mlp = fourier_mlp_name(parse_fourier_mlp(field(params, "mlp", where).get<std::string>()));
        t.norm = field(params, "norm", where).get<bool>();
        if (rows < 2)
            throw InputError(where + ": fourier needs at least 2 rows, the table has " +
                             std::to_string(rows));
        if (t.mlp == "linear") {
            needs("fourier.w_in", {d, d});
            needs("fourier.b_in", {d});
        } else {
            const double ratio = field(params, "hidden_ratio", where).get<double>();
            if (!(ratio > 0 && ratio <= kMaxFourierHiddenRatio))
                throw InputError(where + ": hidden_ratio must be in (0, " +
                                 std::to_string(kMaxFourierHiddenRatio) + "], got " + std::to_string(ratio));
            t.hidden = fourier_hidden_size(d, ratio);
            needs("fourier.w_in", {2 * t.hidden, d});
            needs("fourier.b_in", {2 * t.hidden});
            needs("fourier.w_out", {d, t.hidden});
            needs("fourier.b_out", {d});
        }
        if (t.norm)
            needs("fourier.norm", {d});
    }
    if (block.contains("stored_types"))
        t.stored_types = stored_types(block["stored_types"], t, where);
    return t;
}

} // namespace

TableLayout parse_table_layout(const Json& block, const std::string& prefix, int64_t rows, int64_t d,
                               const std::string& where)
{
    return table_layout(block, prefix, rows, d, where);
}

ManifestLayout parse_manifest_layout(const std::string& manifest_text, const ManifestDims& dims,
                                     const std::string& label)
{
    const std::string where = label + "/embedlab.json";
    const Json m = parse_json_unique<Json>(manifest_text, where);
    try {
        if (!m.is_object() || !m.contains("format_version"))
            throw InputError(where + ": missing field 'format_version'");
        if (m.contains("format") && m["format"] != "embedlab-compressed-model")
            throw InputError(where + ": format " + m["format"].dump() +
                             " is not 'embedlab-compressed-model'; not an EmbedLab manifest");
        if (m["format_version"] != kManifestFormatVersion)
            throw InputError(where + ": format_version " + m["format_version"].dump() +
                             " is not supported (this build reads " + std::to_string(kManifestFormatVersion) +
                             ")");
        ManifestLayout out;
        // FLAT-LLM narrows the attention; the tables stay dense weights.
        if (m.contains("method") && m["method"] == "flat") {
            out.flat = true;
            return out;
        }
        const bool has_positions = m.contains("positions");
        if (has_positions && !dims.has_position_table)
            throw InputError(where + ": has a 'positions' block but " + dims.architecture +
                             " models have no learned position table");
        for (const Json* block : {&m, has_positions ? &m["positions"] : nullptr}) {
            if (!block)
                continue;
            if (!block->is_object() || !block->contains("factor_tensors") ||
                !(*block)["factor_tensors"].is_object())
                throw InputError(where + ": missing field 'factor_tensors' (tensor name -> shape)");
            for (const auto& [name, shape] : (*block)["factor_tensors"].items())
                out.listed[name] = json_integers(shape, "the shape of '" + name + "'", where);
        }
        out.tokens = table_layout(m, dims.token_prefix, dims.vocab, dims.dim, where);
        if (has_positions)
            out.positions = table_layout(m["positions"], "wpe.", dims.max_positions, dims.dim, where);
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

std::vector<WeightsFileRecord> parse_weights_files(const std::string& manifest_text, const std::string& where)
{
    const auto m = Json::parse(manifest_text, nullptr, /*allow_exceptions=*/false);
    if (!m.is_object() || !m.contains("weights_files"))
        return {}; // written before digests were recorded, or not ours to judge
    std::vector<WeightsFileRecord> records;
    try {
        if (!m["weights_files"].is_array())
            throw InputError(where + ": weights_files must be a list of {file, sha256} objects");
        for (const auto& f : m["weights_files"]) {
            WeightsFileRecord r{f.at("file").get<std::string>(), f.at("sha256").get<std::string>()};
            if (f.contains("bytes"))
                r.bytes = json_integer(f.at("bytes"), "weights_files' bytes", where);
            if (r.file.empty() || r.file.find('/') != std::string::npos || r.file == "." || r.file == "..")
                throw InputError(where + ": weights_files names '" + r.file +
                                 "', which is not a file in the directory");
            records.push_back(std::move(r));
        }
    } catch (const nlohmann::json::exception& e) {
        throw InputError(where + ": weights_files must list {file, sha256} objects (" + e.what() + ")");
    }
    return records;
}

LayerDims parse_layer_dims(const std::string& manifest_text, const std::string& label)
{
    const Json m = parse_json_unique<Json>(manifest_text, label);
    if (!m.is_object())
        throw InputError(label + ": not a JSON object (an EmbedLab manifest is one object of fields)");
    LayerDims dims;
    try {
        if (m.is_object() && m.contains("value_head_dims"))
            dims.value_head_dims = json_integers(m["value_head_dims"], "value_head_dims", label);
        if (m.is_object() && m.contains("mlp_widths"))
            dims.mlp_widths = json_integers(m["mlp_widths"], "mlp_widths", label);
    } catch (const nlohmann::json::exception& e) {
        throw InputError(label + ": value_head_dims / mlp_widths must be lists of integers (" + e.what() +
                         ")");
    }
    return dims;
}

} // namespace embedlab::detail
