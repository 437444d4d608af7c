// Training from scratch (issue 20 item 12, train.hpp): a few steps lower the loss
// with a table and with PETE's Fourier embedding, a seed gives the same weights,
// a time budget plans and stops, the saved directory loads and evaluates as
// trained, bad options fail with messages; and finetune of a fourier table trains
// the MLP itself, keeping MLP-only embedding parameters.
#include <chrono>

#include <nlohmann/json.hpp>

#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/resources.hpp"
#include "embedlab/train.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

// GPT-2's tokenizer (the bundled model's) and the bundled sample text.
const std::vector<int32_t>& sample_ids()
{
    static const std::vector<int32_t> ids = load_tokenizer_from_directory(default_model_path())
                                                ->encode(read_text_file(default_sample_text_path()));
    return ids;
}

// A GPT-2 vocabulary on a model small enough for unit tests.
ScratchOptions small_options(const std::string& embedding, int64_t steps, uint64_t seed = 1)
{
    ScratchOptions o;
    o.config = {.name = "custom", .vocab = 50257, .dim = 32, .layers = 1, .heads = 2, .positions = 64};
    o.embedding = parse_scratch_embedding(embedding);
    o.steps = steps;
    o.batch = 2;
    o.seqlen = 32;
    o.lr = 3e-3;
    o.warmup = 2;
    o.seed = seed;
    return o;
}

double mean(const std::vector<double>& v, size_t from, size_t to)
{
    double s = 0;
    for (size_t i = from; i < to; ++i)
        s += v[i];
    return s / static_cast<double>(to - from);
}

std::vector<int32_t> slice(const std::vector<int32_t>& ids, size_t from, size_t n)
{
    return {ids.begin() + static_cast<std::ptrdiff_t>(from),
            ids.begin() + static_cast<std::ptrdiff_t>(from + n)};
}

class TrainEmbedding : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainEmbedding, FewStepsLowerTheLossAndTheDirectoryReloads)
{
    const auto& ids = sample_ids();
    ASSERT_GT(ids.size(), 3000u);
    const auto train = slice(ids, 0, ids.size() - 600), held = slice(ids, ids.size() - 600, 600);
    const auto r = train_from_scratch(small_options(GetParam(), 24), train);
    ASSERT_EQ(r.loss_curve.size(), 24u);
    EXPECT_EQ(r.steps, 24);
    EXPECT_EQ(r.planned_steps, 24);
    EXPECT_EQ(r.stopped_by, "steps");
    EXPECT_EQ(r.tokens, 24 * 2 * 32);
    EXPECT_GT(r.tokens_per_second, 0);
    EXPECT_LT(mean(r.loss_curve, 19, 24), mean(r.loss_curve, 0, 5) - 0.5) << GetParam();
    const bool fourier = GetParam() != "table";
    EXPECT_EQ(r.model->token_embedding().kind(), fourier ? "fourier" : "dense");
    const int64_t table_values = 50257 * 32;
    if (fourier) // MLP (+ norm) only: no per-token parameters
        EXPECT_LT(r.embedding_parameters, 5000);
    else
        EXPECT_EQ(r.embedding_parameters, table_values);
    EXPECT_EQ(r.total_parameters, r.model->parameter_breakdown().total());

    test::TempDir tmp;
    const auto record = save_trained_model(r, tmp / "m", {.tokenizer_dir = default_model_path()});
    EXPECT_EQ(record["steps"], 24);
    EXPECT_EQ(record["embedding"]["kind"], GetParam());
    for (const char* f : {"config.json", "model.safetensors", "training.json", "tokenizer.json"})
        EXPECT_TRUE(fs::exists(tmp / "m" / f)) << f;
    EXPECT_EQ(fs::exists(tmp / "m" / "embedlab.json"), fourier);
    const auto back = load_model(tmp / "m");
    EXPECT_EQ(back.model->token_embedding().kind(), fourier ? "fourier" : "dense");
    EXPECT_EQ(back.model->parameter_breakdown().token_embedding, r.embedding_parameters);
    EXPECT_EQ(back.model->parameter_breakdown().total(), r.total_parameters);
    EXPECT_EQ(back.tokenizer->encode("Hello world"), std::vector<int32_t>({15496, 995}));
    const double in_memory = evaluate_perplexity(*r.model, held, {.ctx = 64}).ppl;
    const double loaded = evaluate_perplexity(*back.model, held, {.ctx = 64}).ppl;
    EXPECT_NEAR(loaded, in_memory, 1e-6 * in_memory);
    EXPECT_LT(loaded, 50257.0); // better than uniform after 24 steps
    // An existing directory is refused without overwrite.
    EXPECT_THROW(save_trained_model(r, tmp / "m", {.tokenizer_dir = default_model_path()}), InputError);
}

