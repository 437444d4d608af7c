// LoRA recovery (METHODS.md 1): every adapter enters the forward pass (tied head,
// fused gpt2 c_attn blocks, MLP down projection), gradients reach all of them, a
// merge computes the same function, and the finetuned directory reloads exactly.
#include <nlohmann/json.hpp>

#include <torch/nn/functional/loss.h>

#include <chrono>

#include "embedlab/classifier_finetune.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/tasks.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

const char* table_name(Architecture arch)
{
    return arch == Architecture::GPT2 ? "wte.weight" : "model.embed_tokens.weight";
}

// A tiny random model whose token table is replaced by pca factors of rank 5.
std::unique_ptr<LanguageModel> tiny_pca_model(Architecture arch)
{
    const auto c = test::tiny_config(arch);
    auto w = test::random_weights(c);
    auto fit = fit_low_rank(w.at(table_name(arch)), LowRankKind::PCA, 5);
    return std::make_unique<LanguageModel>(c, w, std::make_shared<LowRankTokenEmbedding>(fit), "tiny");
}

torch::Tensor tiny_ids()
{
    return torch::tensor({{1, 7, 3, 49, 22, 5, 0, 13}, {4, 4, 9, 30, 2, 41, 17, 8}}, torch::kLong);
}

// Every B random (A is random already), so every adapter changes the function.
void randomise(const LoraAdapters& adapters, uint64_t seed)
{
    torch::manual_seed(seed);
    torch::NoGradGuard no_grad;
    for (const auto& [name, a] : adapters.adapters)
        a.B.copy_(0.3 * torch::randn(a.B.sizes()));
}

std::shared_ptr<LoraAdapters> only(const LoraAdapters& all, const std::string& name)
{
    auto one = std::make_shared<LoraAdapters>();
    one->rank = all.rank;
    one->alpha = all.alpha;
    one->adapters.emplace(name, all.adapters.at(name));
    return one;
}

// Records each layer's MLP activations and output.
struct Recorder : ForwardObserver {
    std::map<int64_t, torch::Tensor> act, out;
    void mlp_activations(int64_t l, const torch::Tensor& a) override { act[l] = a.clone(); }
    void decoder_output(int64_t l, const torch::Tensor& x) override { out[l] = x.clone(); }
};

LoadedModel load_weights_only(const fs::path& dir)
{
    LoadOptions o;
    o.need_tokenizer = false;
    return load_model(dir, o);
}

// A tiny random model saved to tmp/src, and its pca rank-5 compression to tmp/pca.
void save_tiny_pca5(const test::TempDir& tmp, Architecture arch)
{
    auto original = load_weights_only(test::write_tiny_hf_model(tmp / "src", arch));
    const auto c =
        compress_table(original.model->weights().at(table_name(arch)), {.method = "pca", .rank = 5});
    save_compressed_model(original, c, tmp / "pca");
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b)
{
    return (a - b).abs().max().item<double>();
}

class Lora : public ::testing::TestWithParam<Architecture> {};

TEST_P(Lora, ZeroBLeavesLogitsUnchanged)
{
    auto m = tiny_pca_model(GetParam());
    const auto before = m->logits(tiny_ids());
    attach_lora(*m, make_lora_adapters(*m, {.rank = 4, .alpha = 8}));
    ASSERT_NE(m->lora(), nullptr);
    EXPECT_EQ(m->lora()->adapters.size(), static_cast<size_t>(GetParam() == Architecture::GPT2 ? 14 : 16));
    EXPECT_TRUE(torch::equal(m->logits(tiny_ids()), before));
}

