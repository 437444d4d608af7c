// Fine-tuning an encoder's classification head (classifier_finetune.hpp).
#include "embedlab/classifier_finetune.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <numeric>

#include "embedlab/encoder.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/json_input.hpp"
#include "embedlab/output_checks.hpp"
#include "io/canonical_weights.hpp"
#include "methods/loss_check.hpp"
#include "methods/micro_batch.hpp"
#include "methods/training_memory.hpp"
#include "model/manifest_support.hpp"

namespace embedlab {

namespace fs = std::filesystem;

LabelledTexts labelled_texts(const TaskData& data)
{
    if (!is_classification_task(data.task))
        throw InputError(data.source +
                         ": classifier fine-tuning reads a GLUE classification task's labelled "
                         "sentences (sst2, cola, mrpc, qqp, mnli, qnli, rte, wnli), not '" +
                         data.task + "'");
    LabelledTexts out;
    out.source = data.source;
    out.task = data.task;
    for (const auto& c : data.examples.front().continuations)
        out.label_names.push_back(c.substr(c.find_first_not_of(' ')));
    const bool paired = std::any_of(data.examples.begin(), data.examples.end(),
                                    [](const TaskExample& e) { return !e.text_pair.empty(); });
    for (const auto& e : data.examples) {
        out.texts.push_back(e.text);
        if (paired)
            out.pairs.push_back(e.text_pair);
        out.labels.push_back(e.label);
    }
    return out;
}

LabelledTexts regression_pairs(const std::vector<SentencePair>& pairs, const std::string& source)
{
    if (pairs.size() < 2)
        throw InputError(source + ": fine-tuning needs at least 2 scored pairs");
    LabelledTexts out;
    out.source = source;
    out.task = "stsb";
    out.label_names = {"LABEL_0"};
    for (const auto& p : pairs) {
        out.texts.push_back(p.first);
        out.pairs.push_back(p.second);
        out.labels.push_back(0);
        out.targets.push_back(p.score);
    }
    return out;
}

std::unique_ptr<LanguageModel> with_classification_head(const LanguageModel& base,
                                                        const std::vector<std::string>& labels, uint64_t seed)
{
    ModelConfig c = base.config();
    if (!c.is_encoder())
        throw InputError(c.type_name() + " is a decoder: a sequence-classification head goes on an encoder");
    const torch::Tensor* table = dense_table(&base.token_embedding());
    if (!table)
        throw InputError("fine-tune the classifier before compressing the table (this model's table is " +
                         base.token_embedding().kind() + ")");
    if (labels.empty())
        throw InputError("a classifier needs at least one label");
    WeightMap w;
    for (const auto& [name, t] : base.weights())
        if (name.rfind("cls.", 0) != 0 && name.rfind("classifier.", 0) != 0 &&
            name.rfind("pre_classifier.", 0) != 0)
            w[name] = t.clone();
    w[token_table_name(c.arch)] = table->clone();
    c.encoder_head = EncoderHead::Classification;
    c.tied_embeddings = false; // no token head any more
    c.labels = labels;
    const int64_t d = c.hidden_size, L = static_cast<int64_t>(labels.size());
    auto gen = at::detail::createCPUGenerator(seed);
    auto normal = [&](std::vector<int64_t> shape) { return at::normal(0.0, 0.02, shape, gen); };
    if (c.model_type == "distilbert") {
        w["pre_classifier.weight"] = normal({d, d});
        w["pre_classifier.bias"] = torch::zeros({d});
    } else if (!c.has_pooler) {
        c.has_pooler = true;
        w["pooler.dense.weight"] = normal({d, d});
        w["pooler.dense.bias"] = torch::zeros({d});
    }
    w["classifier.weight"] = normal({L, d});
    w["classifier.bias"] = torch::zeros({L});
    return std::make_unique<LanguageModel>(c, std::move(w), "classifier");
}

namespace {

// One step's loss with gradients accumulated over micro-batches of rows (each
// weighted by its share of the batch; one micro-batch is the batch mean itself);
// `alive` is asked between passes.
torch::Tensor accumulate_classifier_step(const LanguageModel& model, const EncoderBatch& batch,
                                         const torch::Tensor& target, bool regression,
                                         const std::function<bool()>& alive)
{
    const auto& c = model.config();
    const int64_t rows = batch.ids.size(0);
    const int64_t micro = methods::micro_windows(rows, batch.ids.size(1), c.num_layers, c.hidden_size, 0);
    torch::Tensor total;
    for (int64_t at = 0; at < rows; at += micro) {
        const int64_t n = std::min(micro, rows - at);
        const auto logits = model.training_classify(model.training_encoder_hidden_states(
            batch.ids.narrow(0, at, n), batch.token_types.narrow(0, at, n),
            batch.attention_mask.narrow(0, at, n)));
        const auto part = target.narrow(0, at, n);
        const auto loss = regression ? torch::nn::functional::mse_loss(logits.squeeze(-1), part)
                                     : torch::nn::functional::cross_entropy(logits, part);
        methods::backward_share(loss, n == rows ? 1.0 : static_cast<double>(n) / static_cast<double>(rows),
                                total, alive);
    }
    return total;
}

} // namespace

int64_t classifier_steps(const ClassifierTrainOptions& o, int64_t n)
{
    if (o.epochs < 1)
        return o.steps;
    return o.epochs * ((n + o.batch - 1) / o.batch);
}

double classifier_rate_factor(const ClassifierTrainOptions& o, int64_t step, int64_t total)
{
    if (!o.linear_schedule)
        return 1.0;
    if (step <= o.warmup)
        return static_cast<double>(step) / static_cast<double>(o.warmup);
    // transformers' get_linear_schedule_with_warmup at the step's start (0-based s - 1).
    const auto after = static_cast<double>(total - o.warmup);
    return after > 0 ? static_cast<double>(total - step + 1) / after : 1.0;
}

TrainResult train_classifier(LanguageModel& model, const Tokenizer& tokenizer, const LabelledTexts& data,
                             const ClassifierTrainOptions& o, const TrainProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    if (o.steps < 1 || o.batch < 1)
        throw InputError("classifier fine-tuning: --steps and --batch must be at least 1");
    if (o.epochs < 0 || o.warmup < 0)
        throw InputError("classifier fine-tuning: --epochs and --warmup must be 0 or more");
    if (!(o.lr > 0) || !(o.body_lr >= 0))
        throw InputError("classifier fine-tuning: --lr must be positive and --body-lr at least 0");
    const auto n = static_cast<int64_t>(data.texts.size());
    if (n < 2 || data.labels.size() != data.texts.size())
        throw InputError(data.source + ": fine-tuning needs at least 2 labelled examples");
    if (!data.pairs.empty() && data.pairs.size() != data.texts.size())
        throw std::logic_error("train_classifier: pairs and texts differ in number");
    const bool regression = !data.targets.empty();
    if (regression && (data.targets.size() != data.texts.size() || model.config().labels.size() != 1))
        throw InputError(data.source + ": regression targets need a head of one output (LABEL_0), one target "
                                       "per example");
    const auto L = static_cast<int64_t>(model.config().labels.size());
    for (const int64_t label : data.labels)
        if (label < 0 || label >= L)
            throw InputError(data.source + ": label " + std::to_string(label) + " is outside the head's " +
                             std::to_string(L) + " classes");
    c10::InferenceMode no_inference(false);
    torch::AutoGradMode grad(true);
    std::vector<torch::Tensor> head, body;
    for (const auto& [name, t] : model.weights()) {
        const bool in_head = name.rfind("classifier.", 0) == 0 || name.rfind("pre_classifier.", 0) == 0 ||
                             name.rfind("pooler.", 0) == 0;
        if (in_head || o.body_lr > 0) {
            t.requires_grad_(true);
            (in_head ? head : body).push_back(t);
        }
    }
    if (o.body_lr > 0)
        if (const torch::Tensor* table = dense_table(&model.token_embedding())) {
            table->requires_grad_(true);
            body.push_back(*table);
        }
    using torch::optim::AdamWOptions;
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(head, std::make_unique<AdamWOptions>(AdamWOptions(o.lr).weight_decay(0)));
    if (!body.empty())
        groups.emplace_back(body, std::make_unique<AdamWOptions>(AdamWOptions(o.body_lr).weight_decay(0)));
    torch::optim::AdamW optimizer(std::move(groups), AdamWOptions(o.lr).weight_decay(0));

    const int64_t total = classifier_steps(o, n);
    if (o.warmup >= total && o.linear_schedule)
        throw InputError("classifier fine-tuning: --warmup " + std::to_string(o.warmup) +
                         " must be below the " + std::to_string(total) + " steps");
    TrainResult r;
    r.options.steps = total;
    r.options.lr = o.lr;
    r.options.batch = o.batch;
    r.options.seed = o.seed;
    for (const auto& p : head)
        r.trainable_parameters += p.numel();
    for (const auto& p : body)
        r.trainable_parameters += p.numel();
    std::mt19937_64 rng(o.seed);
    // Between steps and passes: the finished steps so far (the caller may cancel).
    auto alive = [&] {
        const double last = r.loss_curve.empty() ? 0 : r.loss_curve.back();
        return !progress ||
               progress({static_cast<int64_t>(r.loss_curve.size()), total, last, r.tokens_per_second, true});
    };
    if (!alive())
        throw Cancelled();
    // Epochs: each pass a shuffle of 0..n-1 cut into batches; else `batch` draws a step.
    std::vector<int64_t> order;
    size_t next = 0;
    const auto rates = [&] {
        std::vector<double> r;
        for (const auto& g : optimizer.param_groups())
            r.push_back(static_cast<const AdamWOptions&>(g.options()).lr());
        return r;
    }();
    for (int64_t step = 1; step <= total; ++step) {
        std::vector<size_t> picked;
        if (o.epochs > 0) {
            if (next >= order.size()) {
                order.resize(static_cast<size_t>(n));
                std::iota(order.begin(), order.end(), int64_t{0});
                std::shuffle(order.begin(), order.end(), rng);
                next = 0;
            }
            for (int64_t b = 0; b < o.batch && next < order.size(); ++b)
                picked.push_back(static_cast<size_t>(order[next++]));
        } else {
            for (int64_t b = 0; b < o.batch; ++b)
                picked.push_back(static_cast<size_t>(rng() % static_cast<uint64_t>(n)));
        }
        const double factor = classifier_rate_factor(o, step, total);
        for (size_t g = 0; g < optimizer.param_groups().size(); ++g)
            static_cast<AdamWOptions&>(optimizer.param_groups()[g].options()).lr(rates[g] * factor);
        r.lr_curve.push_back(rates[0] * factor);
        std::vector<std::string> texts, pairs;
        std::vector<int64_t> labels;
        std::vector<float> targets;
        for (const size_t i : picked) {
            texts.push_back(data.texts[i]);
            if (!data.pairs.empty())
                pairs.push_back(data.pairs[i]);
            labels.push_back(data.labels[i]);
            if (regression)
                targets.push_back(static_cast<float>(data.targets[i]));
        }
        const auto batch =
            frame_texts(tokenizer, model.config(), texts, data.pairs.empty() ? nullptr : &pairs);
        const auto target = regression ? torch::tensor(targets) : torch::tensor(labels, torch::kLong);
        optimizer.zero_grad();
        const auto loss = accumulate_classifier_step(model, batch, target, regression, alive);
        optimizer.step();
        const double value = methods::finite_loss(loss, "classifier fine-tuning", step);
        r.loss_curve.push_back(value);
        r.tokens += batch.attention_mask.sum().item<int64_t>();
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r.tokens_per_second = elapsed > 0 ? static_cast<double>(r.tokens) / elapsed : 0;
        if (progress && !progress({step, total, value, r.tokens_per_second}))
            throw Cancelled();
    }
    for (const auto& p : head)
        p.requires_grad_(false);
    for (const auto& p : body)
        p.requires_grad_(false);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

void save_classifier(const LoadedModel& source, const LanguageModel& model, const fs::path& out,
                     bool overwrite, const nlohmann::ordered_json& record)
{
    const auto& c = model.config();
    if (source.files.format != ModelFormat::HuggingFace || !fs::is_directory(source.files.path))
        throw InputError(
            source.files.path.string() +
            ": classifier fine-tuning writes a Hugging Face directory from a Hugging Face source "
            "(its config.json and tokenizer files)");
    check_replaceable_directory(out, overwrite, "use --force to replace it", {source.files.path});
    auto config = parse_json_unique<nlohmann::ordered_json>(
        io::read_regular_file(source.files.path / "config.json", io::metadata_file_cap, "config file"),
        (source.files.path / "config.json").string());
    config["architectures"] = {std::string(c.model_type == "distilbert" ? "DistilBert" : "Bert") +
                               "ForSequenceClassification"};
    nlohmann::ordered_json id2label, label2id;
    for (size_t i = 0; i < c.labels.size(); ++i) {
        id2label[std::to_string(i)] = c.labels[i];
        label2id[c.labels[i]] = static_cast<int64_t>(i);
    }
    config["id2label"] = id2label;
    config["label2id"] = label2id;
    config.erase("num_labels");
    if (c.labels.size() == 1) // transformers' regression: MSE on the single output
        config["problem_type"] = "regression";
    else
        config.erase("problem_type");
    WeightMap w;
    {
        c10::InferenceMode guard;
        for (const auto& [name, t] : model.weights())
            w[name] = t.detach();
        w[token_table_name(c.arch)] = dense_table(&model.token_embedding())->detach();
    }
    AtomicDirectory dir(out, overwrite);
    detail::copy_support_files(source.files.path, dir.path());
    write_file_atomic(dir.path() / "config.json", config.dump(2) + "\n");
    write_safetensors(dir.path() / "model.safetensors", io::native_hf_tensors(c, w), {{"format", "pt"}});
    nlohmann::ordered_json manifest{{"kind", "classifier"},
                                    {"source", source.files.path.string()},
                                    {"labels", c.labels},
                                    {"training", record}};
    write_file_atomic(dir.path() / "embedlab-classifier.json", manifest.dump(2) + "\n");
    dir.commit();
}

// ---- The LLE paper's protocol ----

ValidationSplit validation_split(int64_t n, double fraction, uint64_t seed)
{
    if (!(fraction > 0 && fraction < 1))
        throw InputError("the validation split's fraction must be in (0, 1), got " +
                         std::to_string(fraction));
    const auto held = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n)));
    if (n - held < 2)
        throw InputError("holding out " + std::to_string(held) + " of " + std::to_string(n) +
                         " training examples for validation leaves fewer than 2 to train on");
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::mt19937_64 rng(seed); // Fisher-Yates written out: std::shuffle differs between libraries
    for (int64_t i = n - 1; i > 0; --i)
        std::swap(order[static_cast<size_t>(i)],
                  order[static_cast<size_t>(rng() % static_cast<uint64_t>(i + 1))]);
    ValidationSplit out{.seed = seed, .fraction = fraction};
    out.validation.assign(order.begin(), order.begin() + held);
    out.train.assign(order.begin() + held, order.end());
    std::sort(out.validation.begin(), out.validation.end());
    std::sort(out.train.begin(), out.train.end());
    return out;
}