INSTANTIATE_TEST_SUITE_P(Embeddings, TrainEmbedding,
                         ::testing::Values("table", "fourier:linear", "fourier:geglu"), test::ParamName());

// Same seed and steps: identical weights; another seed: different ones.
TEST(Train, SeededAndDeterministic)
{
    const auto& ids = sample_ids();
    for (const std::string e : {"table", "fourier:linear"}) {
        const auto a = train_from_scratch(small_options(e, 4, 7), ids);
        const auto b = train_from_scratch(small_options(e, 4, 7), ids);
        const auto c = train_from_scratch(small_options(e, 4, 8), ids);
        EXPECT_EQ(a.loss_curve, b.loss_curve);
        for (const auto& [name, t] : a.model->weights())
            EXPECT_TRUE(torch::equal(t, b.model->weights().at(name))) << name;
        EXPECT_FALSE(torch::equal(a.model->weights().at("h.0.mlp.c_fc.weight"),
                                  c.model->weights().at("h.0.mlp.c_fc.weight")));
        if (e != "table") {
            const auto& fa = dynamic_cast<const FourierTokenEmbedding&>(a.model->token_embedding()).params();
            const auto& fb = dynamic_cast<const FourierTokenEmbedding&>(b.model->token_embedding()).params();
            EXPECT_TRUE(torch::equal(fa.w_in, fb.w_in));
            EXPECT_TRUE(torch::equal(fa.norm_weight, fb.norm_weight));
        }
    }
}

// A time budget fixes the plan at step 10 and stops by the clock or the plan; a
// callback returning false cancels.
TEST(Train, TimeBudgetPlansAndCancelStops)
{
    auto o = small_options("fourier:linear", 0);
    o.minutes = 0.5 / 60; // half a second
    std::vector<ScratchStep> seen;
    const auto r = train_from_scratch(o, sample_ids(), [&](const ScratchStep& s) {
        if (!s.partial)
            seen.push_back(s);
        return true;
    });
    ASSERT_GE(r.steps, 1);
    EXPECT_GE(r.planned_steps, 1);
    EXPECT_TRUE(r.stopped_by == "time" || r.stopped_by == "steps");
    EXPECT_LE(r.steps, std::max<int64_t>(r.planned_steps, 10));
    if (r.steps >= 10) {
        EXPECT_EQ(seen[8].planned_steps, 0);
        EXPECT_GE(seen[9].planned_steps, 10);
    }
    EXPECT_THROW(train_from_scratch(small_options("table", 5), sample_ids(),
                                    [](const ScratchStep& s) { return s.step < 2; }),
                 Cancelled);
}

