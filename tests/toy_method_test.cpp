// Issue 37's proof that a method is one unit: a toy method (a Gaussian random
// projection, E ~ (E R) pinv(R)) registered from this file alone runs through the
// CLI's flag parser, the request's JSON form, run_compression, export_run, reload and
// eval, with no other file knowing it. Issue 59 item 1: it stores itself in a form of
// its own (randproj.ER, randproj.pinvR: names no other method uses), which the loader
// checks and rebuilds, and its embedding exports to ONNX. Its own executable:
// registering changes the registry for the rest of the process.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/onnx_export.hpp"
#include "embedlab/stored_form.hpp"
#include "embedlab/table_method.hpp"
#include "help.hpp"
#include "method_flags.hpp"
#include "onnx_runtime.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

namespace {

using embedlab::test::TempDir;

// The toy's rank is the projection's width: its own label and help (issue 59).
embedlab::FieldDoc toy_rank_doc()
{
    embedlab::FieldDoc rank = embedlab::default_field_doc("rank");
    rank.label = "Projection width";
    rank.help = "columns of the Gaussian projection R";
    return rank;
}

// The toy's registry row: its one field, its check and its words; stored in its own
// form "randproj" (below).
embedlab::MethodDescriptor toy_row()
{
    return {
        .name = "randproj",
        .part = embedlab::CompressedPart::TokenEmbedding,
        .summary = "a Gaussian random projection of the rows (a test's toy)",
        .tied_head_from_factors = true,
        .stored_as = "randproj",
        .fields = {"rank"},
        .check =
            [](const embedlab::CompressionRequest& r, int64_t d, const embedlab::RequestFail& fail) {
                if (r.rank < 1 || (d > 0 && r.rank > d))
                    fail("rank", std::to_string(r.rank) + " is outside 1..d");
            },
        .describe =
            [](const embedlab::CompressionRequest& r) { return "randproj rank " + std::to_string(r.rank); },
        .field_docs = {{"rank", toy_rank_doc()}},
        .example = R"({"rank": 6})"};
}

// The toy's table: the low-rank product of the projected rows E R [V, r] and pinv(R)
// [r, d], which it stores under its own names and exports through the low-rank graph.
class RandomProjectionEmbedding final : public embedlab::TokenEmbedding {
public:
    explicit RandomProjectionEmbedding(const embedlab::LowRankFit& fit) : product_(fit) {}
    int64_t vocab_size() const override { return product_.vocab_size(); }
    int64_t dim() const override { return product_.dim(); }
    torch::Tensor lookup(const torch::Tensor& ids) const override { return product_.lookup(ids); }
    torch::Tensor project(const torch::Tensor& hidden) const override { return product_.project(hidden); }
    int64_t parameter_count() const override { return product_.parameter_count(); }
    std::string kind() const override { return "randproj"; }
    std::vector<std::pair<std::string, torch::Tensor>> stored_tensors() const override
    {
        return {{"randproj.ER", product_.Z()}, {"randproj.pinvR", product_.P()}};
    }
    std::string onnx_lookup(embedlab::onnx::Graph& graph, const std::string& ids) const override
    {
        return product_.onnx_lookup(graph, ids);
    }
    std::string onnx_project(embedlab::onnx::Graph& graph, const std::string& hidden) const override
    {
        return product_.onnx_project(graph, hidden);
    }

private:
    embedlab::LowRankTokenEmbedding product_;
};

std::shared_ptr<const RandomProjectionEmbedding> projection_embedding(torch::Tensor ER, torch::Tensor pinvR)
{
    embedlab::LowRankFit fit{.kind = embedlab::LowRankKind::LRF, .rank = ER.size(1)};
    fit.mu = torch::zeros({pinvR.size(1)}, torch::kFloat32);
    fit.Z = std::move(ER);
    fit.P = std::move(pinvR);
    return std::make_shared<RandomProjectionEmbedding>(fit);
}

// The toy's stored form: its rank, checked against the table's width, and its two tensors.
embedlab::StoredForm toy_form()
{
    return {.name = "randproj", .layout = [](const embedlab::StoredBlock& b, embedlab::TableLayout& t) {
                const int64_t r = b.integer("rank");
                if (r < 1 || r > t.dim)
                    b.fail("randproj's projection width " + std::to_string(r) + " is outside 1.." +
                           std::to_string(t.dim));
                t.parameters = {{"rank", r}};
                t.needs("randproj.ER", {t.rows, r});
                t.needs("randproj.pinvR", {r, t.dim});
            }};
}

embedlab::StoredFormRebuild toy_rebuild()
{
    return {.form = "randproj",
            .rebuild = [](const embedlab::TableLayout&,
                          embedlab::StoredTensors& f) -> std::shared_ptr<const embedlab::TokenEmbedding> {
                return projection_embedding(f.at("randproj.ER"), f.at("randproj.pinvR"));
            }};
}

class RandomProjection final : public embedlab::TableMethod {
public:
    std::string name() const override { return "randproj"; }
    void fit(const torch::Tensor& table, embedlab::CompressedEmbedding& out, int64_t model_params,
             const embedlab::ProgressFn&) const override
    {
        const int64_t V = table.size(0), d = table.size(1), r = out.spec.rank;
        auto gen = at::make_generator<at::CPUGeneratorImpl>(out.spec.seed);
        const auto R = torch::randn({d, r}, gen, torch::kFloat32);
        out.embedding =
            projection_embedding(torch::matmul(table, R).contiguous(), torch::linalg_pinv(R).contiguous());
        out.accounting = embedlab::account_low_rank(embedlab::LowRankKind::LRF, V, d, r, {}, model_params);
        out.accounting.method = "randproj";
        out.fit = {{"projection", "gaussian"}};
    }
    void spec_fields(const embedlab::CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["rank"] = spec.rank;
    }
    bool fit_is_seeded() const override { return true; }
    std::string parameters(const embedlab::CompressionSpec& spec) const override
    {
        return "rank " + std::to_string(spec.rank);
    }
    void fill_account_defaults(embedlab::CompressionRequest&) const override {}
    embedlab::EmbeddingAccounting account(const embedlab::CompressionRequest& r, int64_t vocab, int64_t dim,
                                          int64_t model_params) const override
    {
        auto a = embedlab::account_low_rank(embedlab::LowRankKind::LRF, vocab, dim, r.rank, {}, model_params);
        a.method = "randproj";
        return a;
    }
};

void register_toy_once()
{
    static const bool registered = [] {
        embedlab::register_method(toy_row());
        static const RandomProjection method;
        embedlab::register_table_method(method);
        embedlab::register_stored_form(toy_form());
        embedlab::register_stored_rebuild(toy_rebuild());
        return true;
    }();
    (void)registered;
}

} // namespace