// The token adapters reach the input lookup and (gpt2) the tied head, through the factors.
TEST_P(Lora, EmbeddingAdaptersEnterLookupAndTiedHead)
{
    auto m = tiny_pca_model(GetParam());
    const auto* base = dynamic_cast<const LowRankTokenEmbedding*>(&m->token_embedding());
    const auto mu = base->mu().clone(), Z = base->Z().clone(), P = base->P().clone();
    const auto all = make_lora_adapters(*m, {.rank = 4, .alpha = 8, .seed = 3});
    randomise(*all, 5);
    auto emb = std::make_shared<LoraAdapters>(*only(*all, "embedding.Z"));
    emb->adapters.emplace("embedding.P", all->adapters.at("embedding.P"));
    torch::manual_seed(1);
    const auto h = torch::randn({3, m->config().hidden_size});
    const auto head_before = m->head(h);
    attach_lora(*m, emb);
    const double s = emb->scale();
    const auto Zt = Z + s * emb->adapters.at("embedding.Z").delta().detach();
    const auto Pt = P + s * emb->adapters.at("embedding.P").delta().detach();
    const auto table = mu + torch::matmul(Zt, Pt); // only for the check
    const auto ids = torch::tensor({0, 17, 49}, torch::kLong);
    EXPECT_LT(max_abs_diff(m->token_embedding().lookup(ids), table.index_select(0, ids)), 1e-5);
    if (m->config().tied_embeddings) {
        EXPECT_GT(max_abs_diff(m->head(h), head_before), 1e-3); // the head uses the adapters
        EXPECT_LT(max_abs_diff(m->head(h), torch::matmul(h, table.t())), 1e-4);
    }
}

// An adapter on the MLP down projection adds scale (a A^T) B^T to that layer's output.
TEST_P(Lora, DownProjectionAdapterIsWired)
{
    auto m = tiny_pca_model(GetParam());
    const bool gpt2 = GetParam() == Architecture::GPT2;
    const std::string down = gpt2 ? "h.1.mlp.c_proj" : "model.layers.1.mlp.down_proj";
    const auto all = make_lora_adapters(*m, {.rank = 4, .alpha = 8});
    randomise(*all, 9);
    Recorder plain, adapted;
    m->hidden_states(tiny_ids(), &plain);
    attach_lora(*m, only(*all, down));
    m->hidden_states(tiny_ids(), &adapted);
    const auto& a = all->adapters.at(down);
    const auto expected =
        torch::matmul(torch::matmul(plain.act[1], a.A.detach().t()), a.B.detach().t()) * all->scale();
    const auto got = (adapted.out[1] - plain.out[1]).reshape({-1, m->config().hidden_size});
    EXPECT_GT(expected.abs().max().item<double>(), 1e-3);
    EXPECT_LT(max_abs_diff(got, expected), 1e-5);
    EXPECT_LT(max_abs_diff(adapted.out[0], plain.out[0]), 1e-7); // layer 0 untouched
}

TEST_P(Lora, GradientsReachEveryAdapter)
{
    auto m = tiny_pca_model(GetParam());
    const auto t = prepare_recovery(*m, {.rank = 4, .alpha = 8}, false);
    randomise(*m->lora(), 2);
    const auto ids = tiny_ids();
    const auto logits = m->training_logits(ids.narrow(1, 0, 7));
    const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                           ids.narrow(1, 1, 7).reshape({-1}));
    loss.backward();
    for (const auto& [name, a] : m->lora()->adapters)
        for (const auto* x : {&a.A, &a.B}) {
            ASSERT_TRUE(x->grad().defined()) << name;
            EXPECT_GT(x->grad().abs().max().item<double>(), 0) << name;
        }
    EXPECT_EQ(t.params.size(), 2 * m->lora()->adapters.size());
    for (const auto& [name, w] : m->weights())
        EXPECT_FALSE(w.requires_grad()) << name; // base frozen
}

