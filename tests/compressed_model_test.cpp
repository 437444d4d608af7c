// The compressed-model directory: save -> load round trips for pca, svd and tt on
// tied (gpt2) and untied (llama) models, the dense export, and tampered manifests.
#include <nlohmann/json.hpp>

#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/model_files.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/tensor_train.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

LoadedModel load_weights_only(const fs::path& dir)
{
    LoadOptions o;
    o.need_tokenizer = false;
    return load_model(dir, o);
}

const torch::Tensor& table_of(const LanguageModel& m)
{
    return m.weights().at(m.config().arch == Architecture::GPT2 ? "wte.weight" : "model.embed_tokens.weight");
}

std::vector<CompressionSpec> specs()
{
    return {{.method = "pca", .rank = 5},
            {.method = "svd", .rank = 3},
            {.method = "tt", .shape = {4, 4}, .ranks = {1, 2, 1}},
            {.method = "tt", .shape = {2, 2, 4}, .eps = 0.5}, // per-token ranks (tt.token_ranks)
            {.method = "tt", .shape = {2, 2, 4}, .eps = 0.5, .uniform_ranks = true}};
}

std::string load_error(const fs::path& dir)
{
    return test::input_error_of([&] { load_weights_only(dir); }, "no error");
}

// Copies `good` to a sibling `name`, edits its embedlab.json, and returns the load error.
template <class Edit>
std::string tampered_load_error(const fs::path& good, const std::string& name, Edit&& edit)
{
    const auto dir = good.parent_path() / name;
    fs::copy(good, dir);
    auto m = nlohmann::json::parse(test::read_text(dir / "embedlab.json"));
    edit(m);
    write_file_atomic(dir / "embedlab.json", m.dump());
    return load_error(dir);
}

} // namespace

class CompressedModelRoundTrip : public ::testing::TestWithParam<Architecture> {};

TEST_P(CompressedModelRoundTrip, SaveLoadAndDenseExportGiveTheSameLogits)
{
    test::TempDir tmp;
    const auto src_dir = test::write_tiny_hf_model(tmp / "src", GetParam());
    auto src = load_weights_only(src_dir);
    const auto ids = torch::tensor({{1, 7, 3, 49, 0, 22}}, torch::kLong);
    int index = 0;
    for (const auto& spec : specs()) {
        SCOPED_TRACE(spec.method + (spec.eps > 0 ? " eps" : "") + (spec.uniform_ranks ? " uniform" : ""));
        const auto c = compress_table(table_of(*src.model), spec, src.model->parameter_breakdown().total());
        const fs::path out = tmp / ("out-" + std::to_string(index++));
        const auto manifest = save_compressed_model(src, c, out, {.dense = true});
        EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
        EXPECT_EQ(manifest["method"], spec.method);
        EXPECT_EQ(manifest["source"]["files"][0]["sha256"], sha256_file(src_dir / "model.safetensors"));

        // In-memory compressed model, the reloaded directory and the dense export agree.
        LanguageModel in_memory(src.model->config(), src.model->weights(), "in-memory");
        in_memory.set_token_embedding(c.embedding);
        const auto expected = in_memory.logits(ids);
        auto back = load_weights_only(out);
        EXPECT_EQ(back.model->token_embedding().kind(), spec.method);
        EXPECT_EQ(back.model->weights().count(GetParam() == Architecture::GPT2 ? "wte.weight"
                                                                               : "model.embed_tokens.weight"),
                  0u); // no dense copy kept
        EXPECT_TRUE(torch::equal(back.model->logits(ids), expected));
        EXPECT_EQ(back.model->parameter_breakdown().token_embedding, c.accounting.params_after);
        if (spec.method == "tt") {
            const bool per_token = spec.eps > 0 && !spec.uniform_ranks;
            EXPECT_EQ(c.accounting.per_token_ranks, per_token);
            const auto* tt = dynamic_cast<const TensorTrainTokenEmbedding*>(&back.model->token_embedding());
            ASSERT_NE(tt, nullptr);
            EXPECT_EQ(tt->per_token_ranks(), per_token);
            if (per_token) {
                EXPECT_TRUE(
                    torch::equal(tt->token_ranks(),
                                 dynamic_cast<const TensorTrainTokenEmbedding&>(*c.embedding).token_ranks()));
            }
        }
        auto dense = load_weights_only(out / "dense");
        EXPECT_EQ(dense.model->token_embedding().kind(), "dense");
        EXPECT_TRUE(torch::allclose(dense.model->logits(ids), expected, 1e-4, 1e-4));
        // The original model's logits differ: the compression was lossy.
        EXPECT_FALSE(torch::allclose(src.model->logits(ids), expected, 1e-4, 1e-4));
    }
}