TEST(ToyMethod, RegisteredFromATestItRunsThroughEveryFrontDoor)
{
    register_toy_once();
    TempDir dir;
    const auto model = embedlab::test::write_tiny_hf_model(dir / "tiny", embedlab::Architecture::Llama);

    // The CLI's parser: compress's flags are generated from the fields, so --rank is "rank".
    std::set<std::string> valued{"--method"}, switches;
    embedlab::cli::add_method_flags(valued, switches);
    const embedlab::cli::Args args("compress", {"--method", "randproj", "--rank", "6"}, valued, switches);
    embedlab::CompressionRequest request;
    request.model = model.string();
    request.method = *args.get("--method");
    embedlab::cli::method_flags_into(args, request);
    EXPECT_EQ(request.rank, 6);
    EXPECT_EQ(embedlab::describe_request(request), "randproj rank 6");

    // `help compress` lists it, generated from its row: summary, field, range, help, example.
    const std::string help = embedlab::cli::command_help("compress");
    const auto block = help.substr(help.find("  compress [MODEL] --method randproj --rank K --out DIR"));
    EXPECT_NE(block.find("a Gaussian random projection of the rows"), std::string::npos) << help;
    EXPECT_NE(block.find("--rank K                            1..d: columns of the Gaussian projection R"),
              std::string::npos)
        << block;
    EXPECT_NE(block.find("e.g. --method randproj --rank 6"), std::string::npos) << block;
    // Its field's doc is the range its check holds: a rank beyond d is refused.
    EXPECT_EQ(embedlab::method_field_doc(embedlab::method_descriptor("randproj"), "rank").label,
              "Projection width");

    // The request's JSON form (the job schema) round-trips, and refuses another method's field.
    request.eval_ids = {1, 5, 9, 2, 7, 3, 11, 4, 8, 6, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    request.has_eval_ids = true;
    request.seed = 7;
    const auto json = embedlab::request_json(request);
    EXPECT_EQ(json["method"], "randproj");
    EXPECT_EQ(json["rank"], 6);
    const auto back = embedlab::request_from_json(json);
    EXPECT_EQ(embedlab::request_json(back), json);
    auto wrong = json;
    wrong["k"] = 3;
    const auto taken_field = embedlab::test::input_error_of([&] { embedlab::request_from_json(wrong); },
                                                            "a field of lle's was taken by randproj");
    EXPECT_NE(taken_field.find("does not apply to method randproj"), std::string::npos) << taken_field;
    EXPECT_THROW(embedlab::check_request({.model = "m", .method = "randproj", .rank = 17}, 16),
                 embedlab::InputError);

    // run_compression fits it, accounts for it and evaluates the compressed model.
    const auto run = embedlab::run_compression(back);
    ASSERT_TRUE(run.embedding);
    const int64_t V = 50, d = 16, r = 6;
    EXPECT_EQ(run.summary.method, "randproj");
    EXPECT_EQ(run.summary.params_after, V * r + r * d);
    EXPECT_GT(run.embedding->reconstruction.mean_cosine, 0.1);
    EXPECT_LT(run.embedding->reconstruction.mean_cosine, 1.0);
    EXPECT_TRUE(std::isfinite(run.summary.ppl));

    // export_run writes it in its own stored form; reloading gives the same model.
    const auto out = dir / "randproj";
    const auto manifest = embedlab::export_run(run, out);
    EXPECT_EQ(manifest["method"], "randproj");
    EXPECT_EQ(manifest["parameters"]["rank"], 6);
    EXPECT_EQ(manifest["seed"], 7); // its fit draws from the seed
    const nlohmann::json own_tensors = {{"model.embed_tokens.randproj.ER", {V, r}},
                                        {"model.embed_tokens.randproj.pinvR", {r, d}}};
    EXPECT_EQ(nlohmann::json(manifest["factor_tensors"]), own_tensors);
    auto reloaded = embedlab::load_model(out, {.need_tokenizer = false}); // the tiny model has none
    const std::vector<int32_t> ids(request.eval_ids.begin(), request.eval_ids.end());
    const auto again = embedlab::evaluate_perplexity(*reloaded.model, ids, {.ctx = 8});
    const auto ran = embedlab::evaluate_perplexity(run.compressed_model(), ids, {.ctx = 8});
    EXPECT_NEAR(again.ppl, ran.ppl, 1e-9 * ran.ppl);
    const auto& back_table = reloaded.model->token_embedding();
    EXPECT_EQ(back_table.kind(), "randproj");
    const auto all_ids = torch::arange(V, torch::kLong);
    EXPECT_TRUE(torch::equal(back_table.lookup(all_ids), run.embedding->embedding->lookup(all_ids)));

    // The loader holds the directory to the form: a shape the form does not expect, a
    // listing the file contradicts, and the form's own check of its parameters.
    auto corrupted = [&](const std::string& name, auto edit) {
        const auto copy = dir / name;
        std::filesystem::copy(out, copy, std::filesystem::copy_options::recursive);
        auto j = nlohmann::json::parse(embedlab::test::read_text(copy / "embedlab.json"));
        edit(j);
        embedlab::test::write_file(copy / "embedlab.json", j.dump(1));
        return embedlab::test::input_error_of([&] { embedlab::load_model(copy, {.need_tokenizer = false}); },
                                              name + " loaded");
    };
    const auto rank_5 = corrupted("rank5", [](nlohmann::json& j) { j["parameters"]["rank"] = 5; });
    EXPECT_NE(rank_5.find("/model.safetensors: tensor 'model.embed_tokens.randproj.ER' has shape [50, 6], "
                          "expected [50, 5] from embedlab.json and config.json"),
              std::string::npos)
        << rank_5;
    const auto listed = corrupted("listed", [](nlohmann::json& j) {
        j["factor_tensors"]["model.embed_tokens.randproj.pinvR"] = {6, 15};
    });
    EXPECT_NE(listed.find("embedlab.json: says 'model.embed_tokens.randproj.pinvR' has shape [6, 15] but "
                          "model.safetensors stores [6, 16]"),
              std::string::npos)
        << listed;
    const auto too_wide = corrupted("rank17", [](nlohmann::json& j) { j["parameters"]["rank"] = 17; });
    EXPECT_NE(too_wide.find("embedlab.json: randproj's projection width 17 is outside 1..16"),
              std::string::npos)
        << too_wide;

    // Its embedding exports to ONNX and runs there: the rows and the tied head.
    const auto onnx_path = dir / "randproj.onnx";
    const auto report = embedlab::export_onnx_embedding(back_table, onnx_path, {});
    EXPECT_EQ(report.embedding_type, "randproj");
    if (embedlab::test::have_onnxruntime()) {
        torch::manual_seed(3);
        const auto hidden = torch::randn({4, d});
        const auto some_ids = torch::tensor({0, 7, 49, 7}, torch::kLong);
        const auto onnx_run =
            embedlab::test::run_onnx(onnx_path, {{"ids", some_ids}, {"hidden", hidden}}, {"rows", "logits"});
        const auto want_rows = back_table.lookup(some_ids), want_logits = back_table.project(hidden);
        EXPECT_TRUE(torch::allclose(onnx_run.outputs.at("rows"), want_rows, 1e-5, 1e-5));
        EXPECT_TRUE(torch::allclose(onnx_run.outputs.at("logits"), want_logits, 1e-5, 1e-4));
    } else {
        std::cout << "[ skipped  ] ONNX Runtime run: " << embedlab::test::onnxruntime_skip_reason() << "\n";
    }

    // account counts it from sizes alone, by its own account(): --rank 4,6 is two settings,
    // checked by its own row (a rank beyond d names the flag).
    const embedlab::cli::Args account_args("account", {"--rank", "4,6"}, valued, switches);
    const auto settings =
        embedlab::cli::method_flag_settings(account_args, "account", {.method = "randproj"});
    ASSERT_EQ(settings.size(), 2u);
    const auto counted =
        embedlab::account_without_table(settings[1], V, d, 0, "account", embedlab::cli::field_flag);
    EXPECT_EQ(counted.params_after, run.summary.params_after);
    try {
        embedlab::account_without_table({.method = "randproj", .rank = 17}, V, d, 0, "account",
                                        embedlab::cli::field_flag);
        ADD_FAILURE() << "rank 17 of d = 16 was counted";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("account: --rank 17 is outside"), std::string::npos) << e.what();
    }
}

