// eval --reference-logits: llama-perplexity's --kl-divergence-base file read, llama.cpp's
// protocol and statistics. A base file is written here the way perplexity.cpp writes one
// (its log_softmax quantiser), from the bundled model; bad files fail naming the problem.
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "eval/divergence_statistics.hpp"
#include "io/llamacpp_logits.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

using test::input_error_of;
using test::le_bytes;

LoadedModel bundled()
{
    return load_model(std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "resources/models/stories260K.gguf");
}

// n ids of the bundled held-out stories: targets the model finds likely, as in real use.
std::vector<int32_t> story_ids(const LoadedModel& lm, size_t n)
{
    auto ids = lm.tokenizer->encode(test::read_text(std::filesystem::path(EMBEDLAB_SOURCE_DIR) /
                                                    "resources/texts/tinystories-heldout.txt"));
    ids.resize(n);
    return ids;
}

// One row as perplexity.cpp's log_softmax(n_vocab, logits, log_prob, tok) quantises it.
std::string quantised_row(const float* logits, int64_t V)
{
    float max_logit = logits[0], min_logit = logits[0];
    for (int64_t i = 1; i < V; ++i) {
        max_logit = std::max(max_logit, logits[i]);
        min_logit = std::min(min_logit, logits[i]);
    }
    min_logit = std::max(min_logit, max_logit - 16);
    double sum_exp = 0;
    for (int64_t i = 0; i < V; ++i)
        sum_exp += std::exp(logits[i] - max_logit);
    const auto log_sum_exp = static_cast<float>(std::log(sum_exp));
    const float scale = (max_logit - min_logit) / 65535.f;
    std::string row = le_bytes(scale) + le_bytes(min_logit - max_logit - log_sum_exp);
    for (int64_t i = 0; i < V; ++i)
        row += le_bytes<uint16_t>(scale && logits[i] > min_logit
                                      ? static_cast<uint16_t>(std::nearbyint((logits[i] - min_logit) / scale))
                                      : 0);
    if (V % 2)
        row += le_bytes<uint16_t>(0);
    return row;
}

// The file llama-perplexity --kl-divergence-base writes for `tokens` (n_chunk * n_ctx),
// the chunks' first token replaced by `bos` when given.
std::string base_file(const LanguageModel& base, const std::vector<int32_t>& tokens, int32_t n_ctx,
                      std::optional<int32_t> bos)
{
    const int64_t V = base.config().vocab_size;
    const auto n_chunk = static_cast<int32_t>(tokens.size() / n_ctx);
    std::string out = "_logits_" + le_bytes(n_ctx) + le_bytes(static_cast<int32_t>(V)) + le_bytes(n_chunk);
    for (int32_t t : tokens)
        out += le_bytes(t);
    c10::InferenceMode guard;
    for (int32_t c = 0; c < n_chunk; ++c) {
        std::vector<int64_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
        if (bos)
            chunk[0] = *bos;
        const auto logits = base.logits(torch::tensor(chunk).unsqueeze(0))[0].contiguous();
        for (int32_t j = n_ctx / 2; j < n_ctx - 1; ++j)
            out += quantised_row(logits[j].data_ptr<float>(), V);
    }
    return out;
}

TEST(LlamaCppDivergence, AModelAgainstItsOwnBaseFileIsZeroUpToTheQuantisation)
{
    const auto lm = bundled();
    const int32_t bos = static_cast<int32_t>(lm.model->config().bos_token_id);
    ASSERT_GE(bos, 0);
    auto tokens = story_ids(lm, 4 * 32);
    tokens[0] = bos; // llama.cpp's tokenizer added BOS: every chunk starts with it
    test::TempDir dir;
    test::write_file(dir / "base.kld", base_file(*lm.model, tokens, 32, bos));
    const auto d = evaluate_divergence_llamacpp(*lm.model, dir / "base.kld");
    EXPECT_TRUE(d.bos);
    EXPECT_EQ(d.protocol, "llama.cpp");
    EXPECT_EQ(d.tokens, 4 * (32 - 1 - 16));
    EXPECT_EQ(d.windows, 4);
    // The base's log-probabilities are rounded to 16 bits (steps of 16/65535 at most).
    EXPECT_LT(d.kl_max, 2e-4);
    EXPECT_GT(d.kl_min, -2e-4);
    EXPECT_EQ(d.top1_agreement, 1.0);
    EXPECT_NEAR(d.delta_ln_ppl, 0.0, 1e-4);
    EXPECT_NEAR(d.ln_ppl_correlation, 1.0, 1e-4);

    // Without the BOS in front of chunks 1..3 the model reads other tokens: the check bites.
    test::write_file(dir / "no-bos.kld", base_file(*lm.model, tokens, 32, std::nullopt));
    EXPECT_GT(evaluate_divergence_llamacpp(*lm.model, dir / "no-bos.kld").kl_max, 1e-3);
}

