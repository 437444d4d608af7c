// Incremental decoding over a KV cache (generate.hpp).
#include "embedlab/generate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>

#include "embedlab/error.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/non_finite.hpp"
#include "eval/divergence_statistics.hpp"
#include "model/blas_threads.hpp"
#include "model/half_products.hpp"
#include "model/token_decoder.hpp"

namespace embedlab {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_options(const GenerationOptions& o)
{
    if (o.max_tokens < 1 || o.max_tokens > 1'000'000)
        throw InputError("max_tokens must be from 1 to 1000000, not " + std::to_string(o.max_tokens));
    check_sampling(o.sampling);
    if (o.top_n < 0 || o.top_n > 100)
        throw InputError("top_n must be from 0 to 100, not " + std::to_string(o.top_n));
    for (const auto& stop : o.stop)
        if (stop.empty())
            throw InputError("a stop string is empty");
}

// One row of next-token logits [V] and its log-probabilities, logits[i] - normaliser: one
// pass of float32 exps summed in double (half_products.hpp), where a finiteness check and
// log_softmax over a double copy took 120 us a token on 32,000 logits (2026-11-30).
class NextToken {
public:
    // Throws NonFiniteError naming `who` when a logit is not finite.
    NextToken(const torch::Tensor& logits, const std::string& who, const std::string& at,
              const std::string& refusal)
        : row_(logits.to(torch::kFloat).contiguous()),
          x_(row_.data_ptr<float>(), static_cast<size_t>(row_.numel()))
    {
        const auto lse = detail::log_sum_exp(x_);
        if (lse.non_finite >= 0)
            require_finite(static_cast<double>(x_[static_cast<size_t>(lse.non_finite)]), who, at, refusal);
        normaliser_ = lse.value;
    }

    std::span<const float> logits() const { return x_; }
    double logprob(int32_t id) const { return x_[static_cast<size_t>(id)] - normaliser_; }

    // Tokens more likely than `id`.
    int64_t rank(int32_t id) const
    {
        const float of_id = x_[static_cast<size_t>(id)];
        return std::count_if(x_.begin(), x_.end(), [of_id](float v) { return v > of_id; });
    }

    std::vector<TokenProbability> top(int64_t n) const
    {
        std::vector<TokenProbability> top;
        if (n == 0)
            return top;
        auto [values, ids] = row_.topk(std::min(n, row_.size(0)));
        for (int64_t i = 0; i < values.size(0); ++i)
            top.push_back({static_cast<int32_t>(ids[i].item<int64_t>()),
                           std::exp(values[i].item<double>() - normaliser_)});
        return top;
    }

private:
    torch::Tensor row_;
    std::span<const float> x_;
    double normaliser_ = 0;
};

// Bytes of `s` that end on a whole UTF-8 character.
size_t complete_utf8(const std::string& s)
{
    size_t end = s.size(), back = 0;
    while (back < 4 && back < end && (static_cast<unsigned char>(s[end - 1 - back]) & 0xC0) == 0x80)
        ++back;
    if (back == end)
        return end;
    const auto lead = static_cast<unsigned char>(s[end - 1 - back]);
    const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return want > back + 1 ? end - 1 - back : end;
}

// The continuation's text so far, and how much of it is safe to show: whole UTF-8
// characters, not ending in what may be the start of a stop string.
class ContinuationText {
public:
    ContinuationText(const Tokenizer* tokenizer, std::span<const int32_t> prompt,
                     const std::vector<std::string>& stop)
        : tokenizer_(tokenizer), ids_(prompt.begin(), prompt.end()), prompt_size_(prompt.size()), stop_(stop)
    {
        if (tokenizer_)
            prompt_text_ = tokenizer_->decode(ids_);
    }

    // Adds a token; true when a stop string now appears (the text is cut before it).
    bool add(int32_t id)
    {
        if (!tokenizer_)
            return false;
        ids_.push_back(id);
        auto all = tokenizer_->decode(ids_);
        // Decoding the continuation with its prompt keeps the first token's leading space.
        text_ = all.rfind(prompt_text_, 0) == 0 ? all.substr(prompt_text_.size())
                                                : tokenizer_->decode(std::span(ids_).subspan(prompt_size_));
        for (const auto& stop : stop_)
            if (const auto at = text_.find(stop); at != std::string::npos) {
                text_.resize(at);
                return true;
            }
        return false;
    }

    // The new text that can be shown (all of it when `final`).
    std::string take(bool final)
    {
        size_t end = final ? text_.size() : complete_utf8(text_);
        if (!final)
            for (const auto& stop : stop_)
                for (size_t n = std::min(stop.size() - 1, end); n > 0; --n)
                    if (text_.compare(end - n, n, stop, 0, n) == 0) {
                        end -= n;
                        break;
                    }
        if (end <= shown_)
            return {};
        auto fresh = text_.substr(shown_, end - shown_);
        shown_ = end;
        return fresh;
    }

