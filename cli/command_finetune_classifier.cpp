// embedlab-cli finetune ENCODER --head classification --task sst2|cola|mrpc|.. --train FILE --out DIR:
// a sequence classifier fine-tuned from an encoder (classifier_finetune.hpp), scored
// on --eval FILE (the task's dev set) when given. With --trials or --compress: the LLE
// paper's protocol (run_classifier_protocol), its trials, k selection and scores in one record.
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "common.hpp"
#include "embedlab/classifier_finetune.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/tasks.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

namespace {

std::vector<std::string> comma_list(const std::string& text)
{
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');)
        out.push_back(item);
    return out;
}

// --trials, --compress, --keep-ratios, --k, --freq-text: the protocol, or none when none is given.
std::optional<ClassifierProtocolOptions> protocol_options(const Args& args,
                                                          const ClassifierTrainOptions& train)
{
    const bool compress = args.has("--compress");
    if (!compress)
        for (const char* o : {"--keep-ratios", "--k", "--freq-text"})
            if (args.has(o))
                throw InputError(std::string("finetune: ") + o +
                                 " applies to --compress lle|lle-unk|lle-pca");
    if (!compress && !args.has("--trials"))
        return std::nullopt;
    if (!args.has("--eval"))
        throw InputError("finetune: --trials and --compress score the classifiers on --eval FILE (the test "
                         "set); give it");
    ClassifierProtocolOptions o{.train = train};
    o.trials = args.get_int("--trials", 1, 1, 100);
    if (!compress)
        return o;
    std::vector<double> ratios;
    for (const auto& item : comma_list(args.get("--keep-ratios").value_or("1.0"))) {
        size_t used = 0;
        double r = 0;
        try {
            r = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || !(r > 0 && r <= 1))
            throw InputError("finetune: every value of --keep-ratios must be in (0, 1], got '" + item + "'");
        ratios.push_back(r);
    }
    const std::string k = args.get("--k").value_or("");
    const bool k_auto = k == "auto";
    std::vector<int64_t> given;
    if (!k.empty() && !k_auto)
        given = args.get_int_list("--k", 1, 1 << 20);
    for (const auto& method : comma_list(args.required("--compress", "lle|lle-unk|lle-pca[,..]"))) {
        // The protocol's methods are the frequency-split family (the registry's lle rows).
        const auto* row = find_method(method);
        if (!row || !row->needs_frequency_text)
            throw InputError("finetune: --compress takes lle, lle-unk or lle-pca (comma-separated), not '" +
                             method + "'");
        const bool k_required = method_field_doc(*row, "k").required; // lle-unk's k is optional
        if (k_required && k.empty())
            throw InputError("finetune: --compress " + method +
                             " needs --k K[,K2..] or --k auto (chosen on a 10% validation split of --train, "
                             "seed 42, as the paper)");
        for (const double r : ratios)
            o.settings.push_back({.method = method,
                                  .keep_ratio = r,
                                  .ks = !k_required ? std::vector<int64_t>{0}
                                        : k_auto    ? row->classifier_protocol_ks // the paper's range
                                                    : given});
    }
    o.select_k = k_auto || given.size() > 1;
    return o; // --freq-text is read once the tokenizer is loaded (run_protocol)
}

struct ProtocolRun {
    std::string task, train_file, out;
    bool full = false;
    std::string schedule;
};

std::string fixed(const char* format, double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

std::string plus_minus(const Json& scores)
{
    std::string s = fixed("%.4f", scores["mean"].get<double>());
    s += " ± "; // piece by piece: GCC 12's -Wrestrict
    s += fixed("%.4f", scores["std"].get<double>());
    return s;
}

// The paper's Table 1 for this task: one row per setting, then each setting's k candidates.
void print_protocol(const Json& p, const std::string& task)
{
    std::string seeds;
    for (const auto& s : p["seeds"]) {
        if (!seeds.empty())
            seeds += ", ";
        seeds += std::to_string(s.get<uint64_t>());
    }
    std::printf("protocol: %lld trials (seeds %s), %s %s on %lld test examples, trained on %lld\n",
                p["trials"].get<long long>(), seeds.c_str(), task.c_str(),
                p["metric"].get<std::string>().c_str(), p["test_examples"].get<long long>(),
                p["train_examples"].get<long long>());
    if (p.contains("split"))
        std::printf(
            "k chosen on %lld validation examples (%.0f%% of --train, seed %llu); mean ± sample std\n",
            p["split"]["validation_examples"].get<long long>(),
            100 * p["split"]["validation_fraction"].get<double>(),
            p["split"]["seed"].get<unsigned long long>());
    if (p.contains("common_vocabulary")) { // something was compressed
        const auto& vc = p["common_vocabulary"];
        std::printf("V_C counted from the %s: %lld tokens, %lld distinct\n",
                    vc["source"].get<std::string>().c_str(), vc["tokens"].get<long long>(),
                    vc["distinct_seen"].get<long long>());
    }
    std::printf("%-10s %7s %7s %4s  %-17s %s\n", "setting", "r(V_C)", "|V_C|", "k", "test", "validation");
    auto row = [](const std::string& name, const std::string& r, const std::string& vc, const std::string& k,
                  const Json& scores) {
        std::printf("%-10s %7s %7s %4s  %-17s %s\n", name.c_str(), r.c_str(), vc.c_str(), k.c_str(),
                    plus_minus(scores["test"]).c_str(),
                    scores.contains("validation") ? plus_minus(scores["validation"]).c_str() : "-");
    };
    row("original", "-", "-", "-", p["original"]);
    for (const auto& s : p["settings"])
        row(s["method"].get<std::string>(), fixed("%.2f", s["keep_ratio"].get<double>()),
            std::to_string(s["common"].get<long long>()),
            s.contains("k") ? std::to_string(s["k"].get<long long>()) : "-", s);
    for (const auto& s : p["settings"]) {
        if (s["per_k"].size() < 2)
            continue;
        std::printf("%s r(V_C) %s, each k:", s["method"].get<std::string>().c_str(),
                    fixed("%.2f", s["keep_ratio"].get<double>()).c_str());
        for (const auto& k : s["per_k"])
            std::printf(" k=%lld val %s test %s;", k["k"].get<long long>(),
                        fixed("%.4f", k["validation"]["mean"].get<double>()).c_str(),
                        fixed("%.4f", k["test"]["mean"].get<double>()).c_str());
        std::printf("\n");
    }
}

int run_protocol(const Args& args, ClassifierProtocolOptions o, const LoadedModel& base,
                 const LabelledTexts& train, const ClassifierTrainOptions& train_options,
                 const ProtocolRun& run)
{
    if (const auto f = args.get("--freq-text")) { // V_C from that text instead of the training examples
        o.frequency_ids = base.tokenizer->encode(read_text_file(*f));
        if (o.frequency_ids->empty())
            throw InputError(*f + ": the frequency text has no tokens");
    }
    const auto eval = *args.get("--eval");
    const bool regression = run.task == "stsb";
    const auto test = regression ? regression_pairs(read_sentence_pairs(eval), eval)
                                 : labelled_texts(read_task_data(run.task, eval));
    ClassifierProtocolResult r;
    {
        ProgressPrinter progress("finetune protocol", "steps", args.has("--quiet") || args.has("--json"));
        r = run_classifier_protocol(*base.model, *base.tokenizer, train, test, o, progress.callback());
    }
    auto protocol = protocol_json(r);
    protocol["test"] = std::filesystem::absolute(eval).lexically_normal().string();
    if (const auto f = args.get("--freq-text")) {
        protocol["common_vocabulary"]["path"] = std::filesystem::absolute(*f).lexically_normal().string();
        protocol["common_vocabulary"]["sha256"] = sha256_file(*f);
    }
    const auto& first = r.training.front();
    Json record{{"task", run.task},
                {"train", std::filesystem::absolute(run.train_file).lexically_normal().string()},
                {"train_sha256", sha256_file(run.train_file)},
                {"examples", r.train_examples},
                {"steps", first.options.steps},
                {"batch", train_options.batch},
                {"lr", train_options.lr},
                {"body_lr", train_options.body_lr},
                {"full", run.full},
                {"epochs", train_options.epochs},
                {"schedule", run.schedule},
                {"warmup", train_options.warmup},
                {"lr_first", first.lr_curve.front()},
                {"lr_last", first.lr_curve.back()},
                {"seed", r.seeds.front()},
                {"trainable_parameters", first.trainable_parameters},
                {"seconds", first.seconds},
                {"loss_first", first.loss_curve.front()},
                {"loss_last", first.loss_curve.back()},
                {"loss_curve", first.loss_curve},
                {"protocol", protocol}};
    save_classifier(base, *r.first_model, run.out, args.has("--force"), record);
    if (args.has("--json")) {
        Json j{{"model", model_argument(args).string()},
               {"out", run.out},
               {"labels", r.first_model->config().labels}};
        j["training"] = record;
        j["protocol"] = protocol;
        print_json(j);
        return 0;
    }
    print_protocol(protocol, run.task);
    std::printf("wrote %s (the first trial's classifier, seed %llu; the record holds every trial)\n",
                run.out.c_str(), static_cast<unsigned long long>(r.seeds.front()));
    return 0;
}

} // namespace

int command_finetune_classifier(const std::vector<std::string>& argv)
{
    Args args("finetune", argv,
              {"--head", "--task", "--train", "--eval", "--out", "--steps", "--batch", "--lr", "--body-lr",
               "--seed", "--limit", "--epochs", "--warmup", "--schedule",
               // the protocol (issue 62 item 6): trials, and the lle family on the trained table
               "--trials", "--compress", "--keep-ratios", "--k", "--freq-text"},
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
    const auto protocol = protocol_options(args, o);
    const auto path = model_argument(args);
    std::vector<std::filesystem::path> inputs{path, train_file};
    for (const char* file : {"--eval", "--freq-text"})
        if (const auto given = args.get(file))
            inputs.push_back(*given);
    prepare_output_directory(out, args.has("--force"), inputs);

    LoadOptions load = load_options(args);
    load.need_tokenizer = true;
    auto base = load_model(path, load);
    print_warnings(base.files.warnings);
    const auto train = regression
                           ? regression_pairs(read_sentence_pairs(train_file, {.limit = limit}), train_file)
                           : labelled_texts(read_task_data(task, train_file, {.limit = limit}));
    if (protocol)
        return run_protocol(args, *protocol, base, train, o, {task, train_file, out, full, schedule});
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
