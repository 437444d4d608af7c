// Saving a finetuned compressed model (finetune.hpp); load_model reads it back
// through the ordinary compressed-directory path plus attach_lora_from_directory.
#include <chrono>

#include "embedlab/accounting.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/low_rank.hpp"
#include "io/canonical_weights.hpp"
#include "model/manifest_support.hpp"

namespace embedlab {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

const TokenEmbedding& unwrapped(const TokenEmbedding& e)
{
    const auto* base = e.lora_base();
    return base ? *base : e;
}

} // namespace

Json save_finetuned_model(const LoadedModel& source, const LanguageModel& model, const fs::path& out,
                          const SaveFinetunedOptions& options, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    const std::string label = source.files.path.string();
    if (source.files.embedlab_manifest.empty() || !fs::is_directory(source.files.path))
        throw InputError(label + ": is not an EmbedLab compressed model directory (no embedlab.json)");
    Json manifest = Json::parse(source.files.embedlab_manifest);
    const auto& config = model.config();
    const std::string table_tensor = token_table_name(config.arch);
    const std::string prefix = table_tensor.substr(0, table_tensor.size() - std::string("weight").size());
    const TokenEmbedding& table = unwrapped(model.token_embedding());

    AtomicDirectory dir(out, options.overwrite);
    detail::copy_support_files(source.files.path, dir.path());

    WeightMap detached;
    for (const auto& [name, t] : model.weights())
        detached.emplace(name, t.detach());
    auto tensors = io::native_hf_tensors(config, detached);
    Json factors = Json::object();
    for (const auto& [name, t] : embedding_factor_tensors(table, prefix)) {
        factors[name] = t.sizes().vec();
        tensors.emplace_back(name, t.detach().contiguous());
    }
    if (const auto* pos = model.position_embedding(); pos && !dense_table(pos)) {
        Json pos_factors = Json::object();
        for (const auto& [name, t] : embedding_factor_tensors(*pos, "wpe.")) {
            pos_factors[name] = t.sizes().vec();
            tensors.emplace_back(name, t.detach().contiguous());
        }
        manifest["positions"]["factor_tensors"] = pos_factors;
    }
    write_safetensors(dir.path() / "model.safetensors", tensors,
                      {{"format", "pt"}, {"embedlab_method", table.kind()}}, progress);
    std::vector<std::string> files{"model.safetensors"};

    // A table trained from random initialisation is a method of its own.
    if (table.kind() != manifest.value("method", "")) {
        const auto factors = table.low_rank_factors();
        if (!factors || factors->fitted)
            throw InputError(label + ": the token table changed kind to " + table.kind() +
                             " during fine-tuning");
        const int64_t k = factors->Z.size(1);
        manifest["method"] = "lrf";
        manifest["parameters"] = {{"rank", k}};
        manifest["accounting"] =
            accounting_json(account_low_rank(LowRankKind::LRF, table.vocab_size(), table.dim(), k));
        manifest["fit"] = {{"initialisation", "random: Z ~ N(0, 1), P ~ N(0, 0.02^2 / k)"},
                           {"replaced", manifest.value("method", "")}};
        manifest.erase("reconstruction");
    } else if (manifest.contains("reconstruction") || manifest.contains("fit")) {
        // Issue 20 item 3: fine-tuning changed the table, so the source's reconstruction and
        // fit (spectrum, explained variance at the rank) describe the table before it; kept
        // only under that name.
        Json before = {{"note", "the compressed table before fine-tuning (finetuned_from); this table "
                                "was changed by training, and its reconstruction was not re-measured"}};
        for (const char* key : {"reconstruction", "fit"})
            if (manifest.contains(key)) {
                before[key] = manifest[key];
                manifest.erase(key);
            }
        manifest["before_finetuning"] = before;
    }
    manifest["factor_tensors"] = factors;
    manifest.erase("dense_export");

    Json lora = options.lora;
    if (const LoraAdapters* adapters = model.lora()) {
        const std::string file = "adapters.safetensors";
        write_safetensors(dir.path() / file, adapters->tensors(), {{"format", "pt"}});
        files.push_back(file);
        lora = adapters->json();
        if (options.lora.is_object())
            for (const char* key : {"targets", "seed"})
                if (options.lora.contains(key))
                    lora[key] = options.lora[key];
        lora["merged"] = false;
        lora["file"] = file;
    } else if (lora.is_object()) {
        lora["merged"] = true; // folded into the weights and factors; nothing extra to load
    }
    if (!lora.is_null())
        manifest["lora"] = lora;
    if (!options.finetune.is_null())
        manifest["finetune"] = options.finetune;
    const int64_t before =
        manifest.contains("model_params") ? manifest["model_params"].value("before", int64_t{0}) : int64_t{0};
    manifest["model_params"] = {{"before", before}, {"after", model.parameter_breakdown().total()}};
    manifest["finetuned_from"] = {{"path", fs::absolute(source.files.path).lexically_normal().string()},
                                  {"embedlab_json_sha256", sha256_file(source.files.path / "embedlab.json")}};
    manifest["weights_files"] = detail::file_digests(dir.path(), files);
    manifest["versions"] = detail::manifest_versions();
    manifest["created"] = detail::utc_now();
    manifest["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_file_atomic(dir.path() / "embedlab.json", manifest.dump(1) + "\n");
    dir.commit();
    return manifest;
}

} // namespace embedlab
