// Hugging Face model directories: config.json plus one safetensors file or a
// sharded set listed by model.safetensors.index.json.
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/json_input.hpp"
#include "io/canonical_weights.hpp"
#include "io/dtype_convert.hpp"
#include "io/readers.hpp"
#include "io/safetensors.hpp"
#include "model/manifest_layout.hpp"
#include "model/shape_check.hpp"

namespace embedlab::io {

namespace fs = std::filesystem;

namespace {

std::string read_whole_file(const fs::path& path)
{
    return read_regular_file(path, metadata_file_cap, "metadata file");
}

struct LoadedWeights {
    WeightMap weights;
    std::set<std::string> stored_types;
    std::vector<std::string> skipped;
    std::map<std::string, std::string> non_finite; // ShapesOnly
    std::vector<fs::path> files;
};

void merge_file(LoadedWeights& into, const fs::path& file, SafetensorsFile&& loaded,
                const std::string& duplicate_label)
{
    for (auto& [name, tensor] : loaded.weights) {
        if (!into.weights.emplace(name, std::move(tensor)).second)
            throw InputError(duplicate_label + ": tensor '" + name +
                             "' appears in more than one shard (again in " + file.filename().string() + ")");
    }
    into.stored_types.insert(loaded.stored_types.begin(), loaded.stored_types.end());
    into.skipped.insert(into.skipped.end(), loaded.skipped.begin(), loaded.skipped.end());
    into.non_finite.merge(loaded.non_finite);
    into.files.push_back(file);
}

LoadedWeights load_sharded(const fs::path& dir, const fs::path& index_path, WeightValues values)
{
    const std::string label = index_path.string();
    nlohmann::json index;
    try {
        index = nlohmann::json::parse(read_whole_file(index_path));
    } catch (const nlohmann::json::exception& ex) {
        throw InputError(label + ": not valid JSON (" + ex.what() + ")");
    }
    const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
    if (map_it == index.end() || !map_it->is_object())
        throw InputError(label + ": missing field 'weight_map' (tensor name -> shard file)");

    std::map<std::string, std::string> shard_of;
    std::set<std::string> shards;
    for (const auto& [name, shard] : map_it->items()) {
        if (!shard.is_string())
            throw InputError(label + ": weight_map entry for '" + name + "' is not a file name");
        const std::string file = shard.get<std::string>();
        // Shards must sit next to the index: no paths out of the model directory.
        if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
            throw InputError(label + ": weight_map names '" + file +
                             "', which is not a file in the model directory");
        shard_of[name] = file;
        shards.insert(file);
    }
    if (shards.empty())
        throw InputError(label + ": weight_map is empty");

    LoadedWeights out;
    for (const std::string& shard : shards) {
        const fs::path file = dir / shard;
        if (!fs::exists(file))
            throw InputError(label + ": shard " + shard + " is missing (expected " + file.string() + ")");
        merge_file(out, file, load_safetensors_file(file, values), label);
    }
    for (const auto& [name, shard] : shard_of)
        if (!out.weights.count(name))
            throw InputError(label + ": missing tensor '" + name + "', listed in weight_map for " + shard +
                             " but not found there");
    return out;
}

// GPT-2 checkpoints saved from GPT2LMHeadModel prefix every name with "transformer.".
void strip_transformer_prefix(WeightMap& weights, const std::string& label)
{
    static const std::string prefix = "transformer.";
    WeightMap renamed;
    for (auto& [name, tensor] : weights) {
        const std::string canonical = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
        if (!renamed.emplace(canonical, std::move(tensor)).second)
            throw InputError(label + ": tensor '" + canonical +
                             "' is stored both with and without 'transformer.'");
    }
    weights = std::move(renamed);
}

// FLAT-LLM directories narrow the value heads (and MLPs) per layer: the
// manifest's value_head_dims / mlp_widths are part of the architecture.
void apply_layer_dims(ModelConfig& config, const std::string& manifest_text, const std::string& label)
{
    auto dims = detail::parse_layer_dims(manifest_text, label);
    if (!dims.value_head_dims.empty())
        config.value_head_dims = std::move(dims.value_head_dims);
    if (!dims.mlp_widths.empty())
        config.mlp_widths = std::move(dims.mlp_widths);
    detail::check_layer_dims(config, label);
}

std::string shape_text(c10::IntArrayRef s)
{
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) { // piece by piece: GCC 12's -Wrestrict misfires
        if (i)
            out += ", ";
        out += std::to_string(s[i]);
    }
    return out + "]";
}

// A method that changes the model's own tensors (FLAT-LLM narrows the value heads and
// MLPs) lists them in embedlab.json's "changed_tensors" with their shapes; each must be
// in the file at that shape, as a table's factor_tensors must (the same messages).
void check_changed_tensors(const std::string& manifest_text, const WeightMap& weights,
                           const std::string& where)
{
    const auto m = parse_json_unique<nlohmann::json>(manifest_text, where);
    if (!m.is_object() || !m.contains("changed_tensors"))
        return;
    if (!m["changed_tensors"].is_object())
        throw InputError(where + ": changed_tensors must map tensor names to shapes");
    for (const auto& [name, listed] : m["changed_tensors"].items()) {
        const auto shape = detail::json_integers(listed, "the shape of '" + name + "'", where);
        const auto it = weights.find(name);
        if (it == weights.end())
            throw InputError(where + ": lists tensor '" + name + "' but model.safetensors does not have it");
        if (it->second.sizes() != c10::IntArrayRef(shape))
            throw InputError(where + ": says '" + name + "' has shape " + shape_text(shape) +
                             " but model.safetensors stores " + shape_text(it->second.sizes()));
    }
}

// A directory EmbedLab wrote holds its own files: a symlink leading out of it (to
// weights elsewhere, to /etc/passwd) is not what the manifest's digests describe.
// One rule for every file of it, config.json, the weights, the tokenizer, the
// manifest and the files of its subdirectories alike, checked before any is read.
void refuse_symlinks_leading_out(const fs::path& dir)
{
    const fs::path root = fs::weakly_canonical(dir);
    // Symlinked directories are not descended into: they are checked as links.
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
        if (!it->is_symlink())
            continue;
        std::error_code ec;
        const fs::path target = fs::canonical(it->path(), ec); // dangling or a loop: ec
        if (ec)
            throw InputError(it->path().string() +
                             ": a symlink in the compressed directory that does not resolve (" +
                             ec.message() + "); EmbedLab's directories hold their own files");
        const auto rel = target.lexically_relative(root);
        if (rel.empty() || *rel.begin() == "..")
            throw InputError(it->path().string() +
                             ": a symlink leading out of the compressed directory (to " + target.string() +
                             "); EmbedLab's directories hold their own files");
    }
}

} // namespace

