// FLAT-LLM behind the compression unit (issue 59 item 4; engine/src/job/run_flat.cpp):
// its run record keeps its blocks, its directory reloads through the ordinary path with
// the narrowed shapes, and the manifest's listing of the tensors it changed is held
// against the file on load, with the table loader's messages.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "embedlab/experiment.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/resources.hpp"
#include "embedlab/results.hpp"
#include "embedlab/saved_summary.hpp"
#include "test_support.hpp"

namespace {

using FlatUnitJson = nlohmann::ordered_json;

// A short flat run of the bundled model: values at half their rank, no evaluation.
embedlab::CompressionRequest flat_unit_request()
{
    const std::string text = embedlab::default_sample_text_path().string();
    return {.model = embedlab::default_model_path().string(),
            .method = "flat",
            .remaining = 0.5,
            .calib_text = text,
            .samples = 4,
            .seqlen = 32};
}

std::string flat_unit_load_error(const std::filesystem::path& dir)
{
    try {
        embedlab::load_model(dir, {.need_tokenizer = false});
    } catch (const embedlab::InputError& e) {
        return e.what();
    }
    return "(loaded)";
}

void flat_unit_write_manifest(const std::filesystem::path& dir, const FlatUnitJson& manifest)
{
    std::ofstream(dir / "embedlab.json") << manifest.dump(1) << "\n";
}

std::string flat_unit_row_error(const FlatUnitJson& manifest)
{
    try {
        embedlab::summary_from_record(manifest, "dir");
    } catch (const embedlab::InputError& e) {
        return e.what();
    }
    return "(read)";
}

// The part flat narrows, counted here from gpt2's weights: V's third of c_attn (weight and
// bias) and the attention's c_proj weight; with the MLPs, c_fc (weight, bias) and their c_proj weight.
int64_t flat_unit_part_values(const embedlab::LanguageModel& m, bool mlp)
{
    const int64_t d = m.config().hidden_size;
    int64_t n = 0;
    for (int64_t l = 0; l < m.config().num_layers; ++l) {
        const auto w = [&](const std::string& name) {
            return m.weights().at("h." + std::to_string(l) + "." + name);
        };
        n += w("attn.c_attn.weight").size(0) * d + d + w("attn.c_proj.weight").numel();
        if (mlp)
            n += w("mlp.c_fc.weight").numel() + w("mlp.c_fc.bias").numel() + w("mlp.c_proj.weight").numel();
    }
    return n;
}

std::string flat_unit_shape(const std::vector<int64_t>& shape)
{
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i)
            out += ", ";
        out += std::to_string(shape[i]);
    }
    return out + "]";
}

} // namespace

// The run's record names the method and holds its blocks under embedlab.json's names,
// in the order run_json has always written them.
TEST(FlatUnit, RunRecordKeepsItsBlocks)
{
    const auto run = embedlab::run_compression(flat_unit_request());
    const auto j = embedlab::run_json(run);
    std::vector<std::string> keys;
    for (const auto& item : j.items())
        keys.push_back(item.key());
    const std::vector<std::string> expected{"format", "request",     "method",           "model_params",
                                            "layers", "calibration", "calibration_text", "summary"};
    EXPECT_EQ(keys, expected);
    EXPECT_EQ(j["method"], "flat");
    EXPECT_EQ(j["model_params"], embedlab::flat_params_json(*run.flat));
    EXPECT_EQ(j["summary"]["part"], "attention_values");
    EXPECT_EQ(&run.compressed_model(), run.flat->model.get());
}

// Saved, the directory reloads through load_model at the narrowed shapes; a manifest
// whose changed_tensors disagree with model.safetensors is refused, naming the tensor
// and both shapes as a table's factor_tensors are.
TEST(FlatUnit, ChangedTensorsAreHeldAgainstTheFileOnLoad)
{
    embedlab::test::TempDir dir;
    const auto run = embedlab::run_compression(flat_unit_request());
    const auto out = dir / "flat";
    const auto manifest = embedlab::export_run(run, out);
    ASSERT_EQ(manifest["method"], "flat");
    ASSERT_FALSE(manifest["changed_tensors"].empty());

    const auto back = embedlab::load_model(out, {.need_tokenizer = false});
    EXPECT_EQ(back.model->config().value_head_dims, run.flat->model->config().value_head_dims);
    for (const auto& [name, shape] : manifest["changed_tensors"].items())
        EXPECT_EQ(back.model->weights().at(name).sizes().vec(), shape.get<std::vector<int64_t>>()) << name;

    const std::string where = (out / "embedlab.json").string();
    const std::string name = manifest["changed_tensors"].begin().key();
    const auto stored = manifest["changed_tensors"][name].get<std::vector<int64_t>>();
    auto listed = stored;
    listed[0] += 1;
    auto wrong_shape = manifest;
    wrong_shape["changed_tensors"][name] = listed;
    flat_unit_write_manifest(out, wrong_shape);
    EXPECT_EQ(flat_unit_load_error(out), where + ": says '" + name + "' has shape " +
                                             flat_unit_shape(listed) + " but model.safetensors stores " +
                                             flat_unit_shape(stored));

    auto missing = manifest;
    missing["changed_tensors"]["h.0.attn.narrowed.weight"] = {1, 2};
    flat_unit_write_manifest(out, missing);
    EXPECT_EQ(flat_unit_load_error(out),
              where + ": lists tensor 'h.0.attn.narrowed.weight' but model.safetensors does not have it");

    auto not_a_map = manifest;
    not_a_map["changed_tensors"] = "all of them";
    flat_unit_write_manifest(out, not_a_map);
    EXPECT_EQ(flat_unit_load_error(out), where + ": changed_tensors must map tensor names to shapes");

    flat_unit_write_manifest(out, manifest); // as written: loads again
    EXPECT_EQ(flat_unit_load_error(out), "(loaded)");
}