INSTANTIATE_TEST_SUITE_P(TiedAndUntied, CompressedModelRoundTrip,
                         ::testing::Values(Architecture::GPT2, Architecture::Llama),
                         [](const auto& info) { return std::string(architecture_name(info.param)); });

TEST(CompressedModel, Gpt2PositionTableCompressesAndRoundTrips)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::GPT2));
    const auto& wpe = src.model->weights().at("wpe.weight");
    const CompressionSpec spec{.method = "tt", .shape = {4, 4}, .ranks = {1, 3, 1}};
    const auto tokens = compress_table(table_of(*src.model), spec);
    const auto positions = compress_table(wpe, spec);
    const auto manifest =
        save_compressed_model(src, tokens, tmp / "out", {.dense = true, .positions = &positions});
    EXPECT_EQ(manifest["positions"]["factor_tensors"].size(), 2u);
    EXPECT_EQ(manifest["model_params"]["after"].get<int64_t>(),
              src.model->parameter_breakdown().total() - table_of(*src.model).numel() - wpe.numel() +
                  tokens.accounting.params_after + positions.accounting.params_after);

    LanguageModel in_memory(src.model->config(), src.model->weights(), "in-memory");
    in_memory.set_token_embedding(tokens.embedding);
    in_memory.set_position_embedding(positions.embedding);
    const auto ids = torch::tensor({{1, 7, 3, 49, 0, 22, 5, 5, 5}}, torch::kLong);
    auto back = load_weights_only(tmp / "out");
    EXPECT_EQ(back.model->weights().count("wpe.weight"), 0u);
    ASSERT_NE(back.model->position_embedding(), nullptr);
    EXPECT_EQ(back.model->position_embedding()->kind(), "tt");
    EXPECT_EQ(back.model->parameter_breakdown().position_embedding, positions.accounting.params_after);
    EXPECT_TRUE(torch::equal(back.model->logits(ids), in_memory.logits(ids)));
    auto dense = load_weights_only(tmp / "out" / "dense");
    EXPECT_TRUE(torch::allclose(dense.model->logits(ids), in_memory.logits(ids), 1e-4, 1e-4));
    // Only the token table compressed: the model differs.
    LanguageModel tokens_only(src.model->config(), src.model->weights(), "tokens-only");
    tokens_only.set_token_embedding(tokens.embedding);
    EXPECT_FALSE(torch::allclose(tokens_only.logits(ids), in_memory.logits(ids), 1e-4, 1e-4));
}

TEST(CompressedModel, ReconstructionMetricsAreExactForALosslessFit)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::GPT2));
    const auto& E = table_of(*src.model);
    const auto full = compress_table(E, {.method = "pca", .rank = 16});
    EXPECT_LT(full.reconstruction.relative_frobenius, 1e-5);
    EXPECT_NEAR(full.reconstruction.mean_cosine, 1.0, 1e-6);
    const auto lossy = compress_table(E, {.method = "svd", .rank = 2});
    EXPECT_GT(lossy.reconstruction.relative_frobenius, 0.1);
    EXPECT_LT(lossy.reconstruction.worst_cosine, lossy.reconstruction.mean_cosine);
    // The worst row really is the worst one.
    const auto w = lossy.reconstruction.worst_row;
    const auto row = lossy.embedding->lookup(torch::tensor({w}, torch::kLong))[0];
    EXPECT_NEAR(torch::cosine_similarity(row, E[w], 0).item<double>(), lossy.reconstruction.worst_cosine,
                1e-5);
    EXPECT_THROW(compress_table(E, {.method = "zip", .rank = 2}), InputError);
}