LabelledTexts subset(const LabelledTexts& data, const std::vector<int64_t>& indices)
{
    LabelledTexts out;
    out.label_names = data.label_names;
    out.source = data.source;
    out.task = data.task;
    for (const int64_t i : indices) {
        const auto at = static_cast<size_t>(i);
        out.texts.push_back(data.texts.at(at));
        if (!data.pairs.empty())
            out.pairs.push_back(data.pairs[at]);
        out.labels.push_back(data.labels[at]);
        if (!data.targets.empty())
            out.targets.push_back(data.targets[at]);
    }
    return out;
}

std::vector<int32_t> training_token_ids(const Tokenizer& tokenizer, const LabelledTexts& data)
{
    std::vector<int32_t> ids;
    auto add = [&](const std::string& text) {
        const auto part = tokenizer.encode(text);
        ids.insert(ids.end(), part.begin(), part.end());
    };
    for (size_t i = 0; i < data.texts.size(); ++i) {
        add(data.texts[i]);
        if (!data.pairs.empty())
            add(data.pairs[i]);
    }
    if (ids.empty())
        throw InputError(data.source + ": the training examples encode to no tokens; V_C needs some");
    return ids;
}

FrequencySplit training_frequency_split(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                                        int64_t vocab_size, double keep_ratio)
{
    std::vector<int64_t> specials;
    for (int64_t id = 0; id < tokenizer.vocab_size(); ++id)
        if (tokenizer.is_special(static_cast<int32_t>(id)))
            specials.push_back(id);
    return split_by_frequency(ids, vocab_size, keep_ratio, specials);
}

