// Log-likelihood scoring of task choices (lm-evaluation-harness's protocol) and
// STS-B similarity; the formulas are in tasks.hpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "embedlab/encoder.hpp"
#include "embedlab/json_members.hpp"
#include "embedlab/non_finite.hpp"
#include "embedlab/tasks.hpp"
#include "eval/classifier_task.hpp"

namespace embedlab {

namespace {

// Code points of UTF-8 text (the harness divides by len() of a Python str).
int64_t characters(const std::string& s)
{
    return std::count_if(s.begin(), s.end(),
                         [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

int64_t argmax(const std::vector<double>& v)
{
    return std::max_element(v.begin(), v.end()) - v.begin();
}

std::vector<double> average_ranks(const std::vector<double>& v)
{
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> ranks(v.size());
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]])
            ++j;
        const double rank = (static_cast<double>(i + j) / 2.0) + 1.0; // ties share the mean rank
        for (size_t k = i; k <= j; ++k)
            ranks[order[k]] = rank;
        i = j + 1;
    }
    return ranks;
}

} // namespace

TaskResult evaluate_task(const LanguageModel& model, const Tokenizer& tokenizer, const TaskData& data,
                         const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    if (data.examples.empty())
        throw InputError(data.source + ": no examples");
    if (model.config().encoder_head == EncoderHead::Classification)
        return detail::evaluate_classifier_task(model, tokenizer, data, progress);
    if (is_classification_task(data.task) && data.task != "sst2")
        throw InputError(data.source + ": " + data.task + " is scored by a sequence classifier's head, and " +
                         model.config().type_name() +
                         " has none (sst2 alone is also scored zero-shot by log-likelihood)");
    if (model.config().is_encoder())
        throw InputError(data.source + ": " + data.task +
                         " scores choices by next-token log-likelihood, which " + model.config().type_name() +
                         " (an encoder without a classifier) does not give");
    const int64_t max_len = std::min<int64_t>(model.max_context(), 1 << 16);
    TaskResult r;
    r.task = data.task;
    int64_t right = 0, right_norm = 0;
    const auto total = static_cast<int64_t>(data.examples.size());
    report_progress(progress, 0, total);
    for (int64_t i = 0; i < total; ++i) {
        const TaskExample& e = data.examples[static_cast<size_t>(i)];
        const std::string where = data.source + ": example " + std::to_string(i + 1);
        TaskExampleResult out;
        out.label = e.label;
        std::vector<double> per_char;
        for (const std::string& continuation_text : e.continuations) {
            // Trailing spaces of the context belong to the continuation (the harness's _encode_pair).
            std::string context = e.context, continuation = continuation_text;
            const size_t kept = context.find_last_not_of(' ') + 1;
            continuation = context.substr(kept) + continuation;
            context.resize(kept);
            const auto context_ids = tokenizer.encode(context);
            const auto whole = tokenizer.encode(context + continuation);
            if (context_ids.empty())
                throw InputError(where + ": the context encodes to no tokens");
            if (whole.size() <= context_ids.size())
                throw InputError(where + ": the continuation '" + continuation + "' adds no tokens");
            std::vector<int64_t> sequence(context_ids.begin(), context_ids.end());
            sequence.insert(sequence.end(), whole.begin() + static_cast<std::ptrdiff_t>(context_ids.size()),
                            whole.end());
            const auto n = static_cast<int64_t>(whole.size() - context_ids.size());
            if (n > max_len)
                throw InputError(where + ": the continuation has " + std::to_string(n) +
                                 " tokens, more than the model's context of " + std::to_string(max_len));
            // The model reads all but the last token, at most max_len of them (cut from the left).
            const auto length = static_cast<int64_t>(sequence.size()) - 1;
            const int64_t T = std::min(length, max_len);
            out.truncated = out.truncated || T < length;
            const auto ids = torch::tensor(sequence, torch::kLong);
            const auto input = ids.narrow(0, length - T, T).unsqueeze(0);
            const auto targets = ids.narrow(0, length + 1 - n, n).unsqueeze(1);
            const auto logp =
                torch::log_softmax(model.logits(input)[0].narrow(0, T - n, n).to(torch::kDouble), -1);
            const double score = logp.gather(1, targets).sum().item<double>();
            // NaN scores would all lose to choice 0.
            require_finite(score, "the model",
                           "a non-finite log-likelihood for example " + std::to_string(i + 1) + "'s choice " +
                               std::to_string(out.loglik.size() + 1),
                           "the task is not scored");
            out.loglik.push_back(score);
            out.continuation_tokens.push_back(n);
            out.greedy.push_back(logp.argmax(-1).eq(targets.squeeze(1)).all().item<bool>());
            per_char.push_back(score /
                               static_cast<double>(std::max<int64_t>(1, characters(continuation_text))));
        }
        out.choice = argmax(out.loglik);
        out.choice_norm = argmax(per_char);
        right += out.choice == e.label;
        right_norm += out.choice_norm == e.label;
        r.examples.push_back(std::move(out));
        report_progress(progress, i + 1, total);
    }
    r.n = total;
    r.accuracy = static_cast<double>(right) / static_cast<double>(total);
    r.accuracy_norm = static_cast<double>(right_norm) / static_cast<double>(total);
    r.protocol =
        "lm-evaluation-harness loglikelihood: summed log-probability of the continuation tokens after the "
        "context, no BOS; accuracy_norm divides by the continuation's characters";
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

double choice_agreement(const TaskResult& a, const TaskResult& b)
{
    if (a.examples.size() != b.examples.size() || a.examples.empty())
        throw InputError("choice agreement needs two runs over the same examples (" +
                         std::to_string(a.examples.size()) + " and " + std::to_string(b.examples.size()) +
                         ")");
    int64_t same = 0;
    for (size_t i = 0; i < a.examples.size(); ++i)
        same += a.examples[i].choice == b.examples[i].choice;
    return static_cast<double>(same) / static_cast<double>(a.examples.size());
}

SimilarityResult evaluate_similarity(const LanguageModel& model, const Tokenizer& tokenizer,
                                     const std::vector<SentencePair>& pairs, const ProgressFn& progress)
{
    c10::InferenceMode guard;
    const auto t0 = std::chrono::steady_clock::now();
    if (pairs.size() < 2)
        throw InputError("STS-B needs at least two sentence pairs for a correlation");
    // Constant gold scores have no variance: both correlations are undefined, not 0.
    if (std::all_of(pairs.begin(), pairs.end(),
                    [&](const SentencePair& p) { return p.score == pairs[0].score; }))
        throw InputError("STS-B: every gold score is " + nlohmann::json(pairs[0].score).dump() + " (" +
                         std::to_string(pairs.size()) +
                         " pairs): Spearman and Pearson correlations are undefined for constant scores; give "
                         "pairs with different scores");
    const int64_t max_len = model.max_context();
    auto pooled = [&](const std::string& sentence, size_t pair) {
        if (model.config().is_encoder()) { // [CLS] sentence [SEP], the model's own pooling (encoder.hpp)
            const auto batch =
                frame_texts(tokenizer, model.config(), {sentence}, nullptr, static_cast<int64_t>(pair) + 1);
            return pool_hidden(batch_hidden_states(model, batch), batch.attention_mask,
                               default_pooling(model.config()))[0]
                .to(torch::kDouble);
        }
        const auto ids = tokenizer.encode(sentence);
        if (ids.empty())
            throw InputError("pair " + std::to_string(pair + 1) + ": a sentence encodes to no tokens");
        const auto n = std::min<int64_t>(static_cast<int64_t>(ids.size()), max_len);
        const auto t =
            torch::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + n), torch::kLong).unsqueeze(0);
        return model.hidden_states(t)[0].to(torch::kDouble).mean(0);
    };
    // A regression head (STS-B fine-tuned, one label) scores each pair itself.
    const bool regression =
        model.config().encoder_head == EncoderHead::Classification && model.config().labels.size() == 1;
    auto head_score = [&](const SentencePair& p, size_t pair) {
        const std::vector<std::string> first{p.first}, second{p.second};
        const auto batch =
            frame_texts(tokenizer, model.config(), first, &second, static_cast<int64_t>(pair) + 1);
        return model.classify(batch_hidden_states(model, batch))[0][0].item<double>();
    };
    SimilarityResult r;
    std::vector<double> gold;
    std::vector<torch::Tensor> firsts, seconds;
    const auto total = static_cast<int64_t>(pairs.size());
    report_progress(progress, 0, total);
    for (size_t i = 0; i < pairs.size(); ++i) {
        const auto a = pooled(pairs[i].first, i), b = pooled(pairs[i].second, i);
        const std::string pair = "pair " + std::to_string(i + 1);
        require_finite(a, "the model", "a non-finite embedding of " + pair + "'s first sentence",
                       "no correlation is reported");
        require_finite(b, "the model", "a non-finite embedding of " + pair + "'s second sentence",
                       "no correlation is reported");
        firsts.push_back(a);
        seconds.push_back(b);
        r.cosines.push_back(regression ? head_score(pairs[i], i)
                                       : (a.dot(b) / (a.norm() * b.norm()).clamp_min(1e-300)).item<double>());
        require_finite(r.cosines.back(), "the model",
                       std::string("a non-finite ") + (regression ? "regression score" : "cosine") + " for " +
                           pair,
                       "no correlation is reported");
        gold.push_back(pairs[i].score);
        report_progress(progress, static_cast<int64_t>(i) + 1, total);
    }
    r.n = total;
    firsts.insert(firsts.end(), seconds.begin(), seconds.end());
    r.embeddings = torch::stack(firsts);
    r.protocol =
        regression ? "the regression head's output (num_labels 1) on each pair framed [CLS] a [SEP] b [SEP]; "
                     "Spearman with average ranks for ties"
        : model.config().is_encoder()
            ? std::string("cosine of the model's own pooling (") +
                  pooling_name(default_pooling(model.config())) +
                  ") of final hidden states, each sentence framed [CLS] .. [SEP] alone; Spearman with "
                  "average ranks for ties"
            : "cosine of token-mean final hidden states (after the final norm), each sentence encoded "
              "alone without BOS; Spearman with average ranks for ties";
    r.spearman = spearman_correlation(r.cosines, gold);
    r.pearson = pearson_correlation(r.cosines, gold);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