    const std::string& text() const { return text_; }

private:
    const Tokenizer* tokenizer_;
    std::vector<int32_t> ids_;
    size_t prompt_size_;
    const std::vector<std::string>& stop_;
    std::string prompt_text_, text_;
    size_t shown_ = 0;
};

// Attention's scores for the prompt, per layer, at most about this many bytes: a prompt
// read whole makes [heads, T, T] of them twice (scores and softmax), 2.2 GB at 3,791
// tokens on qwen2.5-0.5b, more than its weights' 1.98 GB.
constexpr int64_t kPromptScoreBytes = int64_t{64} << 20;

// Tokens of a T-token read, after `cached`, that attention reads at a time within
// kPromptScoreBytes (all of them when they fit: a short prompt is read as one part).
int64_t prompt_part(const ModelConfig& c, int64_t cached, int64_t T)
{
    const int64_t per_token = 4 * std::max<int64_t>(c.num_heads, 1) * (cached + T);
    return std::clamp<int64_t>(kPromptScoreBytes / per_token, std::min<int64_t>(T, 64), T);
}

// One model reading a sequence token by token; logits() is the next-token row [V].
class Reader {
public:
    // A tied quant table of q8_0 / q4_0 blocks is read as stored (no float rows held);
    // low-rank and Tucker heads run from their factors in head() (project()); the rest
    // rebuild their rows once, since rebuilding per token costs more than the product.
    // One token at a time goes through TokenDecoder where it covers the model.
    explicit Reader(const LanguageModel& model)
        : model_(model), blocks_(model.has_block_head()),
          rows_(blocks_ ? torch::Tensor() : model.head_rows()),
          stepper_(detail::token_decoder_setting() ? detail::TokenDecoder::for_model(model) : nullptr)
    {
    }

    void read(const torch::Tensor& ids) // [1, T]
    {
        const int64_t T = ids.size(1), part = prompt_part(model_.config(), cache_.length(), T);
        torch::Tensor h;
        for (int64_t at = 0; at < T; at += part) // through the cache, a part at a time
            h = model_.hidden_states(ids.narrow(1, at, std::min(part, T - at)), cache_);
        take_logits(h[0].narrow(0, h.size(1) - 1, 1));
    }

    void read_token(int64_t id)
    {
        if (stepper_)
            take_logits(stepper_->step(id, cache_).view({1, -1}));
        else
            read(torch::tensor({{id}}, torch::kLong));
    }
    const torch::Tensor& logits() const { return logits_; }

private:
    void take_logits(const torch::Tensor& last) // [1, d]
    {
        logits_ = (blocks_ ? model_.block_head(last) : model_.head(last, rows_))[0];
    }
    const LanguageModel& model_;
    bool blocks_;
    torch::Tensor rows_;
    KvCache cache_;
    torch::Tensor logits_;
    std::unique_ptr<detail::TokenDecoder> stepper_;
};

} // namespace