TEST_P(Lora, MergeComputesTheSameFunction)
{
    auto m = tiny_pca_model(GetParam());
    prepare_recovery(*m, {.rank = 4, .alpha = 8}, false);
    randomise(*m->lora(), 4);
    const auto with_adapters = m->logits(tiny_ids());
    const auto base_logits = [&] {
        auto plain = tiny_pca_model(GetParam());
        return plain->logits(tiny_ids());
    }();
    EXPECT_GT(max_abs_diff(with_adapters, base_logits), 1e-2);
    merge_lora(*m);
    EXPECT_EQ(m->lora(), nullptr);
    EXPECT_EQ(m->token_embedding().kind(), "pca");
    EXPECT_EQ(m->parameter_breakdown().adapters, 0);
    EXPECT_LT(max_abs_diff(m->logits(tiny_ids()), with_adapters), 1e-4);
}

// compress -> finetune -> save (adapters stored, or merged) -> load: the same logits.
TEST_P(Lora, SaveAndReloadKeepEveryAdapter)
{
    test::TempDir tmp;
    save_tiny_pca5(tmp, GetParam());
    for (const bool merge : {false, true}) {
        auto lm = load_weights_only(tmp / "pca");
        const auto t = prepare_recovery(*lm.model, {.rank = 4, .alpha = 8, .seed = 6}, false);
        randomise(*lm.model->lora(), 8);
        const auto adapters = lm.model->lora()->json();
        const auto before = lm.model->logits(tiny_ids());
        if (merge)
            merge_lora(*lm.model);
        const fs::path out = tmp / (merge ? "merged" : "adapters");
        const auto manifest = save_finetuned_model(lm, *lm.model, out, {.lora = adapters});
        EXPECT_EQ(manifest["lora"]["merged"], merge);
        // Issue 20 item 3: the source's reconstruction and spectrum are not this table's.
        EXPECT_FALSE(manifest.contains("reconstruction"));
        EXPECT_FALSE(manifest.contains("fit"));
        EXPECT_TRUE(manifest["before_finetuning"].contains("reconstruction"));
        EXPECT_TRUE(manifest["before_finetuning"]["fit"].contains("explained_variance_at_rank"));
        EXPECT_EQ(fs::exists(out / "adapters.safetensors"), !merge);
        EXPECT_EQ(manifest["weights_files"].size(), merge ? 1u : 2u);
        auto back = load_weights_only(out);
        EXPECT_EQ(back.model->lora() != nullptr, !merge);
        if (!merge) {
            EXPECT_EQ(back.model->lora()->adapters.size(), lm.model->lora()->adapters.size());
        }
        EXPECT_LT(max_abs_diff(back.model->logits(tiny_ids()), before), 1e-4)
            << (merge ? "merged" : "adapters");
    }
    // A changed adapters file is caught by its recorded sha256.
    {
        auto bytes = test::read_text(tmp / "adapters" / "adapters.safetensors");
        bytes[bytes.size() - 1] ^= 1;
        fs::permissions(tmp / "adapters" / "adapters.safetensors", fs::perms::owner_write,
                        fs::perm_options::add);
        std::ofstream(tmp / "adapters" / "adapters.safetensors", std::ios::binary) << bytes;
        EXPECT_THROW(load_weights_only(tmp / "adapters"), InputError);
    }
}

// The lrf baseline: random factors of the same rank train in full; it saves as method lrf.
TEST_P(Lora, FromScratchReplacesTheFactorsAndSavesAsLrf)
{
    test::TempDir tmp;
    save_tiny_pca5(tmp, GetParam());
    auto lm = load_weights_only(tmp / "pca");
    const auto t = prepare_recovery(*lm.model, {.rank = 4, .alpha = 8}, true);
    EXPECT_EQ(t.description["mode"], "lrf");
    EXPECT_EQ(lm.model->token_embedding().kind(), "lrf");
    for (const auto& [name, a] : lm.model->lora()->adapters)
        EXPECT_EQ(name.rfind("embedding.", 0), std::string::npos) << name;
    const auto before = lm.model->logits(tiny_ids());
    merge_lora(*lm.model);
    save_finetuned_model(lm, *lm.model, tmp / "lrf", {});
    auto back = load_weights_only(tmp / "lrf");
    EXPECT_EQ(back.model->token_embedding().kind(), "lrf");
    EXPECT_EQ(back.model->token_embedding().parameter_count(), 50 * 5 + 5 * 16);
    EXPECT_LT(max_abs_diff(back.model->logits(tiny_ids()), before), 1e-5);
}