MeanStd mean_and_std(const std::vector<double>& values)
{
    if (values.empty())
        throw InputError("a mean over trials needs at least one trial");
    MeanStd m{.n = static_cast<int64_t>(values.size())};
    for (const double v : values)
        m.mean += v;
    m.mean /= static_cast<double>(m.n);
    if (m.n > 1) {
        double squares = 0;
        for (const double v : values)
            squares += (v - m.mean) * (v - m.mean);
        m.std = std::sqrt(squares / static_cast<double>(m.n - 1));
    }
    return m;
}

ClassifierScore score_classifier(const LanguageModel& model, const Tokenizer& tokenizer,
                                 const LabelledTexts& data)
{
    if (!data.targets.empty()) {
        std::vector<SentencePair> pairs;
        for (size_t i = 0; i < data.texts.size(); ++i)
            pairs.push_back({data.texts[i], data.pairs.at(i), data.targets[i]});
        return {"spearman", evaluate_similarity(model, tokenizer, pairs).spearman};
    }
    TaskData task{.task = data.task, .source = data.source};
    std::vector<std::string> continuations;
    for (const auto& name : data.label_names)
        continuations.push_back(" " + name);
    for (size_t i = 0; i < data.texts.size(); ++i)
        task.examples.push_back({.continuations = continuations,
                                 .label = data.labels[i],
                                 .text = data.texts[i],
                                 .text_pair = data.pairs.empty() ? std::string() : data.pairs[i]});
    const auto j = task_json(evaluate_task(model, tokenizer, task));
    return {j["metric"].get<std::string>(), j["metric_value"].get<double>()};
}

