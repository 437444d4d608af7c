// Per-token damage: row cosines, KL by target and input, log2 frequency buckets, the
// CSV, and eval --reference --per-token's file safety.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_in_process.hpp"
#include "cli_support.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "embedlab/token_damage.hpp"

namespace embedlab {
namespace {

using test::cli;

LoadedModel bundled_with_tokenizer()
{
    return load_model(std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "resources/models/stories260K.gguf",
                      {.need_tokenizer = true});
}

TEST(TokenDamage, FrequencyBucketsAreLog2Spaced)
{
    EXPECT_EQ(frequency_bucket(0), 0);
    EXPECT_EQ(frequency_bucket(1), 1);
    EXPECT_EQ(frequency_bucket(2), 2);
    EXPECT_EQ(frequency_bucket(3), 2);
    EXPECT_EQ(frequency_bucket(4), 3);
    EXPECT_EQ(frequency_bucket(1023), 10);
    EXPECT_EQ(frequency_bucket(1024), 11);
    EXPECT_EQ((TokenDamageBucket{.min_count = 4, .max_count = 7}.label()), "4-7");
}

// One row changed: only it loses cosine; the KL at positions that read or predict
// it are averaged where they belong.
TEST(TokenDamage, OneDamagedRowShowsWhereItIsReadAndPredicted)
{
    const auto original = bundled_with_tokenizer();
    auto damaged = bundled_with_tokenizer();
    const int64_t V = original.model->config().vocab_size;
    const auto table = dense_table(&original.model->token_embedding())->clone();
    const auto ids =
        original.tokenizer->encode("Once upon a time there was a little girl. She liked to play "
                                   "with her ball. One day the ball rolled away and she was sad.");
    const int32_t hit = ids[5];
    table[hit] = -table[hit];
    damaged.model->set_token_embedding(std::make_shared<DenseTokenEmbedding>(table));
    const auto d = evaluate_divergence(*damaged.model, *original.model, ids, {.ctx = 16});
    const auto damage = token_damage(*damaged.model, *original.model, d.positions);
    ASSERT_EQ(damage.cosine.size(), static_cast<size_t>(V));
    EXPECT_NEAR(damage.cosine[hit], -1.0, 1e-9);
    EXPECT_NEAR(damage.cosine[(hit + 1) % V], 1.0, 1e-9);
    int64_t as_target = 0;
    double kl_target = 0, kl_input = 0;
    int64_t as_input = 0;
    for (size_t i = 0; i < d.positions.size(); ++i) {
        if (d.positions.target[i] == hit) {
            ++as_target;
            kl_target += d.positions.kl[i];
        }
        if (d.positions.input[i] == hit) {
            ++as_input;
            kl_input += d.positions.kl[i];
        }
    }
    ASSERT_GT(as_input, 0);
    EXPECT_EQ(damage.target_count[hit], as_target);
    EXPECT_EQ(damage.input_count[hit], as_input);
    EXPECT_NEAR(damage.kl_as_input[hit], kl_input / as_input, 1e-12);
    EXPECT_GT(damage.kl_as_input[hit], 0.0); // its own row, read last, is wrong
    EXPECT_EQ(damage.bucket[hit], frequency_bucket(as_target));
    const int32_t never = [&] {
        for (int32_t id = 0; id < V; ++id)
            if (damage.target_count[id] == 0)
                return id;
        return -1;
    }();
    ASSERT_GE(never, 0);
    EXPECT_TRUE(std::isnan(damage.kl_as_target[never]));
    EXPECT_EQ(damage.bucket[never], 0);

    // The buckets partition the vocabulary and the scored positions.
    int64_t tokens = 0, positions = 0;
    for (const auto& b : damage.buckets) {
        tokens += b.tokens;
        positions += b.positions;
    }
    EXPECT_EQ(tokens, V);
    EXPECT_EQ(positions, d.tokens);
    const auto j = token_damage_buckets_json(damage);
    EXPECT_EQ(j[0]["bucket"], "0");
    EXPECT_EQ(j[1]["bucket"], "1");
    EXPECT_EQ(j[2]["bucket"], "2-3");

    const std::string csv = token_damage_csv(damage, original.tokenizer.get());
    EXPECT_EQ(csv.rfind("id,piece,bucket,target_count,cosine,kl_as_target,input_count,kl_as_input\n", 0), 0u);
    EXPECT_NE(csv.find("\n" + std::to_string(V - 1) + ","), std::string::npos); // every id, pieces quoted
}

TEST(TokenDamage, EvalWritesThePerTokenFileOnceAndRefusesToOverwriteIt)
{
    test::TempDir dir;
    std::ofstream(dir / "t.txt") << "Once upon a time, there was a little robot who wanted to play. "
                                    "It looked at the sun and smiled, and the sun smiled back at it.";
    const std::string model = std::string(EMBEDLAB_SOURCE_DIR) + "/resources/models/tinygpt2-f16";
    ASSERT_EQ(
        cli({"compress", model, "--method", "svd", "--rank", "8", "--out", (dir / "svd").string(), "--quiet"})
            .exit_code,
        0);
    const std::vector<std::string> eval = {"eval",        (dir / "svd").string(),
                                           "--text",      (dir / "t.txt").string(),
                                           "--ctx",       "16",
                                           "--reference", model,
                                           "--per-token", (dir / "tokens.csv").string()};
    auto args = eval;
    args.push_back("--json");
    const auto r = cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["per_token"], (dir / "tokens.csv").string());
    EXPECT_GE(j["damage_by_frequency"].size(), 2u);
    EXPECT_TRUE(j.contains("kl_p999") && j.contains("delta_p_rms") && j.contains("ln_ppl_correlation"));
    const std::string csv = test::read_text(dir / "tokens.csv");
    EXPECT_NE(csv.find("\n50256,\"<|endoftext|>\","), std::string::npos) << csv.substr(csv.size() - 200);

    const auto again = test::cli_here(eval);
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_NE(again.err.find("tokens.csv"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
    args = eval;
    args.push_back("--force");
    const auto forced = cli(args);
    EXPECT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_NE(forced.out.find("same top p"), std::string::npos) << forced.out;
    EXPECT_NE(forced.out.find("damage by frequency"), std::string::npos) << forced.out;

    const auto alone =
        test::cli_here({"eval", model, "--text", (dir / "t.txt").string(), "--per-token", "x.csv"});
    EXPECT_EQ(alone.exit_code, 2);
    EXPECT_NE(alone.err.find("--per-token needs --reference"), std::string::npos) << alone.err;
    const auto mixed =
        test::cli_here({"eval", model, "--text", (dir / "t.txt").string(), "--reference-logits", "x.kld"});
    EXPECT_EQ(mixed.exit_code, 2);
    EXPECT_NE(mixed.err.find("drop --text"), std::string::npos) << mixed.err;
}

} // namespace
} // namespace embedlab
