#include "eval/classifier_task.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>

#include "embedlab/encoder.hpp"
#include "embedlab/non_finite.hpp"

namespace embedlab::detail {

namespace {

std::string lower(std::string s)
{
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The dataset's label names: the continuations without their space.
std::vector<std::string> dataset_labels(const TaskData& data)
{
    std::vector<std::string> names;
    for (const auto& c : data.examples.front().continuations) {
        const size_t start = c.find_first_not_of(' ');
        names.push_back(lower(start == std::string::npos ? c : c.substr(start)));
    }
    return names;
}

} // namespace

double binary_mcc(int64_t tp, int64_t fp, int64_t fn, int64_t tn)
{
    const auto d = [](int64_t v) { return static_cast<double>(v); };
    const double denominator = std::sqrt(d(tp + fp) * d(tp + fn) * d(tn + fp) * d(tn + fn));
    return denominator == 0 ? 0.0 : (d(tp) * d(tn) - d(fp) * d(fn)) / denominator;
}

double binary_f1(int64_t tp, int64_t fp, int64_t fn)
{
    return tp == 0 ? 0.0 : 2.0 * static_cast<double>(tp) / static_cast<double>(2 * tp + fp + fn);
}

const char* headline_metric(const TaskResult& r)
{
    return !std::isnan(r.mcc) ? "mcc" : !std::isnan(r.f1) ? "f1" : "accuracy";
}

double headline_value(const TaskResult& r)
{
    return !std::isnan(r.mcc) ? r.mcc : !std::isnan(r.f1) ? r.f1 : r.accuracy;
}

std::vector<int64_t> classifier_label_map(const ModelConfig& config, const TaskData& data)
{
    if (!is_classification_task(data.task))
        throw InputError(data.source +
                         ": a sequence classifier runs GLUE's labelled tasks (sst2, cola, mrpc, "
                         "qqp, mnli, mnli-mm, qnli, rte, wnli), not '" +
                         data.task + "'");
    const auto wanted = dataset_labels(data);
    const auto& labels = config.labels;
    auto listed = [&] {
        std::string s;
        for (const auto& l : labels)
            s += (s.empty() ? "" : ", ") + l;
        return s;
    };
    if (labels.size() != wanted.size())
        throw InputError(data.source + ": the task has " + std::to_string(wanted.size()) +
                         " labels but the model's classifier has " + std::to_string(labels.size()) + " (" +
                         listed() + ")");
    std::vector<int64_t> map(wanted.size(), -1);
    bool defaults = true;
    for (size_t i = 0; i < labels.size(); ++i)
        defaults = defaults && labels[i] == "LABEL_" + std::to_string(i);
    for (size_t i = 0; i < wanted.size(); ++i) {
        if (defaults) {
            map[i] = static_cast<int64_t>(i);
            continue;
        }
        for (size_t j = 0; j < labels.size(); ++j)
            if (lower(labels[j]) == wanted[i])
                map[i] = static_cast<int64_t>(j);
        if (map[i] < 0)
            throw InputError(data.source + ": the task's label '" + wanted[i] +
                             "' is none of the model's labels (" + listed() + ", from id2label)");
    }
    return map;
}

TaskResult evaluate_classifier_task(const LanguageModel& model, const Tokenizer& tokenizer,
                                    const TaskData& data, const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    const auto map = classifier_label_map(model.config(), data);
    const bool paired = std::any_of(data.examples.begin(), data.examples.end(),
                                    [](const TaskExample& e) { return !e.text_pair.empty(); });
    int64_t tp = 0, fp = 0, fn = 0, tn = 0; // label 1 the positive class
    TaskResult r;
    r.task = data.task;
    const auto total = static_cast<int64_t>(data.examples.size());
    int64_t right = 0;
    constexpr int64_t batch_size = 32;
    report_progress(progress, 0, total);
    for (int64_t start = 0; start < total; start += batch_size) {
        const int64_t count = std::min(batch_size, total - start);
        std::vector<std::string> texts, pairs;
        for (int64_t i = start; i < start + count; ++i) {
            texts.push_back(data.examples[static_cast<size_t>(i)].text);
            pairs.push_back(data.examples[static_cast<size_t>(i)].text_pair);
        }
        const auto batch =
            frame_texts(tokenizer, model.config(), texts, paired ? &pairs : nullptr, start + 1);
        const auto logits = model.classify(batch_hidden_states(model, batch));
        // NaN logits would all choose label 0.
        require_finite_rows(logits, start + 1, "the model", "non-finite classifier logits for example",
                            "the task is not scored");
        const auto logp = torch::log_softmax(logits.to(torch::kDouble), -1);
        for (int64_t i = 0; i < count; ++i) {
            const TaskExample& e = data.examples[static_cast<size_t>(start + i)];
            TaskExampleResult out;
            out.label = e.label;
            for (const int64_t id : map)
                out.loglik.push_back(logp[i][id].item<double>());
            out.choice = out.choice_norm =
                std::max_element(out.loglik.begin(), out.loglik.end()) - out.loglik.begin();
            out.continuation_tokens.assign(map.size(), 0);
            right += out.choice == e.label;
            tp += out.choice == 1 && e.label == 1;
            fp += out.choice == 1 && e.label != 1;
            fn += out.choice != 1 && e.label == 1;
            tn += out.choice != 1 && e.label != 1;
            r.examples.push_back(std::move(out));
        }
        report_progress(progress, start + count, total);
    }
    r.n = total;
    r.accuracy = r.accuracy_norm = static_cast<double>(right) / static_cast<double>(total);
    if (data.task == "cola") // Matthews' correlation; 0 when a margin is empty (scikit-learn)
        r.mcc = binary_mcc(tp, fp, fn, tn);
    if (data.task == "mrpc" || data.task == "qqp")
        r.f1 = binary_f1(tp, fp, fn);
    r.protocol = std::string("the sequence classifier's head: ") +
                 (paired ? "each pair framed [CLS] a [SEP] b [SEP] (segment 1 on b)"
                         : "each sentence framed [CLS] .. [SEP]") +
                 ", the class of highest logit, the model's id2label matched to the task's labels";
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

} // namespace embedlab::detail
