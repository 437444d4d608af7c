// embedlab-cli finetune ENCODER --head classification --task sst2|cola|mrpc|.. --train FILE --out DIR:
// a sequence classifier fine-tuned from an encoder (classifier_finetune.hpp), scored
// on --eval FILE (the task's dev set) when given.
#include <cmath>
#include <limits>

#include "common.hpp"
#include "embedlab/classifier_finetune.hpp"
#include "embedlab/tasks.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

int command_finetune_classifier(const std::vector<std::string>& argv)
{
    Args args("finetune", argv,
              {"--head", "--task", "--train", "--eval", "--out", "--steps", "--batch", "--lr", "--body-lr",
               "--seed", "--limit", "--epochs", "--warmup", "--schedule"},
              {"--force", "--json", "--quiet", "--full"});
    const std::string head = args.required("--head", "classification");
    if (head != "classification")
        throw InputError("finetune: --head must be classification (got '" + head + "')");
    const std::string task = args.required("--task", "sst2|cola|mrpc|qqp|mnli|qnli|rte|wnli|stsb");
    const bool regression = task == "stsb"; // one output, MSE (transformers' problem_type regression)
    if (!is_classification_task(task) && !regression)
        throw InputError(
            "finetune: --task " + task +
            " is not a GLUE task with labels (--head classification trains on sst2, cola, mrpc, qqp, "
            "mnli, mnli-mm, qnli, rte, wnli, or stsb as regression)");
    const std::string train_file = args.required("--train", "FILE");
    const std::string out = args.required("--out", "DIR");
    // --full: the LLE paper's protocol (section 4.1: every weight trained, 3 epochs at 2e-5,
    // Hugging Face Trainer's AdamW and linear schedule; no warm-up given, so none).
    const bool full = args.has("--full");
    if (full && (args.has("--body-lr") || args.has("--steps")))
        throw InputError(std::string("finetune: --full trains every weight at --lr for --epochs; ") +
                         (args.has("--body-lr") ? "--body-lr" : "--steps") + " does not apply");
    ClassifierTrainOptions o;
    o.steps = args.get_int("--steps", 300, 1, 100'000'000);
    o.batch = args.get_int("--batch", 16, 1, 1 << 16);
    o.lr = args.get_double("--lr", full ? 2e-5 : 1e-3, 1e-12, 1e3);
    o.body_lr = full ? o.lr : args.get_double("--body-lr", 0, 0, 1e3);
    o.epochs = args.get_int("--epochs", full ? 3 : 0, 0, 100'000);
    if (args.has("--epochs") && args.has("--steps"))
        throw InputError("finetune: --epochs and --steps both given: give one");
    const std::string schedule = args.get("--schedule").value_or(full ? "linear" : "constant");
    if (schedule != "linear" && schedule != "constant")
        throw InputError("finetune: --schedule '" + schedule + "' must be constant or linear");
    o.linear_schedule = schedule == "linear";
    o.warmup = args.get_int("--warmup", 0, 0, 100'000'000);
    if (o.warmup > 0 && !o.linear_schedule)
        throw InputError("finetune: --warmup applies to --schedule linear");
    o.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    const int64_t limit = args.get_int("--limit", 0, 0, 100'000'000);
    const auto path = model_argument(args);
    std::vector<std::filesystem::path> inputs{path, train_file};
    if (const auto eval = args.get("--eval"))
        inputs.push_back(*eval);
    prepare_output_directory(out, args.has("--force"), inputs);

    LoadOptions load = load_options(args);
    load.need_tokenizer = true;
    auto base = load_model(path, load);
    print_warnings(base.files.warnings);
    const auto train = regression
                           ? regression_pairs(read_sentence_pairs(train_file, {.limit = limit}), train_file)
                           : labelled_texts(read_task_data(task, train_file, {.limit = limit}));
    auto model = with_classification_head(*base.model, train.label_names, o.seed);
    TrainResult r;
    {
        ProgressPrinter progress("finetune (classifier)", "steps", args.has("--quiet") || args.has("--json"));
        auto bar = progress.callback();
        r = train_classifier(*model, *base.tokenizer, train, o,
                             [&](const TrainStep& s) { return bar(s.step, s.steps); });
    }
    Json record{{"task", task},
                {"train", std::filesystem::absolute(train_file).lexically_normal().string()},
                {"train_sha256", sha256_file(train_file)},
                {"examples", train.texts.size()},
                {"steps", r.options.steps},
                {"batch", o.batch},
                {"lr", o.lr},
                {"body_lr", o.body_lr},
                {"full", full},
                {"epochs", o.epochs},
                {"schedule", schedule},
                {"warmup", o.warmup},
                {"lr_first", r.lr_curve.front()},
                {"lr_last", r.lr_curve.back()},
                {"seed", o.seed},
                {"trainable_parameters", r.trainable_parameters},
                {"seconds", r.seconds},
                {"loss_first", r.loss_curve.front()},
                {"loss_last", r.loss_curve.back()},
                {"loss_curve", r.loss_curve}};
    std::optional<TaskResult> dev;
    std::optional<SimilarityResult> dev_similarity;
    const auto eval = args.get("--eval");
    if (eval && regression) {
        ProgressPrinter progress("eval stsb", "pairs", args.has("--quiet") || args.has("--json"));
        dev_similarity =
            evaluate_similarity(*model, *base.tokenizer, read_sentence_pairs(*eval), progress.callback());
        record["eval"] = {{"data", std::filesystem::absolute(*eval).lexically_normal().string()},
                          {"n", dev_similarity->n},
                          {"spearman", dev_similarity->spearman},
                          {"pearson", dev_similarity->pearson}};
    } else if (eval) {
        ProgressPrinter progress("eval " + task, "examples", args.has("--quiet") || args.has("--json"));
        dev = evaluate_task(*model, *base.tokenizer, read_task_data(task, *eval), progress.callback());
        record["eval"] = {{"data", std::filesystem::absolute(*eval).lexically_normal().string()},
                          {"n", dev->n},
                          {"accuracy", dev->accuracy}};
        if (!std::isnan(dev->mcc))
            record["eval"]["mcc"] = dev->mcc;
        if (!std::isnan(dev->f1))
            record["eval"]["f1"] = dev->f1;
    }
    save_classifier(base, *model, out, args.has("--force"), record);
    if (args.has("--json")) {
        Json j{{"model", path.string()}, {"out", out}, {"labels", model->config().labels}};
        j["training"] = record;
        print_json(j);
        return 0;
    }
    std::printf(
        "fine-tuned a %s classifier (%s) on %zu examples: loss %.4f -> %.4f over %lld steps, %.1f s\n",
        model->config().type_name().c_str(), task.c_str(), train.texts.size(), r.loss_curve.front(),
        r.loss_curve.back(), static_cast<long long>(o.steps), r.seconds);
    if (dev)
        std::printf("dev accuracy %.4f on %lld examples\n", dev->accuracy, static_cast<long long>(dev->n));
    if (dev_similarity)
        std::printf("dev Spearman %.4f, Pearson %.4f on %lld pairs\n", dev_similarity->spearman,
                    dev_similarity->pearson, static_cast<long long>(dev_similarity->n));
    std::printf("wrote %s\n", out.c_str());
    return 0;
}

} // namespace embedlab::cli
