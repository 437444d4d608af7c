// TokenDecoder (model/token_decoder.hpp): generation's one-token steps in plain loops give
// the torch forward's hidden states, after a prompt the torch forward read into the same
// cache, on every shared model it covers, float32 and half weights alike; it declines
// the models it does not cover; EMBEDLAB_TOKEN_STEP names its values.
#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/model.hpp"
#include "model/token_decoder.hpp"
#include "shared_models.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

namespace embedlab {
namespace {

// Largest |step - torch| over the largest |torch| of the hidden states of `steps` tokens
// decoded one at a time after an 8-token prompt, both from the torch forward's prompt.
double step_gap_after_prompt(const LanguageModel& model, detail::TokenDecoder& decoder, int steps)
{
    const int64_t V = model.config().vocab_size;
    const auto ids = test::spread_ids(8 + steps, V, 7, 3);
    const auto prompt = torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + 8)).unsqueeze(0);
    KvCache through_steps, through_torch;
    model.hidden_states(prompt, through_steps);
    model.hidden_states(prompt, through_torch);
    double gap = 0;
    for (int s = 0; s < steps; ++s) {
        const int64_t id = ids[static_cast<size_t>(8 + s)];
        const auto stepped = decoder.step(id, through_steps);
        const auto expected = model.hidden_states(torch::full({1, 1}, id, torch::kLong), through_torch);
        EXPECT_EQ(stepped.sizes(), expected.sizes());
        gap = std::max(gap, (stepped - expected).abs().max().item<double>() /
                                std::max(1e-30, expected.abs().max().item<double>()));
    }
    EXPECT_EQ(through_steps.length(), through_torch.length());
    return gap;
}

TEST(TokenDecoder, StepsEqualTheTorchForwardOnEveryCoveredModelInF32AndHalf)
{
    EMBEDLAB_REQUIRE_SHARED();
    std::vector<std::string> covered;
    auto models = test::shared_models();
    models.push_back({"tinygpt2-f16", "models/tinygpt2-f16"}); // the bundled model, f16
    for (const auto& m : models) {
        const auto dir = test::shared_dir() / m.dir;
        for (const auto weights : {GenerationWeights::F32, GenerationWeights::Half}) {
            const auto loaded = load_model_for_generation(dir, {.need_tokenizer = false}, weights);
            auto decoder = detail::TokenDecoder::for_model(*loaded.model);
            if (!decoder)
                continue;
            const std::string what = m.name + (weights == GenerationWeights::Half ? " half" : " f32");
            covered.push_back(what);
            // 8 + 60 positions: the cache grows past its first 64 during the steps.
            EXPECT_LT(step_gap_after_prompt(*loaded.model, *decoder, 60), 1e-4) << what;
        }
    }
    // The llama family: tinyllama, SmolLM2, Llama 3.2 with rope scaling, Qwen2 (q/k/v
    // biases); GPT-2 in f32 and f16. Not Phi-3: its layers slide (a window of 2,047).
    const std::vector<std::string> expected{
        "tinyllama f32",    "tinyllama half",    "tinygpt2 f32",           "tinygpt2 half",
        "smollm2-tied f32", "smollm2-tied half", "llama32-ropescaled f32", "llama32-ropescaled half",
        "qwen2 f32",        "qwen2 half",        "tinygpt2-f16 f32",       "tinygpt2-f16 half"};
    EXPECT_EQ(covered, expected);
}

// What the loops do not cover goes through the torch forward: Qwen3's q/k norms, Gemma 2's soft-capping,
// Phi-3's sliding window, GPT-NeoX's parallel residual.
TEST(TokenDecoder, DeclinesWhatItDoesNotCover)
{
    EMBEDLAB_REQUIRE_SHARED();
    for (const auto* name :
         {"models/zoo/qwen3", "models/zoo/gemma2", "models/zoo/phi3", "models/zoo/gptneox"}) {
        const auto loaded = load_model(test::shared_dir() / name, {.need_tokenizer = false});
        EXPECT_EQ(detail::TokenDecoder::for_model(*loaded.model), nullptr) << name;
    }
}

TEST(TokenDecoder, TheSettingNamesItsValues)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto model = (test::shared_dir() / "models/tinyllama").string();
    const auto args =
        std::vector<std::string>{"generate", model, "--prompt", "Once", "--max-tokens", "3", "--json"};
    const auto loops = test::cli(args, {"EMBEDLAB_TOKEN_STEP=loops"});
    const auto torch_forward = test::cli(args, {"EMBEDLAB_TOKEN_STEP=torch"});
    ASSERT_EQ(loops.exit_code, 0) << loops.err;
    ASSERT_EQ(torch_forward.exit_code, 0) << torch_forward.err;
    EXPECT_EQ(test::json_of(loops)["text"], test::json_of(torch_forward)["text"]);
    const auto refused = test::cli(args, {"EMBEDLAB_TOKEN_STEP=fast"});
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.err.find("EMBEDLAB_TOKEN_STEP is 'fast': expected loops or torch"), std::string::npos)
        << refused.err;
}

} // namespace
} // namespace embedlab
