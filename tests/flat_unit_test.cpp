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