namespace {

PartialSparseKind protocol_kind(const std::string& method)
{
    for (const auto kind : {PartialSparseKind::LLE, PartialSparseKind::Unk, PartialSparseKind::PCA})
        if (method == partial_sparse_method_name(kind))
            return kind;
    throw InputError("the protocol compresses with lle, lle-unk or lle-pca, not '" + method + "'");
}

void check_protocol(const ClassifierProtocolOptions& o)
{
    if (o.trials < 1 || o.trials > 100)
        throw InputError("--trials must be between 1 and 100 (the paper runs 3), got " +
                         std::to_string(o.trials));
    for (const auto& s : o.settings) {
        const auto kind = protocol_kind(s.method);
        if (!(s.keep_ratio > 0 && s.keep_ratio <= 1))
            throw InputError("the keep ratio r(V_C) must be in (0, 1], got " + std::to_string(s.keep_ratio));
        if (kind == PartialSparseKind::Unk && (s.ks.size() != 1 || s.ks[0] != 0))
            throw InputError("lle-unk takes no k (every rare row is the unk row)");
        if (kind != PartialSparseKind::Unk && s.ks.empty())
            throw InputError(s.method +
                             " needs a k (--k K, or --k auto to choose it on the validation split)");
        if (s.ks.size() > 1 && !o.select_k)
            throw std::logic_error("run_classifier_protocol: several k need select_k");
        for (const int64_t k : s.ks)
            if (kind != PartialSparseKind::Unk && k < 1)
                throw InputError(s.method + ": k must be at least 1, got " + std::to_string(k));
    }
}

// Mean cosine of the rebuilt rare rows against the trained ones (zero rows: cosine 0).
double mean_rare_cosine(const torch::Tensor& table, const PartialSparseTokenEmbedding& e)
{
    const int64_t count = table.size(0) - e.fit().common_ids.numel();
    if (count == 0)
        return 1.0;
    c10::InferenceMode guard;
    auto rare = torch::ones({table.size(0)}, torch::kBool);
    rare.index_fill_(0, e.fit().common_ids, false);
    const auto original = table.index({rare}).to(torch::kFloat64); // ascending ids, as the rare slots
    const auto rebuilt = e.rare_rows(0, count).to(torch::kFloat64);
    const auto norms = (original.norm(2, 1) * rebuilt.norm(2, 1)).clamp_min(1e-300);
    return ((original * rebuilt).sum(1) / norms).mean().item<double>();
}

// The candidate with the best mean validation score over the trials; ties: the first listed.
size_t best_on_validation(const std::vector<ProtocolScores>& per_k)
{
    size_t best = 0;
    for (size_t ki = 1; ki < per_k.size(); ++ki)
        if (mean_and_std(per_k[ki].validation).mean > mean_and_std(per_k[best].validation).mean)
            best = ki;
    return best;
}

// One run of the protocol: the data split, V_C per setting, and the scorings it counts.
class ProtocolRun {
public:
    ProtocolRun(const LanguageModel& base, const Tokenizer& tokenizer, const LabelledTexts& train,
                const LabelledTexts& test, const ClassifierProtocolOptions& o, const ProgressFn& progress)
        : base_(base), tokenizer_(tokenizer), test_(test), o_(o), progress_(progress), fit_(train)
    {
        if (o.select_k) {
            try {
                r_.split = validation_split(static_cast<int64_t>(train.texts.size()), o.validation_fraction,
                                            o.split_seed);
            } catch (const InputError& e) {
                throw InputError(train.source +
                                 ": k is chosen on a validation split of the training data, and " + e.what());
            }
            fit_ = subset(train, r_.split->train);
            validation_ = subset(train, r_.split->validation);
        }
        r_.train_examples = static_cast<int64_t>(fit_.texts.size());
        r_.test_examples = static_cast<int64_t>(test.texts.size());
        split_vocabulary();
        // Progress: every training step, then one unit per scoring.
        steps_ = classifier_steps(o.train, r_.train_examples);
        int64_t scorings = 1 + (o.select_k ? 1 : 0);
        for (const auto& s : o.settings)
            scorings += static_cast<int64_t>(s.ks.size()) * (o.select_k ? 2 : 1);
        total_ = o.trials * (steps_ + scorings);
    }