TEST(CompressedModel, ExistingOutputIsNotOverwrittenAndFailuresLeaveNothing)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::GPT2));
    const auto c = compress_table(table_of(*src.model), {.method = "pca", .rank = 4});
    fs::create_directory(tmp / "taken");
    try {
        save_compressed_model(src, c, tmp / "taken");
        FAIL() << "expected an error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
    }
    save_compressed_model(src, c, tmp / "taken", {.overwrite = true});
    EXPECT_TRUE(fs::exists(tmp / "taken" / "embedlab.json"));
    // A cancelled save leaves neither the directory nor a temporary.
    EXPECT_THROW(save_compressed_model(src, c, tmp / "cancelled", {}, [](int64_t, int64_t) { return false; }),
                 Cancelled);
    EXPECT_FALSE(fs::exists(tmp / "cancelled"));
    for (const auto& e : fs::directory_iterator(tmp.path()))
        EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
    // A compressed model is not compressed again.
    auto again = load_weights_only(tmp / "taken");
    EXPECT_THROW(save_compressed_model(again, c, tmp / "twice"), InputError);
}

TEST(CompressedModel, ManifestThatDisagreesWithTheTensorsIsRefused)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::Llama));
    const auto c = compress_table(table_of(*src.model), {.method = "pca", .rank = 4});
    save_compressed_model(src, c, tmp / "good");
    auto tamper = [&](const std::string& name, auto&& edit) {
        return tampered_load_error(tmp / "good", name, edit);
    };
    auto rank = tamper("rank", [](auto& m) { m["parameters"]["rank"] = 5; });
    EXPECT_NE(rank.find("embedlab.json"), std::string::npos) << rank;
    EXPECT_NE(rank.find("model.embed_tokens.pca.Z"), std::string::npos) << rank;
    auto method = tamper("method", [](auto& m) {
        m["method"] = "svd";
        m["parameters"]["method"] = "svd";
    });
    EXPECT_NE(method.find("model.embed_tokens.svd.Z"), std::string::npos) << method;
    // The two places a method is named must agree (issue 35 item 13).
    auto disagree = tamper("disagree", [](auto& m) { m["method"] = "svd"; });
    EXPECT_NE(disagree.find("parameters.method \"pca\" differs from method 'svd'"), std::string::npos)
        << disagree;
    auto listed = tamper("listed", [](auto& m) { m["factor_tensors"]["model.embed_tokens.pca.Q"] = {1}; });
    EXPECT_NE(listed.find("does not have it"), std::string::npos) << listed;
    auto version = tamper("version", [](auto& m) { m["format_version"] = 99; });
    EXPECT_NE(version.find("format_version"), std::string::npos) << version;
    auto missing = tamper("missing", [](auto& m) { m.erase("parameters"); });
    EXPECT_NE(missing.find("'parameters'"), std::string::npos) << missing;
    auto positions = tamper("positions", [](auto& m) { m["positions"] = m; });
    EXPECT_NE(positions.find("no learned position table"), std::string::npos) << positions;
    // Lying parameters fail in the manifest check, before any tensor is touched.
    auto tt = tamper("tt", [](auto& m) {
        m["method"] = "tt";
        m["parameters"] = {{"shape", {2, int64_t{1} << 62}}, {"ranks", {1, 2, 1}}};
    });
    EXPECT_NE(tt.find("embedlab.json: tensor-train shape"), std::string::npos) << tt;
    EXPECT_NE(tt.find("has product greater than d"), std::string::npos) << tt;
    auto hidden = tamper("hidden", [](auto& m) {
        m["method"] = "fourier";
        m["parameters"] = {{"mlp", "geglu"}, {"norm", false}, {"hidden_ratio", 1e300}};
    });
    EXPECT_NE(hidden.find("hidden_ratio must be in (0, 64"), std::string::npos) << hidden;
    auto mistyped =
        tamper("mistyped", [](auto& m) { m["factor_tensors"]["model.embed_tokens.pca.Z"] = "4x4"; });
    EXPECT_NE(mistyped.find("must be a list of integers"), std::string::npos) << mistyped;
    write_file_atomic(tmp / "good" / "embedlab.json", "{not json");
    EXPECT_NE(load_error(tmp / "good").find("not valid JSON"), std::string::npos);
}