// A perturbed table against the original's file: the same numbers as a float64
// computation on llama.cpp's chunks and scored positions.
TEST(LlamaCppDivergence, MatchesADirectComputationOnLlamaCppsChunks)
{
    const auto original = bundled();
    auto perturbed = bundled();
    torch::manual_seed(5);
    const auto& table = *dense_table(&perturbed.model->token_embedding());
    perturbed.model->set_token_embedding(
        std::make_shared<DenseTokenEmbedding>(table + 0.3 * torch::randn_like(table)));
    const int32_t n_ctx = 24, first = n_ctx / 2;
    const auto tokens = story_ids(original, 5 * n_ctx); // no BOS in front
    test::TempDir dir;
    test::write_file(dir / "base.kld", base_file(*original.model, tokens, n_ctx, std::nullopt));
    const auto d = evaluate_divergence_llamacpp(*perturbed.model, dir / "base.kld");
    EXPECT_FALSE(d.bos);

    c10::InferenceMode guard;
    double kl = 0, nll = 0, base_nll = 0;
    int64_t n = 0, same = 0;
    for (int c = 0; c < 5; ++c) {
        std::vector<int64_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
        const auto input = torch::tensor(chunk).unsqueeze(0);
        const auto p = torch::log_softmax(perturbed.model->logits(input)[0].to(torch::kDouble), -1);
        const auto q = torch::log_softmax(original.model->logits(input)[0].to(torch::kDouble), -1);
        for (int j = first; j < n_ctx - 1; ++j, ++n) {
            kl += (q[j].exp() * (q[j] - p[j])).sum().item<double>();
            nll -= p[j][chunk[j + 1]].item<double>();
            // llama.cpp stores log-probabilities down to 16 below the largest only.
            base_nll -= std::max(q[j][chunk[j + 1]].item<double>(), q[j].max().item<double>() - 16);
            same += p[j].argmax().item<int64_t>() == q[j].argmax().item<int64_t>();
        }
    }
    ASSERT_EQ(d.tokens, n);
    EXPECT_GT(d.kl_mean, 1e-3);
    EXPECT_NEAR(d.kl_mean, kl / n, 2e-4); // 16-bit base log-probabilities, terms below e^-16 dropped
    EXPECT_NEAR(std::log(d.ppl), nll / n, 1e-5);
    EXPECT_NEAR(std::log(d.reference_ppl), base_nll / n, 1e-3);
    EXPECT_DOUBLE_EQ(d.top1_agreement, static_cast<double>(same) / n);
    EXPECT_EQ(d.window_kl_mean.size(), 5u);
}

// llama.cpp's definitions on numbers whose statistics are known.
TEST(LlamaCppDivergence, StatisticsFollowLlamaCppsDefinitions)
{
    DivergenceResult r;
    auto& s = r.positions;
    const int n = 101;
    for (int i = 0; i < n; ++i) {
        const int v = (i * 37) % n; // 0..100, shuffled
        s.input.push_back(0);
        s.target.push_back(0);
        s.kl.push_back(v);
        s.nll.push_back(1 + 0.01 * v);
        s.reference_nll.push_back(1 + 0.005 * v);
        s.same_top.push_back(v % 4 != 0);
    }
    detail::fill_divergence_statistics(r);
    EXPECT_DOUBLE_EQ(r.kl_median, 50);
    EXPECT_DOUBLE_EQ(r.kl_max, 100);
    EXPECT_DOUBLE_EQ(r.kl_min, 0);
    EXPECT_NEAR(r.kl_p99, 99, 1e-4); // 0.99f * 100, interpolated
    EXPECT_NEAR(r.kl_p999, 99.9, 1e-4);
    EXPECT_NEAR(r.kl_p01, 0.1, 1e-4);
    EXPECT_NEAR(r.kl_p5, 5, 1e-4);
    EXPECT_DOUBLE_EQ(r.kl_mean, 50);
    // Standard error of the mean: sqrt(var / (n - 1)) with var = E[x^2] - E[x]^2 = 850.
    EXPECT_NEAR(r.kl_mean_uncertainty, std::sqrt(850.0 / 100), 1e-9);
    EXPECT_NEAR(r.ln_ppl_correlation, 1.0, 1e-9); // both ln p's are linear in v
    EXPECT_NEAR(r.delta_ln_ppl, 0.005 * 50, 1e-12);
    // Perfectly correlated: the ratio's uncertainty is the difference of the two.
    EXPECT_NEAR(r.delta_ln_ppl_uncertainty, 0.005 * std::sqrt(8.5), 1e-9);
    EXPECT_NEAR(r.top1_agreement, 75.0 / 101, 1e-12);
    EXPECT_NEAR(r.top1_agreement_uncertainty, std::sqrt(r.top1_agreement * (1 - r.top1_agreement) / 100),
                1e-12);
    EXPECT_EQ(r.delta_p_max, 0); // the model is less sure of every target but the first
    EXPECT_NEAR(r.delta_p_min, std::exp(-2.0) - std::exp(-1.5), 1e-9);
    EXPECT_NEAR(
        r.delta_p_rms * r.delta_p_rms,
        [&] {
            double m = 0;
            for (int v = 0; v <= 100; ++v)
                m += std::pow(std::exp(-1 - 0.01 * v) - std::exp(-1 - 0.005 * v), 2);
            return m / n;
        }(),
        1e-12);

    // An even count: the median averages the two middle values; no uncertainty below 11.
    DivergenceResult few;
    few.positions = {{0, 0, 0, 0}, {0, 0, 0, 0}, {1, 2, 3, 10}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 0, 1}};
    detail::fill_divergence_statistics(few);
    EXPECT_DOUBLE_EQ(few.kl_median, 2.5);
    EXPECT_EQ(few.kl_mean_uncertainty, 0.0);
    EXPECT_TRUE(std::isnan(few.ln_ppl_correlation));
}

