#include "model/manifest_layout.hpp"

#include <utility>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/json_input.hpp"
#include "embedlab/method_registry.hpp"
#include "embedlab/quant_types.hpp"

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
    const StoredForm& form = stored_form_of(t.method, where);
    t.stored = form.name;
    t.prefix = prefix;
    t.rows = rows;
    t.dim = d;
    const StoredBlock stored_block(block, prefix, where);
    const Json& params = stored_block.params();
    // Fields other tools read: they must say what the rest of the manifest says.
    if (params.is_object() && params.contains("method") && params["method"] != t.method)
        throw InputError(where + ": parameters.method " + params["method"].dump() + " differs from method '" +
                         t.method + "'");
    if (block.contains("embedding_tensor") && block["embedding_tensor"] != prefix + "weight")
        throw InputError(where + ": embedding_tensor " + block["embedding_tensor"].dump() +
                         " is not this model's table '" + prefix + "weight'");
    form.layout(stored_block, t);
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
        // A method of another part (FLAT-LLM narrows the attention): the tables stay dense weights.
        const auto* method = m.contains("method") && m["method"].is_string()
                                 ? find_method(m["method"].get<std::string>())
                                 : nullptr;
        if (method && method->part != CompressedPart::TokenEmbedding) {
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