// Issue 38 part 2: factors stored at a ggml type (--store) are written as the bytes the
// embedding was read back from, so a reload gives the same rows bit for bit; a manifest
// whose stored_types lie is refused naming the tensor; an unstored run cannot be saved
// as stored.
TEST(CompressedModel, StoredFactorsReloadToTheSameRowsAndLyingTypesAreRefused)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::Llama));
    auto c = compress_table(table_of(*src.model), {.method = "pca", .rank = 4, .store = "f16"});
    EXPECT_THROW(save_compressed_model(src, c, tmp / "unstored"), std::logic_error);
    const int64_t V = src.model->config().vocab_size, d = src.model->config().hidden_size;
    const auto all = torch::arange(V, torch::kLong);
    const auto before = c.embedding->lookup(all).clone();
    const auto bytes = store_factors(c, src.model->config());
    EXPECT_EQ(c.stored_types.size(), 3u) << c.stored_types.dump(); // mu, Z, P: every float factor
    EXPECT_EQ(bytes.values, 2 * (d + V * 4 + 4 * d));
    EXPECT_EQ(bytes.ids, 0);
    const auto stored_rows = c.embedding->lookup(all);
    EXPECT_FALSE(torch::equal(stored_rows, before)) << "f16 rounds the factors";
    EXPECT_LT((stored_rows - before).abs().max().item<double>(), 1e-2);
    save_compressed_model(src, c, tmp / "good");
    auto back = load_weights_only(tmp / "good");
    EXPECT_TRUE(torch::equal(back.model->token_embedding().lookup(all), stored_rows));
    const auto manifest = nlohmann::json::parse(test::read_text(tmp / "good" / "embedlab.json"));
    EXPECT_EQ(manifest["stored_types"]["model.embed_tokens.pca.Z"], "f16");
    EXPECT_EQ(manifest["parameters"]["store"], "f16");

    auto tamper = [&](const std::string& name, auto&& edit) {
        return tampered_load_error(tmp / "good", name, edit);
    };
    const auto unknown =
        tamper("unknown", [](auto& m) { m["stored_types"]["model.embed_tokens.pca.Q"] = "f16"; });
    EXPECT_NE(unknown.find("stored_types names 'model.embed_tokens.pca.Q', which is not a tensor of method "
                           "'pca'"),
              std::string::npos)
        << unknown;
    const auto type = tamper("type", [](auto& m) { m["stored_types"]["model.embed_tokens.pca.Z"] = "q9_9"; });
    EXPECT_NE(type.find("stored type \"q9_9\" of 'model.embed_tokens.pca.Z' is not one EmbedLab reads"),
              std::string::npos)
        << type;
    const auto misfit =
        tamper("misfit", [](auto& m) { m["stored_types"]["model.embed_tokens.pca.Z"] = "q8_0"; });
    EXPECT_NE(misfit.find("is stored as q8_0, whose blocks of 32 values do not divide its rows"),
              std::string::npos)
        << misfit;
    const auto dropped =
        tamper("dropped", [](auto& m) { m["stored_types"].erase("model.embed_tokens.pca.Z"); });
    EXPECT_NE(dropped.find("'model.embed_tokens.pca.Z' has shape"), std::string::npos) << dropped;
}