double retrieval_agreement(const torch::Tensor& a, const torch::Tensor& b, int64_t k)
{
    c10::InferenceMode guard;
    if (a.dim() != 2 || b.dim() != 2 || a.size(0) != b.size(0))
        throw InputError("retrieval agreement needs two embeddings of the same rows");
    const int64_t n = a.size(0);
    if (k < 1 || k >= n)
        throw InputError("retrieval agreement: k = " + std::to_string(k) + " needs more than k rows (have " +
                         std::to_string(n) + ")");
    auto neighbours = [&](const torch::Tensor& e) {
        const auto unit = e.to(torch::kDouble) / e.to(torch::kDouble).norm(2, 1, true).clamp_min(1e-300);
        auto cos = torch::matmul(unit, unit.t());
        cos.fill_diagonal_(-std::numeric_limits<double>::infinity()); // not its own neighbour
        return std::get<1>(cos.topk(k, 1));
    };
    const auto na = neighbours(a).contiguous(), nb = neighbours(b).contiguous();
    const auto* pa = na.data_ptr<int64_t>();
    const auto* pb = nb.data_ptr<int64_t>();
    int64_t shared = 0;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t x = 0; x < k; ++x)
            for (int64_t y = 0; y < k; ++y)
                shared += pa[i * k + x] == pb[i * k + y];
    return static_cast<double>(shared) / static_cast<double>(n * k);
}