TEST(ToyMethod, RegistrationRefusesWhatItCannotRun)
{
    register_toy_once();
    auto taken = toy_row();
    EXPECT_THROW(embedlab::register_method(taken), embedlab::InputError); // the name is taken
    auto typo = toy_row();
    typo.name = "randproj2";
    typo.fields = {"rnak"};
    const auto unknown_field = embedlab::test::input_error_of(
        [&] { embedlab::register_method(typo); }, "a field that is not the request's was registered");
    EXPECT_NE(unknown_field.find("\"rnak\", which is not a request field"), std::string::npos)
        << unknown_field;
    EXPECT_THROW(embedlab::register_table_method(RandomProjection{}), embedlab::InputError); // taken too
    EXPECT_THROW(embedlab::register_stored_form(toy_form()), embedlab::InputError);          // and its form
    EXPECT_THROW(embedlab::register_stored_rebuild(toy_rebuild()), embedlab::InputError);
    auto formless = toy_rebuild();
    formless.form = "randproj2";
    const auto no_form = embedlab::test::input_error_of([&] { embedlab::register_stored_rebuild(formless); },
                                                        "a rebuild of no form was registered");
    EXPECT_NE(no_form.find("no stored form 'randproj2'"), std::string::npos) << no_form;
}

// Every token-table method, the toy's included, names a stored form that has a rebuild;
// lrf is a form a manifest names as its method, and a method of another part is none.
TEST(ToyMethod, EveryTableMethodNamesAFormWithARebuild)
{
    register_toy_once();
    int table_methods = 0;
    for (const auto& m : embedlab::method_registry()) {
        if (m.part != embedlab::CompressedPart::TokenEmbedding)
            continue;
        ++table_methods;
        const auto& form = embedlab::stored_form_of(m.name, "test");
        EXPECT_EQ(form.name, m.stored_as) << m.name;
        EXPECT_EQ(embedlab::stored_rebuild(form.name, "test").form, form.name) << m.name;
    }
    EXPECT_EQ(table_methods, 11); // the ten built-in table methods and the toy
    EXPECT_EQ(embedlab::stored_form_of("lrf", "test").name, "lrf");
    EXPECT_EQ(embedlab::spec_json({.method = "lrf", .rank = 3})["rank"], 3);
    const auto flat = embedlab::test::input_error_of(
        [] { embedlab::stored_form_of("flat", "m/embedlab.json"); }, "flat has a stored form");
    EXPECT_EQ(flat, "m/embedlab.json: unknown method 'flat'");
}