// Per-token TT ranks are a tensor the manifest announces; a file that says otherwise is refused.
TEST(CompressedModel, PerTokenTensorTrainRanksMustBeAnnounced)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::Llama));
    const auto c = compress_table(table_of(*src.model), {.method = "tt", .shape = {2, 2, 4}, .eps = 0.4});
    save_compressed_model(src, c, tmp / "good");
    auto tamper = [&](const std::string& name, auto&& edit) {
        return tampered_load_error(tmp / "good", name, edit);
    };
    EXPECT_EQ(load_error(tmp / "good"), "no error");
    auto mode = tamper("mode", [](auto& m) { m["parameters"]["rank_mode"] = "sometimes"; });
    EXPECT_NE(mode.find("rank_mode must be"), std::string::npos) << mode;
    // Read as uniform, the stored ranks would be left over (and the padding read).
    auto uniform = tamper("uniform", [](auto& m) { m["parameters"]["rank_mode"] = "uniform"; });
    EXPECT_NE(uniform.find("tt.token_ranks"), std::string::npos) << uniform;
}

namespace {

// Counts the head's calls into a compressed table.
class CountingEmbedding final : public TokenEmbedding {
public:
    explicit CountingEmbedding(std::shared_ptr<const TokenEmbedding> base) : base_(std::move(base)) {}
    int64_t vocab_size() const override { return base_->vocab_size(); }
    int64_t dim() const override { return base_->dim(); }
    torch::Tensor lookup(const torch::Tensor& ids) const override { return base_->lookup(ids); }
    torch::Tensor project(const torch::Tensor& hidden) const override
    {
        ++projects;
        return base_->project(hidden);
    }
    torch::Tensor rebuilt_rows() const override
    {
        ++rebuilds;
        return offer_rows ? base_->rebuilt_rows() : torch::Tensor();
    }
    int64_t parameter_count() const override { return base_->parameter_count(); }
    std::string kind() const override { return base_->kind(); }
    mutable int projects = 0, rebuilds = 0;
    bool offer_rows = true; // false: the head goes through project() per chunk

private:
    std::shared_ptr<const TokenEmbedding> base_;
};

} // namespace

// Issue 20 item 8: tt, lle and fourier (through its MLP) rebuild their V rows for a
// tied head; perplexity's row chunks share one rebuild per evaluation, with the same logits.
TEST(CompressedModel, TiedHeadRebuildsItsRowsOncePerEvaluation)
{
    test::TempDir tmp;
    auto lm = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::GPT2));
    auto& model = *lm.model;
    ASSERT_TRUE(model.config().tied_embeddings);
    const torch::Tensor table = table_of(model).clone();
    const int64_t V = table.size(0);
    auto split = std::make_shared<FrequencySplit>();
    split->counts.assign(static_cast<size_t>(V), 0);
    for (int64_t v = 0; v < V; ++v)
        (v % 2 == 0 ? split->common : split->rare).push_back(v);
    const std::vector<CompressionSpec> rebuilding{{.method = "tt", .shape = {4, 4}, .ranks = {1, 2, 1}},
                                                  {.method = "lle", .split = split, .k = 3},
                                                  {.method = "fourier", .mlp = "geglu", .steps = 3}};
    std::vector<int32_t> ids(600);
    for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int32_t>((i * 7 + i / 5) % static_cast<size_t>(V));
    torch::manual_seed(3);
    const auto hidden = torch::randn({9, table.size(1)});
    for (const auto& spec : rebuilding) {
        SCOPED_TRACE(spec.method);
        const auto counting = std::make_shared<CountingEmbedding>(compress_table(table, spec).embedding);
        model.set_token_embedding(counting);
        const auto rows = model.head_rows();
        ASSERT_TRUE(rows.defined());
        EXPECT_LT((model.head(hidden, rows) - model.head(hidden)).abs().max().item<double>(), 1e-5);
        counting->projects = counting->rebuilds = 0;
        const auto ppl = evaluate_perplexity(model, ids, {.ctx = 16, .batch_windows = 2}).ppl;
        EXPECT_EQ(counting->rebuilds, 1);
        EXPECT_EQ(counting->projects, 0);
        // The same number as one head call per chunk through project().
        counting->offer_rows = false;
        const auto per_chunk = evaluate_perplexity(model, ids, {.ctx = 16, .batch_windows = 2}).ppl;
        EXPECT_GT(counting->projects, 1);
        EXPECT_NEAR(ppl, per_chunk, 1e-6 * per_chunk);
    }
    // Low rank needs no rebuild: its head multiplies through the factors.
    model.set_token_embedding(compress_table(table, {.method = "pca", .rank = 4}).embedding);
    EXPECT_FALSE(model.head_rows().defined());
}