    ClassifierProtocolResult run() &&
    {
        for (int64_t trial = 0; trial < o_.trials; ++trial) {
            auto model = train_trial(o_.train.seed + static_cast<uint64_t>(trial));
            r_.original.test.push_back(score(*model, test_));
            if (o_.select_k)
                r_.original.validation.push_back(score(*model, validation_));
            score_compressed(*model);
            if (trial == 0)
                r_.first_model = std::move(model);
        }
        for (auto& out : r_.settings)
            out.chosen = best_on_validation(out.per_k);
        return std::move(r_);
    }

private:
    // V_C per setting, from the training examples (or the given ids) once for every trial.
    void split_vocabulary()
    {
        r_.frequency_from_training = !o_.frequency_ids;
        if (o_.settings.empty())
            return;
        const auto ids = o_.frequency_ids ? *o_.frequency_ids : training_token_ids(tokenizer_, fit_);
        for (const auto& s : o_.settings) {
            splits_.push_back(
                training_frequency_split(tokenizer_, ids, base_.config().vocab_size, s.keep_ratio));
            const auto& split = splits_.back();
            r_.settings.push_back({.setting = s,
                                   .common = static_cast<int64_t>(split.common.size()),
                                   .rare = static_cast<int64_t>(split.rare.size()),
                                   .per_k = std::vector<ProtocolScores>(s.ks.size()),
                                   .embedding_params = std::vector<int64_t>(s.ks.size()),
                                   .rare_cosine = std::vector<double>(s.ks.size())});
            r_.frequency_tokens = split.total_tokens;
            r_.frequency_distinct = split.distinct_seen;
        }
    }

