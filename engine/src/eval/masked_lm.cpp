// Pseudo-perplexity and masked-token accuracy (masked_lm.hpp).
#include "embedlab/masked_lm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "embedlab/non_finite.hpp"
#include "embedlab/tokenizer.hpp"

namespace embedlab {

namespace {

// One input to score: the framed window with some positions masked, and which.
struct MaskedInput {
    std::vector<int64_t> ids;       // [CLS] window [SEP], masked
    std::vector<int64_t> positions; // in ids
    std::vector<int64_t> targets;   // the original ids there
};

int32_t needed(std::optional<int32_t> id, const char* what)
{
    if (!id)
        throw InputError(std::string("masked-LM scoring needs a ") + what +
                         " token, which the tokenizer has not");
    return *id;
}

// The inputs to score, made in order as batches need them: a list of every input
// held a framed window per token (about 1 KB per token at ctx 128; issue 57 item 9).
// The random draws happen in the same order as for the whole list.
class MaskedInputs {
public:
    MaskedInputs(std::span<const int32_t> ids, const MaskedLmOptions& options, int64_t cls, int64_t sep,
                 int64_t mask)
        : ids_(ids), every_position_(options.mask_rate == 0), rate_(options.mask_rate),
          width_(options.ctx - 2), cls_(cls), sep_(sep), mask_(mask), rng_(options.seed)
    {
    }
    // Every position in turn: one input per token; else one per window.
    int64_t total() const
    {
        const auto n = static_cast<int64_t>(ids_.size());
        return every_position_ ? n : (n + width_ - 1) / width_;
    }
    MaskedInput next()
    {
        if (!every_position_) {
            frame(start_);
            start_ += width_;
            return masked_at_random();
        }
        if (framed_.empty() || position_ > window_length_) {
            if (!framed_.empty())
                start_ += width_;
            frame(start_);
            position_ = 1;
        }
        MaskedInput in{framed_, {position_}, {framed_[static_cast<size_t>(position_)]}};
        in.ids[static_cast<size_t>(position_++)] = mask_;
        return in;
    }

private:
    void frame(int64_t start)
    {
        window_length_ = std::min(width_, static_cast<int64_t>(ids_.size()) - start);
        framed_.assign(1, cls_);
        framed_.insert(framed_.end(), ids_.begin() + start, ids_.begin() + start + window_length_);
        framed_.push_back(sep_);
    }
    MaskedInput masked_at_random()
    {
        std::vector<int64_t> chosen(static_cast<size_t>(window_length_));
        std::iota(chosen.begin(), chosen.end(), 1);
        std::shuffle(chosen.begin(), chosen.end(), rng_);
        const auto k = std::max<int64_t>(1, std::llround(rate_ * static_cast<double>(window_length_)));
        chosen.resize(static_cast<size_t>(k));
        std::sort(chosen.begin(), chosen.end());
        MaskedInput in{framed_, chosen, {}};
        for (const int64_t p : chosen) {
            in.targets.push_back(framed_[static_cast<size_t>(p)]);
            in.ids[static_cast<size_t>(p)] = mask_;
        }
        return in;
    }

