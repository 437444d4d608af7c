// Generation with an f16/bf16 model's matrices kept in half precision
// (generation_weights.hpp, model/half_products.hpp): the kernels equal float32
// products of the widened weights, greedy tokens equal the float32 path's on every
// half fixture with logits within 1e-4 of the largest, and `generate --weights half`
// holds the stored bytes where `--weights f32` holds twice them, for safetensors
// and GGUF files alike.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "embedlab/error.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/model.hpp"
#include "model/half_products.hpp"
#include "shared_models.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

namespace embedlab {
namespace {

using detail::HalfKernel;

std::vector<HalfKernel> half_kernels_here()
{
    std::vector<HalfKernel> kernels;
    for (const auto kernel : {HalfKernel::Portable, HalfKernel::Avx2})
        if (detail::cpu_runs(kernel))
            kernels.push_back(kernel);
    return kernels;
}

// Largest |a - b| over the largest |b|.
double relative_gap(const torch::Tensor& a, const torch::Tensor& b)
{
    return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}

// Both layouts, f16 and bf16, 1..6 rows (the kernel up to kHalfKernelRows, the tiled
// sgemm above; 66000 x 128 takes two tiles), sizes with tails after the 32- and 64-wide
// steps, with and without bias.
TEST(HalfProducts, EqualTheFloat32ProductOfTheWidenedWeights)
{
    torch::manual_seed(63);
    for (const auto dtype : {torch::kHalf, torch::kBFloat16})
        for (const auto& [out, in] :
             {std::pair<int64_t, int64_t>{70, 37}, {200, 128}, {3000, 96}, {66000, 128}})
            for (int64_t rows : {1, 2, 3, 4, 5, 6}) {
                const auto W = torch::randn({out, in}).to(dtype);
                const auto Wt = torch::randn({in, out}).to(dtype); // Conv1D layout
                const auto x = torch::randn({rows, in});
                const auto bias = torch::randn({out});
                const auto expected = torch::matmul(x, W.to(torch::kFloat32).t()) + bias;
                const auto expected_conv = torch::addmm(bias, x, Wt.to(torch::kFloat32));
                for (const auto kernel : half_kernels_here()) {
                    const std::string what = std::string(detail::half_kernel_name(kernel)) + " " +
                                             c10::toString(dtype) + " " + std::to_string(out) + "x" +
                                             std::to_string(in) + " rows " + std::to_string(rows);
                    const auto y = detail::half_times_transposed(x, W, bias, kernel);
                    ASSERT_EQ(y.scalar_type(), torch::kFloat32);
                    ASSERT_EQ(y.sizes(), expected.sizes()) << what;
                    EXPECT_LT(relative_gap(y, expected), 1e-5) << what;
                    EXPECT_LT(relative_gap(detail::half_times_transposed(x, W, {}, kernel), expected - bias),
                              1e-5)
                        << what;
                    EXPECT_LT(relative_gap(detail::half_add_times(bias, x, Wt, kernel), expected_conv), 1e-5)
                        << what << " (Conv1D)";
                }
            }
}

// A GGUF gpt2's Conv1D matrix, held as the transposed view of its stored [out, in]
// rows: equal to the float32 product on every kernel this CPU runs, for token-by-token
// rows and prompts (row counts and sizes with tails after the kernels' steps).
TEST(HalfProducts, TransposedViewsEqualTheFloat32ProductOnEveryKernel)
{
    torch::manual_seed(64);
    for (const auto dtype : {torch::kHalf, torch::kBFloat16})
        for (const auto& [out, in] : {std::pair<int64_t, int64_t>{70, 37}, {129, 900}, {3001, 96}})
            for (int64_t rows : {1, 4, 5, 13}) {
                const auto W = torch::randn({out, in}).to(dtype);
                const auto x = torch::randn({rows, in});
                const auto bias = torch::randn({out});
                const auto expected = torch::matmul(x, W.to(torch::kFloat32).t()) + bias;
                const auto view = W.t(); // [in, out], not contiguous
                ASSERT_FALSE(view.is_contiguous());
                for (const auto kernel : half_kernels_here())
                    EXPECT_LT(relative_gap(detail::half_add_times(bias, x, view, kernel), expected), 1e-5)
                        << detail::half_kernel_name(kernel) << " " << c10::toString(dtype) << " " << out
                        << "x" << in << " rows " << rows;
            }
}

// A prompt (more than kHalfKernelRows rows) through the AVX2 kernel's tiles of 3 weight
// rows by 4 prompt rows, and through widened sgemm: both equal the float32 product at
// every edge (weight rows and prompt rows not multiples of the tile, widths with tails
// after the 8-wide step, a width below one step), split over 1 to 3 threads (each
// thread's rows start at a multiple of 3).
TEST(HalfProducts, PromptTilesAndSgemmEqualTheFloat32ProductAtEveryEdge)
{
    torch::manual_seed(65);
    const int threads = at::get_num_threads();
    for (const int thread_count : {1, 2, 3}) {
        at::set_num_threads(thread_count);
        for (const auto dtype : {torch::kHalf, torch::kBFloat16})
            for (const auto& [out, in] :
                 {std::pair<int64_t, int64_t>{1, 5}, {2, 8}, {4, 9}, {5, 37}, {7, 16}, {70, 903}, {301, 64}})
                for (int64_t rows : {5, 6, 7, 8, 9, 13, 130}) {
                    const auto W = torch::randn({out, in}).to(dtype);
                    const auto x = torch::randn({1, rows, in});
                    const auto bias = torch::randn({out});
                    const auto expected = torch::matmul(x, W.to(torch::kFloat32).t()) + bias;
                    for (const auto kernel : half_kernels_here())
                        for (const auto prompt : {detail::HalfPrompt::Tiles, detail::HalfPrompt::Sgemm}) {
                            const auto y = detail::half_times_transposed(x, W, bias, kernel, prompt);
                            ASSERT_EQ(y.sizes(), expected.sizes());
                            EXPECT_LT(relative_gap(y, expected), 1e-5)
                                << detail::half_kernel_name(kernel) << " " << detail::half_prompt_name(prompt)
                                << " " << c10::toString(dtype) << " " << out << "x" << in << " rows " << rows
                                << " threads " << thread_count;
                        }
                }
    }
    at::set_num_threads(threads);
}

TEST(HalfProducts, ASingleRowKeepsItsLeadingShape)
{
    const auto W = torch::randn({5, 8}).to(torch::kHalf);
    const auto x = torch::randn({1, 1, 8});
    EXPECT_EQ(detail::half_times_transposed(x, W, {}).sizes(), (std::vector<int64_t>{1, 1, 5}));
}

// Generation's log-probabilities: log sum exp of a row of logits within 1e-6 of
// torch's in double, on rows whose length is no multiple of the AVX2 width and whose
// values span more than float32's exp range; the first non-finite value's index.
TEST(HalfProducts, LogSumExpEqualsTorchsInDoubleAndFindsTheFirstNonFiniteValue)
{
    torch::manual_seed(5);
    for (const auto kernel : half_kernels_here())
        for (const int64_t n : {1, 7, 8, 9, 31, 32000, 151936})
            for (const double spread : {0.1, 10.0, 200.0}) {
                const auto x = (torch::randn({n}) * spread).contiguous();
                const std::span<const float> row(x.data_ptr<float>(), static_cast<size_t>(n));
                const auto got = detail::log_sum_exp(row, kernel);
                EXPECT_EQ(got.non_finite, -1);
                EXPECT_NEAR(got.value, torch::logsumexp(x.to(torch::kDouble), 0).item<double>(), 1e-6)
                    << detail::half_kernel_name(kernel) << " n " << n << " spread " << spread;
            }
    for (const auto kernel : half_kernels_here())
        for (const float bad : {NAN, INFINITY, -INFINITY})
            for (const int64_t at : {0, 5, 8, 4099, 4100}) {
                auto x = torch::randn({4101});
                x[at + (at == 4100 ? 0 : 1)] = bad; // a later one must not be the one named
                x[at] = bad;
                const std::span<const float> row(x.data_ptr<float>(), 4101);
                EXPECT_EQ(detail::log_sum_exp(row, kernel).non_finite, at)
                    << detail::half_kernel_name(kernel) << " " << bad << " at " << at;
            }
}

// The greedy token: the first of equal largest values, as std::max_element gives it, with
// infinite and NaN values too.
TEST(HalfProducts, FirstMaxIndexIsStdMaxElementsIndex)
{
    torch::manual_seed(6);
    for (const auto kernel : half_kernels_here())
        for (const int64_t n : {1, 7, 9, 32000})
            for (const float special : {0.f, 4.f, INFINITY, -INFINITY, NAN})
                for (int trial = 0; trial < 8; ++trial) {
                    auto x = torch::randn({n}).round(); // ties among the largest
                    if (special != 0.f)
                        x[torch::randint(n, {}).item<int64_t>()] = special;
                    const std::span<const float> row(x.data_ptr<float>(), static_cast<size_t>(n));
                    EXPECT_EQ(detail::first_max_index(row, kernel),
                              std::max_element(row.begin(), row.end()) - row.begin())
                        << detail::half_kernel_name(kernel) << " n " << n << " with " << special;
                }
}

TEST(GenerationWeights, ParsesHalfAndF32AndNamesTheOptionOtherwise)
{
    EXPECT_EQ(parse_generation_weights("half"), GenerationWeights::Half);
    EXPECT_EQ(parse_generation_weights("f32"), GenerationWeights::F32);
    try {
        parse_generation_weights("f16");
        FAIL() << "no InputError";
    } catch (const InputError& e) {
        EXPECT_STREQ(e.what(), "--weights: 'f16' is not a weight precision; expected half or f32");
    }
}

std::vector<test::SharedModel> half_fixtures()
{
    std::vector<test::SharedModel> models{{"tinygpt2-f16", "models/tinygpt2-f16"}};
    for (const auto& m : test::shared_models())
        if (m.dir.string().starts_with("models/zoo/")) // f16 or bf16 safetensors, every one
            models.push_back(m);
    return models;
}

// Logits [T, V] of each position read one token at a time through a KV cache (generation's path).
torch::Tensor logits_token_by_token(const LanguageModel& m, const torch::Tensor& ids)
{
    KvCache cache;
    std::vector<torch::Tensor> rows;
    for (int64_t t = 0; t < ids.size(1); ++t)
        rows.push_back(m.head(m.hidden_states(ids.narrow(1, t, 1), cache)[0]));
    return torch::cat(rows, 0);
}

// Greedy tokens identical, logits (one token at a time, and a prompt read at once)
// within 1e-4 of the largest logit; the float32 load (evaluation's) holds no half weight.
void expect_half_generation_equals_f32(const std::filesystem::path& dir, const std::string& name)
{
    const auto f32 = load_model(dir, {.need_tokenizer = false});
    const auto half = load_model_for_generation(dir, {.need_tokenizer = false}, GenerationWeights::Half);
    const auto forced = load_model_for_generation(dir, {.need_tokenizer = false}, GenerationWeights::F32);
    EXPECT_FALSE(holds_half_weights(*f32.model)) << name;
    EXPECT_FALSE(holds_half_weights(*forced.model)) << name;
    ASSERT_TRUE(holds_half_weights(*half.model)) << name;
    // The token table and an untied head stay half too: the lookup widens the rows it
    // reads, the head's product goes through the half kernel.
    const auto& weights = half.model->weights();
    EXPECT_TRUE(detail::is_half(weights.at(token_table_name(half.model->config().arch)))) << name;
    if (weights.count("lm_head.weight")) {
        EXPECT_TRUE(detail::is_half(weights.at("lm_head.weight"))) << name;
    }

    const int64_t V = f32.model->config().vocab_size;
    const auto prompt = test::spread_ids(8, V, 7, 3);
    const GenerationOptions greedy{.max_tokens = 24, .stop_at_eos = false, .top_n = 0};
    const auto expected = generate(*f32.model, nullptr, prompt, greedy);
    const auto got = generate(*half.model, nullptr, prompt, greedy);
    ASSERT_EQ(got.tokens.size(), expected.tokens.size()) << name;
    std::vector<int64_t> ids(prompt.begin(), prompt.end());
    for (size_t i = 0; i < got.tokens.size(); ++i) {
        EXPECT_EQ(got.tokens[i].id, expected.tokens[i].id) << name << " token " << i;
        ids.push_back(expected.tokens[i].id);
    }
    const auto sequence = torch::tensor(ids, torch::kLong).unsqueeze(0);
    const auto reference = f32.model->logits(sequence)[0];
    EXPECT_LT(relative_gap(logits_token_by_token(*half.model, sequence), reference), 1e-4) << name;
    EXPECT_LT(relative_gap(half.model->logits(sequence)[0], reference), 1e-4) << name << " (prompt)";
}

TEST(HalfWeights, GreedyTokensAndLogitsEqualTheFloat32PathOnEveryHalfFixture)
{
    EMBEDLAB_REQUIRE_SHARED();
    for (const auto& fixture : half_fixtures())
        expect_half_generation_equals_f32(test::shared_dir() / fixture.dir, fixture.name);
}

// The same for GGUF files: tinygpt2-f16 exported as an F16 GGUF (gpt2: its Conv1D
// matrices are read through transposed views) and the zoo's BF16 GGUFs (llama's q/k
// rows reordered, gemma2's norms, a tied head).
TEST(HalfWeights, GreedyTokensAndLogitsEqualTheFloat32PathOnHalfGgufFiles)
{
    EMBEDLAB_REQUIRE_SHARED();
    test::TempDir dir;
    const auto exported = dir / "tinygpt2-f16.gguf";
    const auto run = test::cli({"export", (test::shared_dir() / "models/tinygpt2-f16").string(), "--format",
                                "gguf", "--type", "f16", "--out", exported.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    expect_half_generation_equals_f32(exported, "tinygpt2-f16.gguf");
    for (const char* zoo : {"smollm2-tied", "llama32-ropescaled", "qwen3", "gemma2"})
        expect_half_generation_equals_f32(test::shared_dir() / "models/zoo" / (std::string(zoo) + ".gguf"),
                                          std::string(zoo) + ".gguf");
}

// `embedlab-cli generate` under /usr/bin/time (a small process forking it, so the
// peak is the CLI's own): the JSON's generated ids and the peak RSS in kB.
std::pair<nlohmann::json, long> generate_ids_and_peak_kb(const std::filesystem::path& model,
                                                         const std::string& weights, const test::TempDir& dir)
{
    const auto peak_file = (dir / ("peak-" + weights)).string();
    const auto run =
        test::cli({"generate", model.string(), "--prompt", "Once upon a time", "--max-tokens", "6",
                   "--weights", weights, "--json"},
                  {"EMBEDLAB_THREADS=1", "OMP_NUM_THREADS=1", "/usr/bin/time", "-f", "%M", "-o", peak_file});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return {test::json_of(run)["ids"], std::atol(test::read_text(peak_file).c_str())};
}

// A 2-layer gpt2-small-shaped model in f16 (54 M weights, 107 MB stored), synthesised once
// for the two cases below (each synthesised the same one); empty if synth failed.
std::filesystem::path synthesised_gpt2_small_f16()
{
    static const test::TempDir dir;
    static const std::filesystem::path model = [] {
        const auto out = dir / "gpt2-f16";
        const auto synth = test::cli({"synth", "--like", "gpt2-small", "--layers", "2", "--dtype", "f16",
                                      "--out", out.string(), "--quiet"});
        EXPECT_EQ(synth.exit_code, 0) << synth.err;
        return synth.exit_code == 0 ? out : std::filesystem::path();
    }();
    return model;
}

// The 2-layer gpt2-small-shaped model in f16 (54 M weights, 107 MB stored): `--weights half`
// (the default) holds them as stored, `--weights f32` as float32; same tokens.
TEST(HalfWeightsCli, GenerateHoldsTheWeightsAsStoredAndF32TwiceThat)
{
    test::TempDir dir;
    const auto model = synthesised_gpt2_small_f16();
    ASSERT_FALSE(model.empty()) << "synth failed";
    const double stored_kb =
        static_cast<double>(std::filesystem::file_size(model / "model.safetensors")) / 1024;
    const auto [half_ids, half_kb] = generate_ids_and_peak_kb(model, "half", dir);
    const auto [f32_ids, f32_kb] = generate_ids_and_peak_kb(model, "f32", dir);
    EXPECT_EQ(half_ids, f32_ids);
    EXPECT_EQ(half_ids.size(), 6u);
    // float32 holds the weights twice over: its peak exceeds half's by about the stored bytes.
    EXPECT_GT(static_cast<double>(f32_kb - half_kb), 0.8 * stored_kb)
        << "peak " << half_kb << " kB with half weights, " << f32_kb << " kB with f32, " << stored_kb
        << " kB stored";
    EXPECT_LT(static_cast<double>(half_kb), 1.25 * stored_kb + 400'000) // 400 MB: libtorch, the tokenizer
        << "peak " << half_kb << " kB with half weights";
}

// The same model exported as an F16 GGUF: half holds the file's matrices mapped as
// stored, f32 widens them; same tokens. A kernel the setting names wrongly is refused.
TEST(HalfWeightsCli, GenerateOnAnF16GgufHoldsTheWeightsAsStored)
{
    test::TempDir dir;
    const auto model = synthesised_gpt2_small_f16();
    ASSERT_FALSE(model.empty()) << "synth failed";
    const auto gguf = dir / "gpt2-f16.gguf";
    const auto run =
        test::cli({"export", model.string(), "--format", "gguf", "--type", "f16", "--out", gguf.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const double stored_kb = static_cast<double>(std::filesystem::file_size(gguf)) / 1024;
    const auto [half_ids, half_kb] = generate_ids_and_peak_kb(gguf, "half", dir);
    const auto [f32_ids, f32_kb] = generate_ids_and_peak_kb(gguf, "f32", dir);
    EXPECT_EQ(half_ids, f32_ids);
    EXPECT_EQ(half_ids.size(), 6u);
    EXPECT_GT(static_cast<double>(f32_kb - half_kb), 0.8 * stored_kb)
        << "peak " << half_kb << " kB with half weights, " << f32_kb << " kB with f32, " << stored_kb
        << " kB stored";
    EXPECT_LT(static_cast<double>(half_kb), 1.25 * stored_kb + 400'000)
        << "peak " << half_kb << " kB with half weights";

    const auto refused = test::cli({"generate", gguf.string(), "--prompt", "Once", "--max-tokens", "1"},
                                   {"EMBEDLAB_HALF_KERNEL=avx9"});
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.err.find("EMBEDLAB_HALF_KERNEL is 'avx9': expected portable or avx2"),
              std::string::npos)
        << refused.err;
    const auto prompt_refused =
        test::cli({"generate", gguf.string(), "--prompt", "Once upon a time", "--max-tokens", "1"},
                  {"EMBEDLAB_HALF_PROMPT=blocks"});
    EXPECT_NE(prompt_refused.exit_code, 0);
    EXPECT_NE(prompt_refused.err.find("EMBEDLAB_HALF_PROMPT is 'blocks': expected tiles or sgemm"),
              std::string::npos)
        << prompt_refused.err;
}

// Issue 63 goal 5 on a 4-layer Qwen2.5-0.5B shape in f16 (196 M weights, 392 MB, 70% of
// them the tied 151,936 x 896 table): `generate --weights half`'s peak RSS, safetensors and
// F16 GGUF, is at most 1.15x the stored bytes plus 256 MiB for the runtime (libtorch's
// code and heap, the 151,665-id tokenizer: 217-227 MiB measured beside the full 0.5B
// shape on 2026-11-29). A float32 token table (+519 MiB) would exceed it.
TEST(HalfWeightsCli, GeneratePeakOnAQwenShapeIsTheStoredWeightsAndTheRuntime)
{
    test::TempDir dir;
    const auto model = dir / "qwen-f16";
    const auto synth = test::cli({"synth", "--like", "qwen2.5-0.5b", "--layers", "4", "--dtype", "f16",
                                  "--out", model.string(), "--quiet"});
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    const auto gguf = dir / "qwen-f16.gguf";
    const auto run =
        test::cli({"export", model.string(), "--format", "gguf", "--type", "f16", "--out", gguf.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    constexpr double runtime_kb = 256 * 1024;
    for (const auto& [path, stored] :
         {std::pair{model, model / "model.safetensors"}, std::pair{gguf, gguf}}) {
        const double stored_kb = static_cast<double>(std::filesystem::file_size(stored)) / 1024;
        const auto [ids, peak_kb] = generate_ids_and_peak_kb(path, "half", dir);
        EXPECT_EQ(ids.size(), 6u) << path;
        EXPECT_LE(static_cast<double>(peak_kb), 1.15 * stored_kb + runtime_kb)
            << path << ": peak " << peak_kb << " kB, " << stored_kb << " kB stored";
    }
}

} // namespace
} // namespace embedlab