    std::unique_ptr<LanguageModel> train_trial(uint64_t seed)
    {
        auto options = o_.train;
        options.seed = seed;
        r_.seeds.push_back(seed);
        auto model = with_classification_head(base_, fit_.label_names, seed);
        const int64_t before = done_;
        r_.training.push_back(train_classifier(*model, tokenizer_, fit_, options, [&](const TrainStep& s) {
            done_ = before + s.step;
            return !progress_ || progress_(done_, total_);
        }));
        done_ = before + steps_;
        return model;
    }

    double score(const LanguageModel& model, const LabelledTexts& data)
    {
        const auto s = score_classifier(model, tokenizer_, data);
        r_.metric = s.metric;
        ++done_;
        if (progress_ && !progress_(done_, total_))
            throw Cancelled();
        return s.value;
    }

    // Each setting and k on the trained table: compressed, scored, the trained table put back.
    void score_compressed(LanguageModel& model)
    {
        const auto dense = model.shared_token_embedding();
        const torch::Tensor table = *dense_table(dense.get());
        for (size_t si = 0; si < o_.settings.size(); ++si) {
            const auto& s = o_.settings[si];
            auto& out = r_.settings[si];
            for (size_t ki = 0; ki < s.ks.size(); ++ki) {
                const auto compressed = std::make_shared<PartialSparseTokenEmbedding>(
                    fit_partial_sparse(table, splits_[si],
                                       {.kind = protocol_kind(s.method),
                                        .k = s.ks[ki],
                                        .reg = o_.reg,
                                        .unk_id = tokenizer_.unk_id().value_or(-1)}));
                out.embedding_params[ki] = compressed->parameter_count();
                out.rare_cosine[ki] += mean_rare_cosine(table, *compressed) / static_cast<double>(o_.trials);
                model.set_token_embedding(compressed);
                if (o_.select_k)
                    out.per_k[ki].validation.push_back(score(model, validation_));
                out.per_k[ki].test.push_back(score(model, test_));
                model.set_token_embedding(dense);
            }
        }
    }