// The table path and flat's behind the same export: each refuses a dense copy with its
// own reason, before anything is written.
TEST(FlatUnit, ExportRefusesADenseCopyBeforeWriting)
{
    embedlab::test::TempDir dir;
    const auto run = embedlab::run_compression(flat_unit_request());
    try {
        embedlab::export_run(run, dir / "dense", {.dense = true});
        FAIL() << "wrote a dense copy of a flat run";
    } catch (const embedlab::InputError& e) {
        EXPECT_EQ(std::string(e.what()), (dir / "dense").string() +
                                             ": a dense copy does not apply to flat: model.safetensors "
                                             "already holds standard tensors at the narrowed shapes");
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "dense"));
}

// Issue 64: a flat directory's embedlab.json keeps its row's figures before narrowing
// (storage.params_before, bytes_before) and its settings' words (settings), so the row read
// back from it (summary_from_record, load_run's Run.summary) is the row of the run that wrote
// it, timing and host aside: evaluated with its divergence, narrowing the MLPs for a target,
// and narrowing nothing (remaining 1: no tensor changed, the part's bytes still counted at the
// model's width). A record written before them is refused, naming what it lacks.
TEST(FlatUnit, SavedRecordGivesTheRowOfTheRunThatWroteIt)
{
    embedlab::test::TempDir dir;
    auto evaluated = flat_unit_request();
    evaluated.eval_text = evaluated.calib_text;
    evaluated.eval_tokens = 256, evaluated.ctx = 64, evaluated.divergence = true;
    auto target = flat_unit_request();
    target.remaining = 0, target.target_ratio = 0.8; // narrows the MLPs too
    target.samples = 24, target.seqlen = 64;         // enough tokens for the Nystrom solve
    auto whole = flat_unit_request();
    whole.remaining = 1;
    const std::vector<std::pair<std::string, embedlab::CompressionRequest>> cases{
        {"evaluated", evaluated}, {"target", target}, {"whole", whole}};
    for (const auto& [name, request] : cases) {
        SCOPED_TRACE(name);
        const auto run = embedlab::run_compression(request);
        const bool mlp = run.flat->options.mlp;
        EXPECT_EQ(mlp, name == "target");
        const auto out = dir / name;
        const auto manifest = embedlab::export_run(run, out);
        const auto& storage = manifest["storage"];
        EXPECT_EQ(manifest["changed_tensors"].empty(), name == "whole");
        EXPECT_EQ(storage["bytes_per_value"], 4); // float32, as the model holds them
        EXPECT_EQ(storage["params_before"].get<int64_t>(), flat_unit_part_values(*run.model.model, mlp));
        EXPECT_EQ(storage["params_before"].get<int64_t>(), run.summary.params_before);
        EXPECT_EQ(storage["bytes_before"].get<double>(),
                  2.0 * run.summary.params_before); // the source is f16
        EXPECT_EQ(manifest["settings"], run.summary.parameters);
        const std::string words = name == "target"  ? "target 0.8, remaining "
                                  : name == "whole" ? "remaining 1, iprs, ranks "
                                                    : "remaining 0.5, iprs, ranks ";
        EXPECT_EQ(manifest["settings"].get<std::string>().rfind(words, 0), 0u) << manifest["settings"];

        auto wrote = embedlab::summary_json(run.summary);
        auto back = embedlab::summary_json(embedlab::summary_from_record(manifest, out.string()));
        EXPECT_TRUE(back["seconds"].is_null());
        EXPECT_EQ(back["host"], "");
        EXPECT_EQ(back["model"], manifest["source"]["path"]);
        EXPECT_TRUE(
            std::filesystem::equivalent(back["model"].get<std::string>(), wrote["model"].get<std::string>()));
        if (request.evaluates()) {
            EXPECT_TRUE(std::filesystem::equivalent(back["eval_text"].get<std::string>(),
                                                    wrote["eval_text"].get<std::string>()));
            EXPECT_GT(back["window_kl"].size(), 1u);
        }
        for (auto* row : {&wrote, &back})
            for (const char* unrecorded : {"seconds", "host", "model", "eval_text"})
                row->erase(unrecorded);
        EXPECT_EQ(back.dump(1), wrote.dump(1));
        EXPECT_FALSE(back["model_bytes_after"].is_null());
    }

    // Written before 2026-11-29: neither field, or one of them.
    auto old = embedlab::export_run(embedlab::run_compression(flat_unit_request()), dir / "old");
    old["storage"].erase("params_before");
    old["storage"].erase("bytes_before");
    const std::string tail =
        " (the part's parameters before narrowing and the settings' words, which flat records "
        "written before 2026-11-29 do not keep); its figures are in model_params, storage and "
        "evaluation; compress it again to read its row back";
    auto without_settings = old;
    without_settings.erase("settings");
    EXPECT_EQ(
        flat_unit_row_error(without_settings),
        "dir: flat's record has no results row: embedlab.json lacks storage.params_before and settings" +
            tail);
    EXPECT_EQ(flat_unit_row_error(old),
              "dir: flat's record has no results row: embedlab.json lacks storage.params_before" + tail);
    auto without_words = without_settings;
    without_words["storage"]["params_before"] = 1;
    EXPECT_EQ(flat_unit_row_error(without_words),
              "dir: flat's record has no results row: embedlab.json lacks settings" + tail);
}