    std::span<const int32_t> ids_;
    bool every_position_;
    double rate_;
    int64_t width_, cls_, sep_, mask_;
    std::mt19937_64 rng_;
    int64_t start_ = 0, position_ = 0, window_length_ = 0;
    std::vector<int64_t> framed_;
};

} // namespace

MaskedLmResult evaluate_masked_lm(const LanguageModel& model, const Tokenizer& tokenizer,
                                  std::span<const int32_t> ids, const MaskedLmOptions& options,
                                  const LanguageModel* reference, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    const auto& c = model.config();
    if (c.encoder_head != EncoderHead::MaskedLM)
        throw InputError(c.type_name() + " model without a masked-LM head: pseudo-perplexity needs one");
    if (options.ctx < 3 || options.ctx > model.max_context())
        throw InputError("--ctx " + std::to_string(options.ctx) + " must be from 3 to the model's " +
                         std::to_string(model.max_context()) + " positions");
    if (!(options.mask_rate >= 0 && options.mask_rate < 1))
        throw InputError("--mask-rate must be in [0, 1) (0: every token in turn)");
    if (options.batch < 1)
        throw InputError("batch must be at least 1");
    if (ids.empty())
        throw InputError("the text has no tokens");
    const int64_t cls = needed(tokenizer.cls_id(), "[CLS]"), sep = needed(tokenizer.sep_id(), "[SEP]"),
                  mask = needed(tokenizer.mask_id(), "[MASK]");

    MaskedInputs source(ids, options, cls, sep, mask);

    c10::InferenceMode guard;
    MaskedLmResult r;
    double nll = 0, kl = 0;
    int64_t right = 0;
    const int64_t total = source.total();
    report_progress(progress, 0, total);
    for (int64_t b0 = 0; b0 < total; b0 += options.batch) {
        const int64_t count = std::min(options.batch, total - b0);
        std::vector<MaskedInput> inputs;
        size_t T = 0;
        for (int64_t i = 0; i < count; ++i) {
            inputs.push_back(source.next());
            T = std::max(T, inputs.back().ids.size());
        }
        auto batch =
            torch::full({count, static_cast<int64_t>(T)}, tokenizer.pad_id().value_or(0), torch::kLong);
        auto attention = torch::zeros({count, static_cast<int64_t>(T)}, torch::kLong);
        std::vector<int64_t> rows, cols, targets;
        for (int64_t i = 0; i < count; ++i) {
            const auto& in = inputs[static_cast<size_t>(i)];
            const auto len = static_cast<int64_t>(in.ids.size());
            batch[i].narrow(0, 0, len).copy_(torch::tensor(in.ids, torch::kLong));
            attention[i].narrow(0, 0, len).fill_(1);
            for (size_t j = 0; j < in.positions.size(); ++j) {
                rows.push_back(i);
                cols.push_back(in.positions[j]);
                targets.push_back(in.targets[j]);
            }
        }
        const auto row_index = torch::tensor(rows, torch::kLong),
                   col_index = torch::tensor(cols, torch::kLong);
        auto masked_logp = [&](const LanguageModel& m) {
            const auto hidden = m.encoder_hidden_states(batch, {}, attention).index({row_index, col_index});
            return torch::log_softmax(m.head(hidden).to(torch::kDouble), -1);
        };
        const auto logp = masked_logp(model);
        const std::string where = "non-finite logits in batch " + std::to_string(b0 / options.batch + 1);
        require_finite(logp, "the model", where, "pseudo-perplexity is not reported");
        const auto target = torch::tensor(targets, torch::kLong);
        nll -= logp.gather(1, target.unsqueeze(1)).sum().item<double>();
        right += logp.argmax(1).eq(target).sum().item<int64_t>();
        if (reference) {
            const auto ref = masked_logp(*reference);
            require_finite(ref, "the reference model", where, "no divergence is reported");
            kl += (ref.exp() * (ref - logp)).sum().item<double>();
        }
        r.masked += static_cast<int64_t>(targets.size());
        report_progress(progress, b0 + count, total);
    }
    r.nll_per_token = nll / static_cast<double>(r.masked);
    r.pseudo_ppl = std::exp(r.nll_per_token);
    r.accuracy = static_cast<double>(right) / static_cast<double>(r.masked);
    if (reference)
        r.kl = kl / static_cast<double>(r.masked);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

nlohmann::ordered_json masked_lm_json(const MaskedLmResult& r, const MaskedLmOptions& options)
{
    nlohmann::ordered_json j{{"pseudo_ppl", r.pseudo_ppl},
                             {"nll_per_token", r.nll_per_token},
                             {"masked_accuracy", r.accuracy},
                             {"masked", r.masked},
                             {"ctx", options.ctx}};
    if (options.mask_rate > 0) {
        j["mask_rate"] = options.mask_rate;
        j["seed"] = options.seed;
    }
    if (r.kl >= 0)
        j["kl"] = r.kl;
    j["seconds"] = r.seconds;
    j["protocol"] = options.mask_rate > 0
                        ? "windows of ctx-2 ids framed [CLS] .. [SEP]; mask_rate of each window's positions "
                          "drawn with the seed, replaced by [MASK] at once; nll of the original ids there"
                        : "windows of ctx-2 ids framed [CLS] .. [SEP]; each position masked in turn "
                          "(pseudo-log-likelihood); nll of the original id";
    return j;
}

} // namespace embedlab