// Tables that are not pca/svd (here tt) get one row-correction adapter, "embedding.E",
// in the lookup and the tied head; it is stored unmerged (a merge would need new factors).
TEST(LoraRowAdapter, OtherTablesGetOneThatSurvivesReload)
{
    test::TempDir tmp;
    const auto src = test::write_tiny_hf_model(tmp / "src", Architecture::GPT2);
    auto original = load_weights_only(src);
    const auto c = compress_table(original.model->weights().at("wte.weight"),
                                  {.method = "tt", .shape = {4, 4}, .ranks = {1, 2, 1}});
    save_compressed_model(original, c, tmp / "tt");
    auto lm = load_weights_only(tmp / "tt");
    const auto plain = lm.model->logits(tiny_ids());
    prepare_recovery(*lm.model, {.rank = 4, .alpha = 8}, false);
    ASSERT_EQ(lm.model->lora()->adapters.count("embedding.E"), 1u);
    EXPECT_EQ(lm.model->lora()->adapters.at("embedding.E").B.sizes(), (c10::IntArrayRef{50, 4}));
    EXPECT_TRUE(torch::equal(lm.model->logits(tiny_ids()), plain));
    randomise(*lm.model->lora(), 3);
    const auto h = torch::randn({2, 16});
    const auto& e = lm.model->lora()->adapters.at("embedding.E");
    const auto base_head =
        dynamic_cast<const LoraTokenEmbedding&>(lm.model->token_embedding()).base()->project(h);
    const auto expected =
        base_head + torch::matmul(torch::matmul(h, e.A.detach().t()), e.B.detach().t()) * 2.0;
    EXPECT_LT(max_abs_diff(lm.model->head(h), expected), 1e-5);
    const auto before = lm.model->logits(tiny_ids());
    EXPECT_THROW(merge_lora(*lm.model), InputError);
    save_finetuned_model(lm, *lm.model, tmp / "out", {});
    auto back = load_weights_only(tmp / "out");
    EXPECT_EQ(back.model->token_embedding().kind(), "tt");
    EXPECT_LT(max_abs_diff(back.model->logits(tiny_ids()), before), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Archs, Lora, ::testing::Values(Architecture::GPT2, Architecture::Llama),
                         [](const auto& info) { return std::string(architecture_name(info.param)); });

TEST(Finetune, BadOptionsFailWithMessages)
{
    auto expect_message = [](const TrainOptions& o, int64_t ids, const std::string& part) {
        try {
            check_train_options(o, ids, 32, "train.txt");
            ADD_FAILURE() << "no error for " << part;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    expect_message({.steps = 5, .lr = 0}, 10000, "learning rate must be a positive number");
    expect_message({.steps = 5, .lr = -1e-3}, 10000, "learning rate must be a positive number");
    expect_message({.steps = 0}, 10000, "steps must be at least 1");
    expect_message({.steps = 5, .batch = 4, .seqlen = 16}, 64,
                   "train.txt: 64 tokens is shorter than one batch (4 x 16 + 1 = 65 tokens)");
    expect_message({.steps = 5, .seqlen = 64}, 10000, "exceeds the model's 32 positions");
    auto dense =
        std::make_unique<LanguageModel>(test::tiny_config(Architecture::GPT2),
                                        test::random_weights(test::tiny_config(Architecture::GPT2)), "tiny");
    EXPECT_THROW(prepare_recovery(*dense, {}, false), InputError);
    EXPECT_THROW(make_lora_adapters(*tiny_pca_model(Architecture::GPT2), {.rank = 0}), InputError);
    EXPECT_THROW(make_lora_adapters(*tiny_pca_model(Architecture::GPT2), {.targets = {"ffn"}}), InputError);
}

// The loop is seeded (same seed, same curve), reports each step, and cancels on request
// leaving an earlier output directory as it was.
TEST(Finetune, SeededCancellableAndAtomic)
{
    std::vector<int32_t> ids(400);
    for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int32_t>((i * 7 + i / 3) % 50);
    auto run = [&](int64_t cancel_at, std::vector<TrainStep>* seen) {
        auto m = tiny_pca_model(Architecture::GPT2);
        const auto t = prepare_recovery(*m, {.rank = 4, .alpha = 8, .seed = 1}, false);
        return train_next_token(*m, t.params, ids,
                                {.steps = 6, .lr = 1e-2, .batch = 2, .seqlen = 16, .seed = 3},
                                [&](const TrainStep& s) {
                                    if (seen && !s.partial)
                                        seen->push_back(s);
                                    return s.step != cancel_at;
                                });
    };
    std::vector<TrainStep> seen;
    const auto a = run(-1, &seen), b = run(-1, nullptr);
    EXPECT_EQ(a.loss_curve, b.loss_curve);
    ASSERT_EQ(seen.size(), 6u);
    EXPECT_EQ(seen.back().step, 6);
    EXPECT_GT(seen.back().tokens_per_second, 0);
    EXPECT_EQ(a.tokens, 6 * 2 * 16);
    EXPECT_LT(a.loss_curve.back(), a.loss_curve.front());
    EXPECT_THROW(run(2, nullptr), Cancelled);

    // A cancelled save leaves the previous directory intact.
    test::TempDir tmp;
    const auto src = test::write_tiny_hf_model(tmp / "src", Architecture::GPT2);
    auto original = load_weights_only(src);
    save_compressed_model(
        original, compress_table(original.model->weights().at("wte.weight"), {.method = "pca", .rank = 5}),
        tmp / "pca");
    auto lm = load_weights_only(tmp / "pca");
    prepare_recovery(*lm.model, {.rank = 4, .alpha = 8}, false);
    save_finetuned_model(lm, *lm.model, tmp / "out", {});
    const auto first = test::read_text(tmp / "out" / "embedlab.json");
    randomise(*lm.model->lora(), 1);
    EXPECT_THROW(save_finetuned_model(lm, *lm.model, tmp / "out", {.overwrite = true},
                                      [](int64_t, int64_t) { return false; }),
                 Cancelled);
    EXPECT_EQ(test::read_text(tmp / "out" / "embedlab.json"), first);
    EXPECT_NO_THROW(load_weights_only(tmp / "out"));
}

// tinygpt2 at pca k = 16: a dozen LoRA steps lower the held-out perplexity.
TEST(Finetune, LoraRecoversPerplexityOnTinygpt2)
{
    EMBEDLAB_REQUIRE_SHARED();
    auto lm = load_model(test::shared_dir() / "models" / "tinygpt2");
    auto& m = *lm.model;
    // Disjoint slices of one text: evaluate on the first 3,000 bytes, train on the rest.
    const auto text = test::read_text(test::shared_dir() / "data" / "tinystories-heldout.txt");
    const auto held = lm.tokenizer->encode(text.substr(0, 3000));
    const auto train = lm.tokenizer->encode(text.substr(6000));
    const auto dense = dynamic_cast<const DenseTokenEmbedding&>(m.token_embedding()).table();
    m.set_token_embedding(compress_table(dense, {.method = "pca", .rank = 16}).embedding);
    const double before = evaluate_perplexity(m, held, {.ctx = 128}).ppl;
    const auto t = prepare_recovery(m, {}, false);
    const auto r =
        train_next_token(m, t.params, train, {.steps = 8, .lr = 3e-3, .batch = 2, .seqlen = 64, .seed = 1});
    const double after = evaluate_perplexity(m, held, {.ctx = 128}).ppl;
    EXPECT_LT(after, before);
    EXPECT_GT(r.tokens_per_second, 0);
}

// Issue 57 item 8: a report before the first step and after every step, the
// partial ones counting the steps finished so far.
TEST(Finetune, ReportsBeforeTheFirstStepAndEveryStep)
{
    auto m = tiny_pca_model(Architecture::GPT2);
    const auto t = prepare_recovery(*m, {.rank = 4, .alpha = 8, .seed = 1}, false);
    const auto ids = test::spread_ids(400, 50);
    std::vector<TrainStep> seen;
    train_next_token(*m, t.params, ids, {.steps = 3, .batch = 2, .seqlen = 16}, [&](const TrainStep& s) {
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

// The estimate grows with the batch, and a run the memory cannot hold is refused
// naming the estimate, the memory and the flags.
TEST(Finetune, RefusesWhatMemoryCannotHold)
{
    auto m = tiny_pca_model(Architecture::GPT2);
    const TrainOptions big{.steps = 1, .batch = 65536, .seqlen = 16},
        small{.steps = 1, .batch = 2, .seqlen = 16};
    EXPECT_GT(finetune_memory_estimate(*m, big, 0), finetune_memory_estimate(*m, small, 0));
    test::expect_input_error([&] { check_finetune_memory(*m, big, 0, 0.2e9); },
                             "finetune: batch 65536 x seqlen 16 needs about");
    test::expect_input_error([&] { check_finetune_memory(*m, big, 0, 0.2e9); },
                             "(estimate), this machine has 0.2 GB available; lower --batch or --seqlen");
    EXPECT_NO_THROW(check_finetune_memory(*m, small, 0, 100e9));
    EXPECT_NO_THROW(check_finetune_memory(*m, {.steps = 1, .batch = 8, .seqlen = 128})); // this machine
}

// Seconds until a callback that refuses its second call stops `run`.
double seconds_to_cancel(const std::function<void(const std::function<bool()>&)>& run)
{
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(run([&] { return ++calls < 2; }), Cancelled);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A long step (tinygpt2, 64 x 256 tokens: about 20 s in one pass) is cancelled
// between its micro-batches, in well under a step.
TEST(Finetune, CancelIsPromptWithinALongStep)
{
    EMBEDLAB_REQUIRE_SHARED();
    auto lm = load_model(test::shared_dir() / "models" / "tinygpt2");
    auto& m = *lm.model;
    const auto dense = dynamic_cast<const DenseTokenEmbedding&>(m.token_embedding()).table();
    m.set_token_embedding(compress_table(dense, {.method = "pca", .rank = 16}).embedding);
    const auto t = prepare_recovery(m, {}, false);
    const auto ids =
        lm.tokenizer->encode(test::read_text(test::shared_dir() / "data" / "tinystories-heldout.txt"));
    const double seconds = seconds_to_cancel([&](const std::function<bool()>& keep) {
        train_next_token(m, t.params, ids, {.steps = 2, .batch = 64, .seqlen = 256},
                         [&](const TrainStep&) { return keep(); });
    });
    EXPECT_LT(seconds, 5.0);
}

// The classifier too: a step of 512 pairs stops between micro-batches.
TEST(Finetune, ClassifierCancelIsPrompt)
{
    const fs::path source(EMBEDLAB_SOURCE_DIR);
    const auto lm = load_model(source / "tests/data/encoders/distilbert-mlm");
    const auto data = labelled_texts(read_task_data("rte", source / "tests/data/glue_formats/rte.tsv"));
    auto model = with_classification_head(*lm.model, data.label_names, 1);
    int reports = 0;
    train_classifier(*model, *lm.tokenizer, data, {.steps = 2, .batch = 2}, [&](const TrainStep& s) {
        reports += s.partial ? 0 : 1;
        return true;
    });
    EXPECT_EQ(reports, 2);
    const double seconds = seconds_to_cancel([&](const std::function<bool()>& keep) {
        train_classifier(*model, *lm.tokenizer, data, {.steps = 2, .batch = 4096},
                         [&](const TrainStep&) { return keep(); });
    });
    EXPECT_LT(seconds, 5.0);
}

} // namespace
