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

    // The inputs, window by window.
    std::vector<MaskedInput> inputs;
    std::mt19937_64 rng(options.seed);
    const auto n = static_cast<int64_t>(ids.size()), width = options.ctx - 2;
    for (int64_t start = 0; start < n; start += width) {
        const int64_t len = std::min(width, n - start);
        std::vector<int64_t> framed{cls};
        framed.insert(framed.end(), ids.begin() + start, ids.begin() + start + len);
        framed.push_back(sep);
        std::vector<int64_t> chosen;
        if (options.mask_rate == 0) {
            for (int64_t p = 1; p <= len; ++p)
                inputs.push_back({framed, {p}, {framed[static_cast<size_t>(p)]}});
            continue;
        }
        chosen.resize(static_cast<size_t>(len));
        std::iota(chosen.begin(), chosen.end(), 1);
        std::shuffle(chosen.begin(), chosen.end(), rng);
        const auto k = std::max<int64_t>(1, std::llround(options.mask_rate * static_cast<double>(len)));
        chosen.resize(static_cast<size_t>(k));
        std::sort(chosen.begin(), chosen.end());
        MaskedInput in{framed, chosen, {}};
        for (const int64_t p : chosen)
            in.targets.push_back(framed[static_cast<size_t>(p)]);
        inputs.push_back(std::move(in));
    }
    for (auto& in : inputs)
        for (const int64_t p : in.positions)
            in.ids[static_cast<size_t>(p)] = mask;

    c10::InferenceMode guard;
    MaskedLmResult r;
    double nll = 0, kl = 0;
    int64_t right = 0;
    const auto total = static_cast<int64_t>(inputs.size());
    report_progress(progress, 0, total);
    for (int64_t b0 = 0; b0 < total; b0 += options.batch) {
        const int64_t count = std::min(options.batch, total - b0);
        size_t T = 0;
        for (int64_t i = b0; i < b0 + count; ++i)
            T = std::max(T, inputs[static_cast<size_t>(i)].ids.size());
        auto batch =
            torch::full({count, static_cast<int64_t>(T)}, tokenizer.pad_id().value_or(0), torch::kLong);
        auto attention = torch::zeros({count, static_cast<int64_t>(T)}, torch::kLong);
        std::vector<int64_t> rows, cols, targets;
        for (int64_t i = 0; i < count; ++i) {
            const auto& in = inputs[static_cast<size_t>(b0 + i)];
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