// Issue 24 item 15: a compressed table's own checks (here lle's id lists) name the
// file they come from.
TEST(CompressedModel, LleTableErrorsNameTheFile)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::GPT2));
    const torch::Tensor table = table_of(*src.model);
    auto split = std::make_shared<FrequencySplit>();
    split->counts.assign(static_cast<size_t>(table.size(0)), 0);
    for (int64_t v = 0; v < table.size(0); ++v)
        (v % 2 == 0 ? split->common : split->rare).push_back(v);
    const auto c = compress_table(table, {.method = "lle", .split = split, .k = 3});
    save_compressed_model(src, c, tmp / "lle");
    auto tensors = load_safetensors(tmp / "lle" / "model.safetensors");
    std::vector<std::pair<std::string, torch::Tensor>> rewritten;
    for (auto& [name, t] : tensors) {
        if (name == "wte.lle.common_ids") { // the first common id listed twice
            t = t.clone();
            t[1] = t[0];
        }
        rewritten.emplace_back(name, t);
    }
    ASSERT_TRUE(tensors.count("wte.lle.common_ids"));
    write_safetensors(tmp / "lle" / "model.safetensors", rewritten);
    try {
        load_model(tmp / "lle", {.need_tokenizer = false, .verify = false});
        ADD_FAILURE() << "a common id listed twice was accepted";
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("lle/model.safetensors: "), std::string::npos) << what;
        EXPECT_NE(what.find("appears twice"), std::string::npos) << what;
    }
}

namespace {

// Rewrites a saved directory's factors and manifest listing with `edit` (name -> tensor).
template <class Edit> void rewrite_factors(const fs::path& dir, Edit&& edit)
{
    auto tensors = load_safetensors(dir / "model.safetensors");
    std::map<std::string, torch::Tensor> edited(tensors.begin(), tensors.end());
    edit(edited);
    std::vector<std::pair<std::string, torch::Tensor>> out(edited.begin(), edited.end());
    write_safetensors(dir / "model.safetensors", out);
    auto m = nlohmann::ordered_json::parse(test::read_text(dir / "embedlab.json"));
    nlohmann::ordered_json listed = nlohmann::ordered_json::object();
    for (const auto& [name, t] : edited)
        if (name.rfind("model.embed_tokens.", 0) == 0 && name != "model.embed_tokens.weight")
            listed[name] = t.sizes().vec();
    m["factor_tensors"] = listed;
    write_file_atomic(dir / "embedlab.json", m.dump(1));
}

LoadedModel load_unverified(const fs::path& dir)
{
    return load_model(dir, {.need_tokenizer = false, .verify = false});
}

} // namespace