double pearson_correlation(const std::vector<double>& x, const std::vector<double>& y)
{
    const auto n = static_cast<double>(x.size());
    if (x.size() != y.size() || x.size() < 2)
        throw InputError("a correlation needs two series of equal length, at least 2");
    const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n,
                 my = std::accumulate(y.begin(), y.end(), 0.0) / n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y)
{
    return pearson_correlation(average_ranks(x), average_ranks(y));
}

nlohmann::ordered_json task_json(const TaskResult& r)
{
    nlohmann::ordered_json j;
    EMBEDLAB_JSON_MEMBERS(j, r, task, n, accuracy, accuracy_norm);
    if (!std::isnan(r.mcc))
        j["mcc"] = r.mcc;
    if (!std::isnan(r.f1))
        j["f1"] = r.f1;
    j["metric"] = detail::headline_metric(r); // GLUE's own: the name and its value
    j["metric_value"] = detail::headline_value(r);
    EMBEDLAB_JSON_MEMBERS(j, r, seconds, protocol);
    return j;
}

nlohmann::ordered_json similarity_json(const SimilarityResult& r)
{
    nlohmann::ordered_json j{{"task", "stsb"}};
    EMBEDLAB_JSON_MEMBERS(j, r, n, spearman, pearson, seconds, protocol);
    return j;
}

} // namespace embedlab
