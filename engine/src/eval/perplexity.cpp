#include <chrono>
#include <cmath>
#include <optional>

#include "embedlab/eval.hpp"
#include "embedlab/json_members.hpp"
#include "embedlab/model.hpp"
#include "embedlab/non_finite.hpp"
#include "embedlab/tokenizer.hpp"
#include "eval/decoded_size.hpp"
#include "eval/token_windows.hpp"

namespace embedlab {

namespace {

// A cancel heard after every decoder layer, not only between batches.
class CancelBetweenLayers : public ForwardObserver {
public:
    CancelBetweenLayers(const ProgressFn& progress, int64_t done, int64_t total)
        : progress_(progress), done_(done), total_(total)
    {
    }
    void decoder_output(int64_t, const torch::Tensor&) override { report_progress(progress_, done_, total_); }

private:
    const ProgressFn& progress_;
    int64_t done_, total_;
};

void check_windows(int64_t n, int64_t ctx, int64_t stride)
{
    if (ctx < 1)
        throw InputError("--ctx must be at least 1, got " + std::to_string(ctx));
    if (stride < 1 || stride > ctx)
        throw InputError("--stride must be between 1 and ctx (" + std::to_string(ctx) + "), got " +
                         std::to_string(stride));
    if (n < 2)
        throw InputError("the text has " + std::to_string(n) + " token(s); perplexity needs at least 2");
}

// The protocol's windows one at a time: a list of them costs 24 bytes a window, which
// at --ctx 1 is 24 bytes per token (issue 57 item 9).
class WindowCursor {
public:
    WindowCursor(int64_t n, int64_t ctx, int64_t stride) : n_(n), ctx_(ctx), stride_(stride) { advance(); }
    bool done() const { return !has_current_; }
    const EvalWindow& peek() const { return current_; }
    EvalWindow next()
    {
        const EvalWindow w = current_;
        advance();
        return w;
    }

private:
    void advance()
    {
        has_current_ = false;
        while (!finished_ && !has_current_) {
            const int64_t start = start_, end = std::min(start + ctx_ + 1, n_);
            // Targets 1..scored_until_ are already scored.
            const int64_t first_target = std::max(start + 1, scored_until_ + 1);
            if (first_target <= end - 1) {
                current_ = EvalWindow{start, end - start, first_target - (start + 1)};
                has_current_ = true;
            }
            scored_until_ = end - 1;
            finished_ = end == n_;
            start_ += stride_;
        }
    }

    int64_t n_, ctx_, stride_, start_ = 0, scored_until_ = 0;
    bool finished_ = false;
    bool has_current_ = false; // not std::optional: GCC 12 warns maybe-uninitialized on its copy
    EvalWindow current_;
};

} // namespace

std::vector<EvalWindow> perplexity_windows(int64_t n, int64_t ctx, int64_t stride)
{
    check_windows(n, ctx, stride);
    std::vector<EvalWindow> windows;
    for (WindowCursor c(n, ctx, stride); !c.done();)
        windows.push_back(c.next());
    return windows;
}

PerplexityResult evaluate_perplexity(const LanguageModel& model, std::span<const int32_t> ids,
                                     const PerplexityOptions& options, const ProgressFn& progress)
{
    c10::InferenceMode guard;
    if (model.config().is_encoder())
        throw InputError(model.config().type_name() +
                         " is an encoder: it has no next-token perplexity (it reads every position at once)");
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t ctx = options.ctx;
    const int64_t stride = options.stride > 0 ? options.stride : ctx;
    if (ctx > model.max_context())
        throw InputError("--ctx " + std::to_string(ctx) + " exceeds the " +
                         std::to_string(model.max_context()) + "-token context the model was trained for");
    const auto n = static_cast<int64_t>(ids.size());
    check_windows(n, ctx, stride);
    const int64_t V = model.config().vocab_size;
    // About 2048 positions per batch keeps the matrix products efficient (each
    // weight is packed once for the whole batch); a large model's batch is cut so
    // one decoder layer stays near 16 GFLOP (well under a second here), because a
    // cancel is heard between layers. Deterministic: the batch depends on the
    // model's shape only, never on timing.
    const auto& c = model.config();
    const double flops_per_layer_position = 2.0 * (4.0 * double(c.hidden_size) * double(c.hidden_size) +
                                                   3.0 * double(c.hidden_size) * double(c.intermediate_size));
    const int64_t by_cost =
        static_cast<int64_t>(16e9 / std::max(1.0, flops_per_layer_position * double(ctx)));
    const int64_t batch = options.batch_windows > 0
                              ? options.batch_windows
                              : std::clamp<int64_t>(by_cost, 1, std::max<int64_t>(1, 2048 / ctx));

    const auto ids32 = detail::int32_ids(ids); // widened per batch (token_windows.hpp)
    double total_nll = 0;
    int64_t scored = 0;
    // Progress in predicted positions, reported after every head chunk too: the
    // head of a large vocabulary is most of the work of a small model.
    int64_t positions = 0, positions_done = 0, window_count = 0;
    for (WindowCursor c(n, ctx, stride); !c.done(); ++window_count)
        positions += c.next().length - 1;
    report_progress(progress, 0, positions);
    // A tied head that rebuilds its rows (tt, lle, fourier) does so once here, not per chunk.
    const auto head_rows = model.head_rows();
    for (WindowCursor cursor(n, ctx, stride); !cursor.done();) {
        // A batch: consecutive windows of the same length.
        std::vector<EvalWindow> windows{cursor.next()};
        while (!cursor.done() && windows.size() < static_cast<size_t>(batch) &&
               cursor.peek().length == windows[0].length)
            windows.push_back(cursor.next());
        const int64_t len = windows[0].length, T = len - 1;
        std::vector<torch::Tensor> window_ids;
        for (const auto& w : windows)
            window_ids.push_back(ids32.narrow(0, w.start, len));
        auto batch_ids = torch::stack(window_ids).to(torch::kLong); // [B, len]
        auto inputs = batch_ids.narrow(1, 0, T);
        auto targets = batch_ids.narrow(1, 1, T).reshape({-1});
        CancelBetweenLayers between_layers(progress, positions_done, positions);
        auto hidden =
            model.hidden_states(inputs, &between_layers).reshape({-1, model.config().embedding_dim()});
        // Head and loss in row chunks whose logits stay under glibc's 32 MB mmap
        // threshold: freed blocks are then reused instead of unmapped, and fresh
        // pages fault in very slowly on VMs (5x slower end to end here).
        const int64_t rows = hidden.size(0), chunk = std::max<int64_t>(1, (24LL << 20) / (V * 4));
        std::vector<torch::Tensor> nll_parts;
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            const int64_t n = std::min(chunk, rows - r0);
            auto logits = model.head(hidden.narrow(0, r0, n), head_rows); // [n, V]
            auto target = targets.narrow(0, r0, n).unsqueeze(1);
            // NLL = logsumexp(logits) - logit[target]; no full log_softmax copy.
            nll_parts.push_back(torch::logsumexp(logits, -1) - logits.gather(1, target).squeeze(1));
            report_progress(progress, positions_done + r0 + n, positions);
        }
        positions_done += rows;
        auto nll = torch::cat(nll_parts).view({-1, T});
        for (size_t i = 0; i < windows.size(); ++i) {
            const auto& w = windows[i];
            auto row = nll[static_cast<int64_t>(i)].narrow(0, w.first_scored, T - w.first_scored);
            total_nll += row.to(torch::kDouble).sum().item<double>();
            scored += T - w.first_scored;
        }
    }