ModelFiles read_hf_directory(const fs::path& dir, WeightValues values)
{
    const fs::path config_path = dir / "config.json";
    // A compressed directory stores factor tensors in place of the embedding; a
    // FLAT-LLM one narrows layers, which the fused tensors' split must know.
    const fs::path manifest = dir / "embedlab.json";
    std::error_code ec;
    const bool compressed = fs::exists(fs::symlink_status(manifest, ec));
    if (compressed)
        refuse_symlinks_leading_out(dir);
    if (!fs::exists(config_path))
        throw InputError(dir.string() + ": no config.json; a Hugging Face model directory needs config.json "
                                        "and model.safetensors");
    ModelFiles mf;
    mf.format = ModelFormat::HuggingFace;
    mf.config = parse_hf_config(read_whole_file(config_path), config_path.string());
    if (compressed) // its factors build the embedding (and are small): values always
        values = WeightValues::Load;

    const fs::path single = dir / "model.safetensors";
    const fs::path index = dir / "model.safetensors.index.json";
    LoadedWeights loaded;
    std::string weights_label;
    if (fs::exists(single)) {
        merge_file(loaded, single, load_safetensors_file(single, values), single.string());
        weights_label = single.string();
    } else if (fs::exists(index)) {
        loaded = load_sharded(dir, index, values);
        weights_label = index.string();
    } else {
        std::string problem = "no model.safetensors or model.safetensors.index.json";
        if (fs::exists(dir / "pytorch_model.bin"))
            problem += " (pytorch_model.bin is not supported; convert it to safetensors)";
        throw InputError(dir.string() + ": " + problem);
    }

    mf.weights = std::move(loaded.weights);
    mf.files = std::move(loaded.files);
    mf.stored_dtype = summarize_stored_types(loaded.stored_types);
    for (const std::string& s : loaded.skipped)
        mf.warnings.push_back(weights_label + ": ignored non-float tensor " + s);
    if (mf.config.arch == Architecture::GPT2)
        strip_transformer_prefix(mf.weights, weights_label);
    if (compressed) {
        mf.embedlab_manifest = read_whole_file(manifest);
        apply_layer_dims(mf.config, mf.embedlab_manifest, manifest.string());
    }
    if (mf.config.is_encoder()) {
        canonicalize_encoder_names(mf.config, mf.weights, weights_label, mf.warnings);
        mf.config.has_pooler = mf.weights.count("pooler.dense.weight") > 0;
        read_sentence_transformers_modules(dir, mf.config);
    } else {
        canonicalize_hf_names(mf.config, mf.weights, weights_label);
    }

    if (!mf.config.is_encoder()) // an encoder's masked-LM head is tied by construction
        settle_output_head(mf.config, mf.weights, weights_label, mf.warnings);
    if (compressed) {
        const std::string table = embedding_name(mf.config.arch);
        const std::string prefix = table.substr(0, table.size() - std::string("weight").size());
        auto is_factor = [&](const std::string& name) {
            return (name != table && name.rfind(prefix, 0) == 0) ||
                   (mf.config.arch == Architecture::GPT2 && name != "wpe.weight" &&
                    name.rfind("wpe.", 0) == 0);
        };
        for (auto it = mf.weights.begin(); it != mf.weights.end();) {
            if (is_factor(it->first)) {
                mf.embedding_factors.emplace(it->first, std::move(it->second));
                it = mf.weights.erase(it);
            } else {
                ++it;
            }
        }
    }
    check_weights_against_config(mf.config, mf.weights, config_path.string(), weights_label, !compressed);
    refuse_unused_tensors(mf.config, mf.weights, weights_label, !compressed);
    if (compressed)
        check_changed_tensors(mf.embedlab_manifest, mf.weights, manifest.string());
    for (const auto& [name, warning] : loaded.non_finite) // last, as read_model_files' own scan
        mf.warnings.push_back(warning);
    return mf;
}

} // namespace embedlab::io