// The header llama.cpp writes, for hand-made bad files.
std::string header(int32_t n_ctx, int32_t n_vocab, int32_t n_chunk)
{
    return "_logits_" + le_bytes(n_ctx) + le_bytes(n_vocab) + le_bytes(n_chunk);
}

std::string error_of(const std::filesystem::path& file)
{
    return input_error_of([&] { io::parse_llamacpp_logits(io::MappedFile::open(file)); }, "(no error)");
}

TEST(LlamaCppDivergence, BadFilesFailNamingTheFileAndTheProblem)
{
    test::TempDir dir;
    // n_ctx 4, n_vocab 3, 1 chunk: 4 tokens, one row of 2 * (2 + 4) = 12... nv = 8 uint16.
    std::string good = header(4, 3, 1);
    for (int32_t t : {1, 2, 0, 2})
        good += le_bytes(t);
    good += le_bytes(16.f / 65535) + le_bytes(-16.5f) + le_bytes<uint16_t>(65535) + le_bytes<uint16_t>(0) +
            le_bytes<uint16_t>(30000) + le_bytes<uint16_t>(0);
    test::write_file(dir / "good.kld", good);
    const auto parsed = io::parse_llamacpp_logits(io::MappedFile::open(dir / "good.kld"));
    EXPECT_EQ(parsed.n_ctx, 4);
    EXPECT_EQ(parsed.scored_per_chunk(), 1);
    EXPECT_FLOAT_EQ(parsed.row(0, 0).log_prob(0), 16.f - 16.5f);

    const auto check = [&](const std::string& name, const std::string& bytes, const std::string& problem) {
        test::write_file(dir / name, bytes);
        const auto e = error_of(dir / name);
        EXPECT_NE(e.find((dir / name).string()), std::string::npos) << e;
        EXPECT_NE(e.find(problem), std::string::npos) << e;
    };
    check("short.kld", good.substr(0, 12), "truncated");
    check("cut.kld", good.substr(0, good.size() - 2), "truncated");
    check("magic.kld", "_logitz_" + good.substr(8), "_logits_");
    check("long.kld", good + "xx", "after the last chunk");
    check("huge.kld", header(1 << 30, 1 << 30, 1 << 30) + good.substr(20), "truncated");
    check("ctx.kld", header(2, 3, 1) + good.substr(20), "n_ctx >= 3");
    std::string bad_id = good;
    const auto big = le_bytes<int32_t>(7);
    bad_id.replace(24, 4, big);
    check("id.kld", bad_id, "token 1 has id 7, outside its vocabulary of 3");
    std::string bad_scale = good;
    bad_scale.replace(36, 4, le_bytes(std::nanf("")));
    check("scale.kld", bad_scale, "chunk 0, row 0");
    ASSERT_EQ(::mkfifo((dir / "fifo.kld").c_str(), 0600), 0);
    EXPECT_NE(error_of(dir / "fifo.kld").find("not a regular file"), std::string::npos);
    EXPECT_NE(error_of(dir / "missing.kld").find("missing.kld"), std::string::npos);

    // A vocabulary other than the model's, and a context beyond it.
    const auto lm = bundled();
    const auto vocab = input_error_of([&] { evaluate_divergence_llamacpp(*lm.model, dir / "good.kld"); }, "");
    EXPECT_NE(vocab.find("good.kld: log-probabilities over 3 tokens, but the model has a vocabulary of"),
              std::string::npos)
        << vocab;
}

} // namespace
} // namespace embedlab
