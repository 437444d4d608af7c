// Issue 37's proof that a method is one unit: a toy method (a Gaussian random
// projection, E ~ (E R) pinv(R)) registered from this file alone runs through the
// CLI's flag parser, the request's JSON form, run_compression, export_run, reload and
// eval, with no other file knowing it. Its own executable: registering changes the
// registry for the rest of the process.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/table_method.hpp"
#include "help.hpp"
#include "method_flags.hpp"
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

// The toy's registry row: its one field, its check and its words; stored as the
// low-rank layout "lrf" (Z [V, r], P [r, d]), which the loader already reads.
embedlab::MethodDescriptor toy_row()
{
    return {
        .name = "randproj",
        .part = embedlab::CompressedPart::TokenEmbedding,
        .summary = "a Gaussian random projection of the rows (a test's toy)",
        .tied_head_from_factors = true,
        .stored_as = "lrf",
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

class RandomProjection final : public embedlab::TableMethod {
public:
    std::string name() const override { return "randproj"; }
    void fit(const torch::Tensor& table, embedlab::CompressedEmbedding& out, int64_t model_params,
             const embedlab::ProgressFn&) const override
    {
        const int64_t V = table.size(0), d = table.size(1), r = out.spec.rank;
        auto gen = at::make_generator<at::CPUGeneratorImpl>(out.spec.seed);
        const auto R = torch::randn({d, r}, gen, torch::kFloat32);
        embedlab::LowRankFit fit{.kind = embedlab::LowRankKind::LRF, .rank = r};
        fit.mu = torch::zeros({d}, torch::kFloat32);
        fit.Z = torch::matmul(table, R).contiguous();
        fit.P = torch::linalg_pinv(R).contiguous();
        out.embedding = std::make_shared<embedlab::LowRankTokenEmbedding>(fit);
        out.accounting = embedlab::account_low_rank(embedlab::LowRankKind::LRF, V, d, r, {}, model_params);
        out.accounting.method = "randproj";
        out.fit = {{"projection", "gaussian"}};
    }
    void spec_fields(const embedlab::CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["rank"] = spec.rank;
    }
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

    // export_run writes it in the stored layout it names; reloading gives the same model.
    const auto out = dir / "randproj";
    const auto manifest = embedlab::export_run(run, out);
    EXPECT_EQ(manifest["method"], "randproj");
    EXPECT_EQ(manifest["parameters"]["rank"], 6);
    EXPECT_TRUE(manifest["factor_tensors"].contains("model.embed_tokens.lrf.Z"))
        << manifest["factor_tensors"];
    auto reloaded = embedlab::load_model(out, {.need_tokenizer = false}); // the tiny model has none
    const std::vector<int32_t> ids(request.eval_ids.begin(), request.eval_ids.end());
    const auto again = embedlab::evaluate_perplexity(*reloaded.model, ids, {.ctx = 8});
    const auto ran = embedlab::evaluate_perplexity(run.compressed_model(), ids, {.ctx = 8});
    EXPECT_NEAR(again.ppl, ran.ppl, 1e-9 * ran.ppl);
    EXPECT_EQ(reloaded.model->token_embedding().kind(), "lrf");

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
}