    const LanguageModel& base_;
    const Tokenizer& tokenizer_;
    const LabelledTexts& test_;
    const ClassifierProtocolOptions& o_;
    const ProgressFn& progress_;
    LabelledTexts fit_, validation_;
    std::vector<FrequencySplit> splits_;
    ClassifierProtocolResult r_;
    int64_t steps_ = 0, total_ = 0, done_ = 0;
};

nlohmann::ordered_json scores_json(const ProtocolScores& s)
{
    nlohmann::ordered_json j{{"test", trial_scores_json(s.test)}};
    if (!s.validation.empty())
        j["validation"] = trial_scores_json(s.validation);
    return j;
}

nlohmann::ordered_json setting_json(const ProtocolSettingResult& s)
{
    nlohmann::ordered_json row{{"method", s.setting.method},
                               {"keep_ratio", s.setting.keep_ratio},
                               {"common", s.common},
                               {"rare", s.rare}};
    if (protocol_kind(s.setting.method) != PartialSparseKind::Unk) { // its fallback row takes no k
        row["k"] = s.setting.ks[s.chosen];
        row["k_candidates"] = s.setting.ks;
        row["k_chosen_by"] =
            s.setting.ks.size() > 1 ? "best mean validation score (ties: the first listed)" : "given";
    }
    row.update(scores_json(s.per_k[s.chosen]));
    row["embedding_params"] = s.embedding_params[s.chosen];
    row["rare_cosine"] = s.rare_cosine[s.chosen];
    auto per_k = nlohmann::ordered_json::array();
    for (size_t ki = 0; ki < s.per_k.size(); ++ki) {
        nlohmann::ordered_json k{{"k", s.setting.ks[ki]}};
        k.update(scores_json(s.per_k[ki]));
        k["embedding_params"] = s.embedding_params[ki];
        k["rare_cosine"] = s.rare_cosine[ki];
        per_k.push_back(k);
    }
    row["per_k"] = per_k;
    return row;
}

} // namespace