// Issue 36 item 1: directories written before the packed layouts, per-token tt cores
// padded to each position's largest rank and lle ids as int64 with the rare list
// stored (even out of order), still load, to the same rows and the same counts.
TEST(CompressedModel, DirectoriesWithPaddedCoresAndInt64IdsStillLoad)
{
    test::TempDir tmp;
    auto src = load_weights_only(test::write_tiny_hf_model(tmp / "src", Architecture::Llama));
    const torch::Tensor table = table_of(*src.model);
    const int64_t V = table.size(0);
    const auto ids = torch::arange(V, torch::kLong);
    const std::string p = "model.embed_tokens.";

    const auto tt = compress_table(table, {.method = "tt", .shape = {2, 2, 4}, .eps = 0.4});
    save_compressed_model(src, tt, tmp / "tt");
    auto stored = load_safetensors(tmp / "tt" / "model.safetensors");
    ASSERT_TRUE(stored.count(p + "tt.packed_core0"));
    EXPECT_FALSE(stored.count(p + "tt.core0"));
    EXPECT_EQ(stored.at(p + "tt.packed_core0").dim(), 1);
    const auto& emb = dynamic_cast<const TensorTrainTokenEmbedding&>(*tt.embedding);
    rewrite_factors(tmp / "tt", [&](auto& t) {
        const auto padded = emb.cores();
        for (size_t k = 0; k < padded.size(); ++k) {
            t.erase(p + "tt.packed_core" + std::to_string(k));
            t[p + "tt.core" + std::to_string(k)] = padded[k];
        }
    });
    const auto old_tt = load_unverified(tmp / "tt");
    EXPECT_TRUE(torch::equal(old_tt.model->token_embedding().lookup(ids), emb.lookup(ids)));
    EXPECT_EQ(old_tt.model->token_embedding().parameter_count(), tt.accounting.params_after);

    auto split = std::make_shared<FrequencySplit>();
    split->counts.assign(static_cast<size_t>(V), 0);
    for (int64_t v = 0; v < V; ++v)
        (v % 3 == 0 ? split->common : split->rare).push_back(v);
    const auto lle = compress_table(table, {.method = "lle", .split = split, .k = 3});
    save_compressed_model(src, lle, tmp / "lle");
    stored = load_safetensors(tmp / "lle" / "model.safetensors");
    EXPECT_FALSE(stored.count(p + "lle.rare_ids")); // the complement of the common ids
    const auto header_of = [](const fs::path& f) {
        const auto bytes = test::read_text(f);
        return parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f");
    };
    for (const auto& e : header_of(tmp / "lle" / "model.safetensors").entries) {
        if (e.name == p + "lle.common_ids" || e.name == p + "lle.neighbour_ids") {
            EXPECT_EQ(e.dtype, "I16") << e.name; // V <= 32768: ids fit int16
        }
    }
    const auto& fit = dynamic_cast<const PartialSparseTokenEmbedding&>(*lle.embedding).fit();
    // As written before: int64 ids, and the rare list, here in reverse order.
    const auto reverse = torch::arange(fit.rare_ids.size(0) - 1, -1, -1, torch::kLong);
    rewrite_factors(tmp / "lle", [&](auto& t) {
        t[p + "lle.common_ids"] = fit.common_ids.to(torch::kLong);
        t[p + "lle.rare_ids"] = fit.rare_ids.index_select(0, reverse);
        t[p + "lle.neighbour_ids"] = fit.neighbour_ids.to(torch::kLong).index_select(0, reverse);
        t[p + "lle.weights"] = fit.weights.index_select(0, reverse);
        t[p + "lle.norms"] = fit.norms.index_select(0, reverse);
    });
    for (const auto& e : header_of(tmp / "lle" / "model.safetensors").entries) {
        if (e.name == p + "lle.common_ids") {
            EXPECT_EQ(e.dtype, "I64");
        }
    }
    const auto old_lle = load_unverified(tmp / "lle");
    EXPECT_TRUE(torch::equal(old_lle.model->token_embedding().lookup(ids), lle.embedding->lookup(ids)));
    EXPECT_EQ(old_lle.model->token_embedding().parameter_count(), lle.accounting.params_after);
}
