// Fine-tuning an encoder's classification head (classifier_finetune.hpp).
#include "embedlab/classifier_finetune.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>

#include <algorithm>
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

} // namespace embedlab