    PerplexityResult r;
    r.ids = static_cast<int64_t>(ids.size());
    r.tokens = scored;
    r.windows = window_count;
    r.nll_per_token = total_nll / static_cast<double>(scored);
    r.ppl = std::exp(r.nll_per_token);
    if (!std::isfinite(r.nll_per_token) || !std::isfinite(r.ppl))
        throw_non_finite("the model",
                         "a non-finite loss (NLL per token " + std::to_string(r.nll_per_token) + ")",
                         "perplexity is not reported");
    r.ctx = ctx;
    r.stride = stride;
    r.batch_windows = batch;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.tokens_per_second = r.seconds > 0 ? static_cast<double>(scored) / r.seconds : 0;
    return r;
}

void add_bits_per_byte(PerplexityResult& r, std::span<const int32_t> ids, const Tokenizer& tokenizer)
{
    if (ids.size() < 2 || r.tokens < 1 || static_cast<size_t>(r.tokens) + 1 > ids.size())
        return;
    // Every target from ids[1] on is scored once (perplexity_windows), so the scored
    // bytes are what ids[1..] add after ids[0]; decoding them with ids[0] in front keeps
    // SentencePiece's leading space and UTF-8 split across tokens as the text has them.
    // Counted a chunk at a time (decoded_size.hpp), not decoded whole.
    const int64_t all = detail::decoded_size(tokenizer, ids.first(static_cast<size_t>(r.tokens) + 1));
    const auto first = tokenizer.decode(ids.first(1));
    const auto bytes = all - static_cast<int64_t>(first.size());
    if (bytes < 1)
        return;
    r.scored_bytes = bytes;
    r.bits_per_byte =
        r.nll_per_token * static_cast<double>(r.tokens) / std::log(2.0) / static_cast<double>(bytes);
}

nlohmann::ordered_json perplexity_json(const PerplexityResult& r)
{
    nlohmann::ordered_json j;
    EMBEDLAB_JSON_MEMBERS(j, r, tokens, nll_per_token, ppl, ctx, stride, seconds, tokens_per_second, ids,
                          windows, batch_windows);
    if (r.scored_bytes > 0)
        EMBEDLAB_JSON_MEMBERS(j, r, scored_bytes, bits_per_byte);
    j["protocol"] =
        "METHODS.md section 0: whole text tokenized once, no BOS, windows of ctx+1 ids overlapping "
        "by one (stride < ctx: sliding windows)";
    return j;
}

} // namespace embedlab