ClassifierProtocolResult run_classifier_protocol(const LanguageModel& base, const Tokenizer& tokenizer,
                                                 const LabelledTexts& train, const LabelledTexts& test,
                                                 const ClassifierProtocolOptions& o,
                                                 const ProgressFn& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    check_protocol(o);
    auto r = ProtocolRun(base, tokenizer, train, test, o, progress).run();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

nlohmann::ordered_json trial_scores_json(const std::vector<double>& values)
{
    const auto m = mean_and_std(values);
    return {{"values", values}, {"mean", m.mean}, {"std", m.std}};
}

nlohmann::ordered_json protocol_json(const ClassifierProtocolResult& r)
{
    nlohmann::ordered_json j{{"trials", r.seeds.size()},
                             {"seeds", r.seeds},
                             {"std", "sample standard deviation over the trials (n - 1); 0 for one trial"},
                             {"metric", r.metric},
                             {"train_examples", r.train_examples},
                             {"test_examples", r.test_examples}};
    if (r.split)
        j["split"] = {{"seed", r.split->seed},
                      {"validation_fraction", r.split->fraction},
                      {"validation_examples", r.split->validation.size()},
                      {"train_examples", r.split->train.size()},
                      {"shuffle",
                       "Fisher-Yates from the top, std::mt19937_64(seed), swap i with rng() % (i + 1); "
                       "the first ceil(fraction n) indices validation"},
                      {"validation_indices", r.split->validation}};
    if (!r.settings.empty())
        j["common_vocabulary"] = {{"source", r.frequency_from_training ? "training text" : "frequency text"},
                                  {"tokens", r.frequency_tokens},
                                  {"distinct_seen", r.frequency_distinct}};
    j["original"] = scores_json(r.original);
    auto settings = nlohmann::ordered_json::array();
    for (const auto& s : r.settings)
        settings.push_back(setting_json(s));
    j["settings"] = settings;
    auto training = nlohmann::ordered_json::array();
    for (size_t i = 0; i < r.training.size(); ++i)
        training.push_back({{"seed", r.seeds[i]},
                            {"steps", r.training[i].options.steps},
                            {"loss_first", r.training[i].loss_curve.front()},
                            {"loss_last", r.training[i].loss_curve.back()},
                            {"seconds", r.training[i].seconds}});
    j["training"] = training;
    j["seconds"] = r.seconds;
    return j;
}

} // namespace embedlab