TEST(Train, BadInputFailsWithMessages)
{
    auto expect_message = [](const std::function<void()>& f, const std::string& part) {
        try {
            f();
            ADD_FAILURE() << "no error for " << part;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    expect_message([] { scratch_config("huge", 50257); }, "unknown config 'huge' (use tiny");
    expect_message([] { parse_scratch_embedding("fourier:relu"); }, "unknown embedding 'fourier:relu'");
    const std::vector<int32_t> none;
    expect_message([&] { train_from_scratch(small_options("table", 3), none); },
                   "has no tokens (it is empty)");
    expect_message([&] { train_from_scratch(small_options("table", 3), slice(sample_ids(), 0, 40)); },
                   "40 tokens, shorter than one batch (2 x 32 + 1 = 65)");
    auto o = small_options("table", 0);
    expect_message([&] { check_scratch_options(o, 10000); }, "give a training time (--minutes M, M > 0)");
    o.minutes = -1;
    expect_message([&] { check_scratch_options(o, 10000); }, "--minutes must be a positive number");
    o = small_options("table", 3);
    o.seqlen = 128;
    expect_message([&] { check_scratch_options(o, 10000); }, "seqlen 128 exceeds the config's 64 positions");
    o = small_options("table", 3);
    o.lr = 0;
    expect_message([&] { check_scratch_options(o, 10000); }, "learning rate must be a positive number");
    const std::vector<int32_t> outside{1, 2, 60000};
    o = small_options("table", 1);
    o.batch = 1;
    o.seqlen = 2;
    expect_message([&] { train_from_scratch(o, outside); }, "token id 60000 is outside the vocabulary");
}

// finetune of a fourier table trains its MLP by LM loss: the loss goes down, the
// embedding keeps its MLP-only parameter count, and the saved directory reloads as
// fourier with the trained MLP and no row adapter.
TEST(FourierMlpFinetune, LossGoesDownAndParametersStayMlpOnly)
{
    test::TempDir tmp;
    LoadOptions no_tokenizer;
    no_tokenizer.need_tokenizer = false;
    auto original = load_model(test::write_tiny_hf_model(tmp / "src", Architecture::GPT2), no_tokenizer);
    const auto c =
        compress_table(original.model->weights().at("wte.weight"),
                       {.method = "fourier", .mlp = "geglu", .norm = true, .steps = 20, .seed = 1});
    save_compressed_model(original, c, tmp / "fourier");
    auto lm = load_model(tmp / "fourier", no_tokenizer);
    auto& m = *lm.model;
    const int64_t embedding_before = m.token_embedding().parameter_count();
    const auto w_before =
        dynamic_cast<const FourierTokenEmbedding&>(m.token_embedding()).params().w_in.clone();
    const auto t = prepare_fourier_mlp_recovery(m, {.rank = 4, .alpha = 8, .targets = {"embedding"}});
    EXPECT_EQ(t.description["mode"], "fourier-mlp");
    EXPECT_EQ(m.lora(), nullptr); // "embedding" alone: the MLP only
    EXPECT_EQ(t.description["trainable_parameters"], embedding_before);
    std::vector<int32_t> ids(600);
    for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int32_t>((i * 7 + i / 3) % 50);
    const auto r =
        train_next_token(m, t.params, ids, {.steps = 12, .lr = 1e-2, .batch = 4, .seqlen = 16, .seed = 2});
    EXPECT_LT(mean(r.loss_curve, 9, 12), mean(r.loss_curve, 0, 3));
    EXPECT_EQ(m.token_embedding().kind(), "fourier");
    EXPECT_EQ(m.token_embedding().parameter_count(), embedding_before);
    const auto& trained = dynamic_cast<const FourierTokenEmbedding&>(m.token_embedding()).params();
    EXPECT_FALSE(torch::equal(trained.w_in.detach(), w_before));
    save_finetuned_model(lm, m, tmp / "out", {.finetune = {{"mode", "fourier-mlp"}}});
    EXPECT_FALSE(fs::exists(tmp / "out" / "adapters.safetensors"));
    const auto back = load_model(tmp / "out", no_tokenizer);
    EXPECT_EQ(back.model->token_embedding().kind(), "fourier");
    EXPECT_EQ(back.model->parameter_breakdown().token_embedding, embedding_before);
    EXPECT_EQ(back.model->lora(), nullptr);
    EXPECT_TRUE(
        torch::equal(dynamic_cast<const FourierTokenEmbedding&>(back.model->token_embedding()).params().w_in,
                     trained.w_in.detach()));
    const auto probe = torch::tensor({{1, 7, 3, 49, 22, 5}}, torch::kLong);
    EXPECT_LT((back.model->logits(probe) - m.logits(probe)).abs().max().item<double>(), 1e-4);

    // With LoRA targets too: adapters on the linear layers, still no embedding adapter.
    auto lm2 = load_model(tmp / "fourier", no_tokenizer);
    const auto t2 = prepare_fourier_mlp_recovery(*lm2.model, {.rank = 4, .alpha = 8});
    ASSERT_NE(lm2.model->lora(), nullptr);
    EXPECT_EQ(lm2.model->lora()->adapters.count("embedding.E"), 0u);
    EXPECT_EQ(lm2.model->token_embedding().parameter_count(), embedding_before);
    // A table that is not fourier is refused.
    EXPECT_THROW(prepare_fourier_mlp_recovery(*original.model, {}), InputError);
}

// Issue 57 item 8: a report before the first step, after every step, and between
// the micro-batches of a long one.
TEST(Train, ReportsBeforeTheFirstStepAndEveryStep)
{
    std::vector<ScratchStep> seen;
    train_from_scratch(small_options("table", 3), sample_ids(), [&](const ScratchStep& s) {
        seen.push_back(s);
        return true;
    });
    ASSERT_FALSE(seen.empty());
    EXPECT_TRUE(seen.front().partial);
    EXPECT_EQ(seen.front().step, 0);
    std::vector<int64_t> steps;
    for (const auto& s : seen)
        if (!s.partial)
            steps.push_back(s.step);
    EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3}));
}

// The small config at 32 x 256 tokens (about 9 s a step in one pass) is cancelled
// between micro-batches; a run the memory cannot hold is refused before any work.
TEST(Train, CancelIsPromptAndMemoryIsChecked)
{
    auto o = small_options("table", 2);
    o.config = scratch_config("small", 50257);
    o.batch = 32;
    o.seqlen = 256;
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(train_from_scratch(o, sample_ids(), [&](const ScratchStep&) { return ++calls < 2; }),
                 Cancelled);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);

    EXPECT_NO_THROW(check_scratch_memory(o)); // this machine
    o.batch = 65536;
    EXPECT_GT(scratch_memory_estimate(o), 0.5e9);
    try {
        check_scratch_memory(o, 0.5e9);
        ADD_FAILURE() << "no refusal";
    } catch (const InputError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("train: batch 65536 x seqlen 256 needs about "), std::string::npos) << m;
        EXPECT_NE(m.find(" GB (estimate), this machine has 0.5 GB available; lower --batch or --seqlen"),
                  std::string::npos)
            << m;
    }
}

} // namespace