Generation generate(const LanguageModel& model, const Tokenizer* tokenizer, std::span<const int32_t> prompt,
                    const GenerationOptions& options, const TokenFn& on_token, const LanguageModel* reference)
{
    c10::InferenceMode guard;
    if (model.config().is_encoder())
        throw InputError(model.config().type_name() + " is an encoder: it does not generate text");
    check_options(options);
    const int64_t V = model.config().vocab_size, P = static_cast<int64_t>(prompt.size());
    if (P == 0)
        throw InputError("the prompt has no tokens");
    for (int32_t id : prompt)
        if (id < 0 || id >= V)
            throw InputError("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(V) + ")");
    if (P > model.max_context())
        throw InputError("the prompt has " + std::to_string(P) +
                         " tokens, more than the model's context of " + std::to_string(model.max_context()) +
                         " positions");
    if (reference && reference->config().vocab_size != V)
        throw InputError("the reference model has a vocabulary of " +
                         std::to_string(reference->config().vocab_size) + " tokens and the model " +
                         std::to_string(V) + "; a comparison needs the same vocabulary");
    const int64_t context =
        reference ? std::min(model.max_context(), reference->max_context()) : model.max_context();

    Generation g;
    g.prompt.assign(prompt.begin(), prompt.end());
    std::mt19937_64 rng(options.sampling.seed);
    ContinuationText text(tokenizer, prompt, options.stop);
    const auto eos = tokenizer ? tokenizer->eos_id() : std::nullopt;

    // Half weights: the big products run on EmbedLab's kernels, attention's on the caller.
    std::optional<detail::OpenBlasThreads> blas_on_caller;
    if (holds_half_weights(model) && (!reference || holds_half_weights(*reference)))
        blas_on_caller.emplace(1);
    auto t0 = std::chrono::steady_clock::now();
    Reader reader(model);
    std::optional<Reader> reference_reader;
    const auto prompt_ids =
        torch::from_blob(const_cast<int32_t*>(prompt.data()), {1, P}, torch::kInt32).to(torch::kLong);
    reader.read(prompt_ids);
    if (reference) {
        reference_reader.emplace(*reference);
        reference_reader->read(prompt_ids);
    }
    g.prompt_seconds = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0;; ++i) {
        // NaN logits would give token 0 and null log-probabilities (argmax of NaN).
        const std::string at = "non-finite logits for generated token " + std::to_string(i + 1);
        const NextToken p(reader.logits(), "the model", at, "no text is generated");
        std::optional<NextToken> q;
        if (reference_reader)
            q.emplace(reference_reader->logits(), "the reference model", at, "no comparison is reported");
        GeneratedToken t;
        t.id = sample_token(p.logits(), options.sampling, rng);
        t.logprob = p.logprob(t.id);
        t.top = p.top(options.top_n);
        if (tokenizer)
            t.piece = tokenizer->token_text(t.id);
        if (q) {
            t.kl = detail::kl_rows(torch::log_softmax(reference_reader->logits().to(torch::kDouble), 0),
                                   torch::log_softmax(reader.logits().to(torch::kDouble), 0))
                       .item<double>();
            t.reference_rank = q->rank(t.id);
            t.reference_top = q->top(options.top_n);
        }
        if (options.stop_at_eos && eos && t.id == *eos)
            g.stop_reason = "eos";
        else if (text.add(t.id))
            g.stop_reason = "stop";
        else if (i + 1 == options.max_tokens)
            g.stop_reason = "max_tokens";
        else if (P + i >= context) // no position left to read this token at
            g.stop_reason = "context";
        t.text = text.take(!g.stop_reason.empty());
        g.tokens.push_back(t);
        if (on_token && !on_token(g.tokens.back()))
            throw Cancelled();
        if (!g.stop_reason.empty())
            break;
        reader.read_token(t.id);
        if (reference_reader)
            reference_reader->read_token(t.id);
    }
    g.generate_seconds = seconds_since(t0);
    g.text = text.text();
    g.prompt_tokens_per_second = g.prompt_seconds > 0 ? static_cast<double>(P) / g.prompt_seconds : 0;
    g.tokens_per_second =
        g.generate_seconds > 0 ? static_cast<double>(g.tokens.size()) / g.generate_seconds : 0;
    return g;
}

std::vector<int32_t> prompt_ids(const Tokenizer& tokenizer, std::string_view text, bool bos)
{
    std::vector<int32_t> ids;
    const auto b = tokenizer.bos_id();
    if (bos && b && b != tokenizer.eos_id())
        ids.push_back(*b);
    const auto encoded = tokenizer.encode(text);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    return ids;
}

nlohmann::ordered_json generated_token_json(const GeneratedToken& t)
{
    using Json = nlohmann::ordered_json;
    auto probabilities = [](const std::vector<TokenProbability>& top) {
        Json a = Json::array();
        for (const auto& p : top)
            a.push_back({{"id", p.id}, {"p", p.probability}});
        return a;
    };
    Json j = {{"id", t.id}, {"piece", t.piece}, {"text", t.text}, {"logprob", t.logprob}};
    j["top"] = probabilities(t.top);
    if (!std::isnan(t.kl)) {
        j["kl"] = t.kl;
        j["reference_rank"] = t.reference_rank;
        j["reference_top"] = probabilities(t.reference_top);
    }
    return j;
}

nlohmann::ordered_json generation_json(const Generation& g)
{
    using Json = nlohmann::ordered_json;
    Json tokens = Json::array(), ids = Json::array();
    for (const auto& t : g.tokens) {
        tokens.push_back(generated_token_json(t));
        ids.push_back(t.id);
    }
    return {{"prompt_ids", g.prompt},
            {"prompt_tokens", g.prompt.size()},
            {"ids", ids},
            {"text", g.text},
            {"stop_reason", g.stop_reason},
            {"tokens", tokens},
            {"prompt_seconds", g.prompt_seconds},
            {"prompt_tokens_per_second", g.prompt_tokens_per_second},
            {"generate_seconds", g.generate_seconds},
            {"tokens_per_second", g.tokens_per_second}};
}

} // namespace embedlab
