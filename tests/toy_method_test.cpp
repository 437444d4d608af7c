// Issue 37's proof that a method is one unit: a toy method (a Gaussian random
// projection, E ~ (E R) pinv(R); toy_method.hpp) registered from the tests alone runs
// through the CLI's flag parser, the request's JSON form, run_compression, export_run,
// reload and eval, with no other file knowing it. Issue 59: it stores itself in a form
// of its own (randproj.ER, randproj.pinvR: names no other method uses), which the
// loader checks and rebuilds, its embedding exports to ONNX, and its own field
// (density) is a flag, a JSON key, a checked range and a help line. Its own executable:
// registering changes the registry for the rest of the process.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/job.hpp"
#include "embedlab/lora.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/onnx_export.hpp"
#include "embedlab/stored_form.hpp"
#include "embedlab/table_method.hpp"
#include "help.hpp"
#include "method_flags.hpp"
#include "onnx_runtime.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"
#include "toy_method.hpp"

namespace {

using embedlab::test::TempDir;
using namespace toy_method;

} // namespace

TEST(ToyMethod, RegisteredFromATestItRunsThroughEveryFrontDoor)
{
    register_toy_once();
    TempDir dir;
    const auto model = embedlab::test::write_tiny_hf_model(dir / "tiny", embedlab::Architecture::Llama);

    // The CLI's parser: compress's flags are generated from the fields, so --rank is "rank".
    std::set<std::string> valued{"--method"}, switches;
    embedlab::cli::add_method_flags(valued, switches);
    // Its own field "density" is --density, read as its type into the request's method_fields.
    const embedlab::cli::Args args("compress", {"--method", "randproj", "--rank", "6", "--density", "0.5"},
                                   valued, switches);
    embedlab::CompressionRequest request;
    request.model = model.string();
    request.method = *args.get("--method");
    embedlab::cli::method_flags_into(args, request);
    EXPECT_EQ(request.rank, 6);
    EXPECT_EQ(request.method_fields.at("density"), 0.5);
    EXPECT_EQ(embedlab::request_field_value(embedlab::CompressionRequest{}, "density"), 1.0); // its default
    EXPECT_EQ(embedlab::describe_request(request), "randproj rank 6");
    // Out of its range, the CLI names the flag and the field's range.
    const embedlab::cli::Args dense("compress", {"--method", "randproj", "--rank", "6", "--density", "1.5"},
                                    valued, switches);
    auto too_dense = request;
    embedlab::cli::method_flags_into(dense, too_dense);
    EXPECT_EQ(
        embedlab::test::input_error_of(
            [&] { embedlab::check_request(too_dense, 16, "compress", embedlab::cli::method_field_flag); },
            "density 1.5 was accepted"),
        "compress: --density 1.5 is outside (0, 1]");

    // `help compress` lists it, generated from its row: summary, field, range, help, example.
    const std::string help = embedlab::cli::command_help("compress");
    const auto block = help.substr(help.find("  compress [MODEL] --method randproj --rank K --out DIR"));
    EXPECT_NE(block.find("a Gaussian random projection of the rows"), std::string::npos) << help;
    EXPECT_NE(block.find("--rank K                            1..d: columns of the Gaussian projection R"),
              std::string::npos)
        << block;
    EXPECT_NE(block.find("e.g. --method randproj --rank 6"), std::string::npos) << block;
    const auto density_at = block.find("[--density P (1.0)]");
    ASSERT_NE(density_at, std::string::npos) << block;
    const auto density_line = block.substr(density_at, block.find('\n', density_at) - density_at);
    EXPECT_NE(density_line.find("(0, 1]: share of R's entries drawn nonzero (a sparse projection)"),
              std::string::npos)
        << density_line;
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
    EXPECT_EQ(json["density"], 0.5); // its own field, under its name
    const auto back = embedlab::request_from_json(json);
    EXPECT_EQ(embedlab::request_json(back), json);
    EXPECT_EQ(back.method_fields.at("density"), 0.5);
    // Its own field is checked as the built-in ones: its type, its range, and no other method takes it.
    auto mistyped = json;
    mistyped["density"] = "half";
    EXPECT_EQ(
        embedlab::test::input_error_of([&] { embedlab::request_from_json(mistyped); }, "a string density"),
        "job: \"density\" must be a finite number");
    auto outside = json;
    outside["density"] = -0.25;
    EXPECT_EQ(embedlab::test::input_error_of([&] { embedlab::request_from_json(outside); }, "density -0.25"),
              "job: density -0.25 is outside (0, 1]");
    const auto on_pca = embedlab::test::input_error_of(
        [&] {
            embedlab::request_from_json({{"model", "m"}, {"method", "pca"}, {"rank", 3}, {"density", 0.5}});
        },
        "pca took randproj's density");
    EXPECT_EQ(on_pca, "job: density does not apply to method pca");
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
    EXPECT_EQ(run.embedding->fit["density"], 0.5); // the fit read its own field

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
    auto shadowing = toy_row();
    shadowing.name = "randproj3";
    shadowing.own_fields[0].name = "rank";
    EXPECT_EQ(embedlab::test::input_error_of([&] { embedlab::register_method(shadowing); }, "own rank"),
              "register_method: method 'randproj3's field \"rank\" is taken (a request field already)");
    auto bad_default = toy_row();
    bad_default.name = "randproj4";
    bad_default.own_fields[0].name = "density4";
    bad_default.own_fields[0].default_value = 2.0;
    EXPECT_EQ(embedlab::test::input_error_of([&] { embedlab::register_method(bad_default); }, "default 2"),
              "register_method: method 'randproj4's field \"density4\" has a default 2.0 outside (0, 1]");
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

// Issue 59: a capability is provided by overriding, not by being named. The toy says its
// rows are ER pinvR (low_rank_factors), and LoRA then adapts those two factors and merges
// into them as it does for pca/svd/lrf; before, LoRA knew only LowRankTokenEmbedding, gave
// the toy a [V, d] row correction and refused to merge it.
TEST(ToyMethod, LoraAdaptsAndMergesTheFactorsItDeclares)
{
    using namespace embedlab;
    const ModelConfig c = test::tiny_config(Architecture::Llama);
    LanguageModel model(c, test::random_weights(c), "toy lora");
    const int64_t V = c.vocab_size, d = c.hidden_size, r = 5;
    torch::manual_seed(11);
    const auto R = torch::randn({d, r});
    const auto table = *dense_table(&model.token_embedding());
    const auto ER = torch::matmul(table, R).contiguous(), pinvR = torch::linalg_pinv(R).contiguous();
    model.set_token_embedding(projection_embedding(ER, pinvR));

    const auto adapters =
        make_lora_adapters(model, {.rank = 2, .alpha = 3, .targets = {"embedding"}, .seed = 5});
    ASSERT_EQ(adapters->adapters.size(), 2u); // Z and P, not one [V, d] correction E
    const auto& aZ = adapters->adapters.at("embedding.Z");
    const auto& aP = adapters->adapters.at("embedding.P");
    EXPECT_EQ(aZ.B.sizes().vec(), (std::vector<int64_t>{V, 2}));
    EXPECT_EQ(aZ.A.sizes().vec(), (std::vector<int64_t>{2, r}));
    EXPECT_EQ(aP.B.sizes().vec(), (std::vector<int64_t>{r, 2}));
    EXPECT_EQ(aP.A.sizes().vec(), (std::vector<int64_t>{2, d}));
    {
        torch::NoGradGuard no_grad; // B starts at zero: move it so the adapters change the rows
        aZ.B.normal_(0, 0.5);
        aP.B.normal_(0, 0.5);
    }
    attach_lora(model, adapters);

    // The rows the adapted model looks up: (ER + s BZ AZ)(pinvR + s BP AP), in double.
    const double s = 3.0 / 2.0;
    const auto dbl = [](const torch::Tensor& t) { return t.detach().to(torch::kDouble); };
    const auto want = torch::matmul(dbl(ER) + s * torch::matmul(dbl(aZ.B), dbl(aZ.A)),
                                    dbl(pinvR) + s * torch::matmul(dbl(aP.B), dbl(aP.A)));
    const auto all_ids = torch::arange(V, torch::kLong);
    const auto adapted_rows = model.token_embedding().lookup(all_ids).detach();
    EXPECT_LT((adapted_rows.to(torch::kDouble) - want).abs().max().item<double>(), 1e-4);
    EXPECT_GT((adapted_rows - table).abs().max().item<double>(), 1e-3); // the adapters did change them

    const auto ids = torch::tensor({{3, 17, 42, 8, 0, 49}}, torch::kLong);
    const auto before = model.logits(ids);
    merge_lora(model); // folded into the toy's own factors, the toy's own kind
    EXPECT_EQ(model.lora(), nullptr);
    EXPECT_EQ(model.token_embedding().kind(), "randproj");
    EXPECT_EQ(model.token_embedding().lora_base(), nullptr);
    EXPECT_TRUE(torch::allclose(model.token_embedding().lookup(all_ids), adapted_rows, 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(model.logits(ids), before, 1e-4, 1e-4));
}

// Issue 59: TensorSLM's energy model is a method's own. The toy declares a closed form
// (its product's, as svd's: recorded_energy) and measure's energy_model reports it under
// the toy's name; before, measure knew pca, svd and tt by name and said "not modelled".
TEST(ToyMethod, MeasureReportsTheEnergyModelTheMethodProvides)
{
    register_toy_once();
    TempDir dir;
    const auto model = embedlab::test::write_tiny_hf_model(dir / "tiny", embedlab::Architecture::Llama);
    embedlab::CompressionRequest request{.model = model.string(), .method = "randproj", .rank = 6};
    request.eval_ids = {1, 5, 9, 2, 7, 3, 11, 4, 8, 6, 10, 12, 13, 14, 15, 16};
    request.has_eval_ids = true;
    const auto out = dir / "randproj";
    embedlab::export_run(embedlab::run_compression(request), out);
    const auto measured = embedlab::measure_model(
        out, {{"tokens", 8}, {"repeat", 1}, {"lookups", 4}, {"power", "off"}}, {}, {});
    const auto& energy = measured["energy_model"];
    EXPECT_EQ(energy["method"], "randproj");
    const embedlab::EnergyOptions o{
        .nu = energy["nu"].get<double>(), .tau = energy["tau"].get<double>(), .tokens = 8};
    const auto want = embedlab::svd_energy(50, 16, 6, o);
    ASSERT_TRUE(energy["compressed"].is_number()) << energy.dump();
    EXPECT_DOUBLE_EQ(energy["compressed"].get<double>(), want.compressed_nu + want.compressed_tau);
    EXPECT_DOUBLE_EQ(energy["compressed_memory"].get<double>(), want.compressed_nu);
    EXPECT_DOUBLE_EQ(energy["omega"].get<double>(), want.omega);
    EXPECT_DOUBLE_EQ(energy["original"].get<double>(), want.original_nu + want.original_tau);
}
