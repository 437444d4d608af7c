// embedlab-cli task NAME [MODEL] --data FILE: zero-shot accuracy (sst2, mc) or
// STS-B correlation (stsb), optionally against the original model (tasks.hpp).
#include <cmath>

#include "common.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/non_finite.hpp"
#include "embedlab/tasks.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

namespace {

struct Loaded {
    LoadedModel model;
    std::string path;
};

Loaded load_for_task(const std::string& path, const Args& args)
{
    LoadOptions options = load_options(args);
    options.need_tokenizer = true;
    Loaded l{load_model(path, options), path};
    print_warnings(l.model.files.warnings);
    return l;
}

// One JSON line per example: its label, the choices' scores and both choices.
std::string examples_jsonl(const TaskResult& r, const TaskResult* reference)
{
    std::string out;
    for (size_t i = 0; i < r.examples.size(); ++i) {
        const auto& e = r.examples[i];
        Json j = {{"index", i},         {"label", e.label},
                  {"choice", e.choice}, {"choice_norm", e.choice_norm},
                  {"loglik", e.loglik}, {"continuation_tokens", e.continuation_tokens}};
        if (e.truncated)
            j["truncated"] = true;
        if (reference)
            j["reference_choice"] = reference->examples[i].choice;
        out += j.dump() + "\n";
    }
    return out;
}

// `evaluate` on the reference: a model that overflows is named as the reference.
template <class F> auto on_reference(const Loaded& ref, F&& evaluate)
{
    try {
        return evaluate();
    } catch (const NonFiniteError& e) {
        throw NonFiniteError("the reference " + ref.path + ": " + e.what());
    }
}

int run_similarity(const Args& args, const std::string& data, const Loaded& lm, const Loaded* ref)
{
    const auto pairs = read_sentence_pairs(data, {.limit = args.get_int("--limit", 0, 0, 1 << 30)});
    SimilarityResult r, rr;
    {
        ProgressPrinter progress("stsb", "pairs", args.has("--quiet"));
        r = evaluate_similarity(*lm.model.model, *lm.model.tokenizer, pairs, progress.callback());
    }
    if (ref) {
        ProgressPrinter progress("stsb (reference)", "pairs", args.has("--quiet"));
        rr = on_reference(*ref, [&] {
            return evaluate_similarity(*ref->model.model, *ref->model.tokenizer, pairs, progress.callback());
        });
    }
    if (const auto out = args.get("--out")) {
        std::string lines;
        for (size_t i = 0; i < pairs.size(); ++i)
            lines += Json({{"index", i}, {"score", pairs[i].score}, {"cosine", r.cosines[i]}}).dump() + "\n";
        create_parent_directories(*out);
        write_file_atomic(*out, lines);
    }
    Json j = {{"task", "stsb"}, {"model", lm.path}, {"data", data}};
    j.update(similarity_json(r));
    if (ref) {
        j["reference"] = ref->path;
        j["reference_spearman"] = rr.spearman;
        j["reference_pearson"] = rr.pearson;
        // Sentence-embedding models: do the compressed and the original find the same neighbours?
        j["retrieval_agreement_top10"] = retrieval_agreement(r.embeddings, rr.embeddings, 10);
    }
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("stsb: Spearman %.4f, Pearson %.4f over %lld pairs (%.1f s)\n", r.spearman, r.pearson,
                (long long)r.n, r.seconds);
    if (ref)
        std::printf(
            "reference %s: Spearman %.4f, Pearson %.4f; top-10 neighbours shared over the %lld sentences: "
            "%.4f\n",
            ref->path.c_str(), rr.spearman, rr.pearson, static_cast<long long>(r.embeddings.size(0)),
            retrieval_agreement(r.embeddings, rr.embeddings, 10));
    return 0;
}

} // namespace

int command_task(const std::vector<std::string>& argv)
{
    Args args("task", argv, {"--data", "--limit", "--reference", "--out", "--tokenizer"},
              {"--json", "--quiet", "--no-verify", "--force"});
    const auto& pos = args.positional();
    if (pos.empty() || pos.size() > 2)
        throw InputError(std::string("task: give the task name (") + task_names + ") and optionally MODEL");
    const std::string task = pos[0];
    const std::string model = pos.size() == 2 ? pos[1] : default_model_path().string();
    const std::string data =
        args.required("--data", "FILE", "GLUE tasks: the task's dev.tsv; mc: a JSONL file");
    if (!is_known_task(task))
        throw InputError("task: unknown task '" + task + "' (tasks: " + task_names + ")");
    const int64_t limit = args.get_int("--limit", 0, 0, 1 << 30);
    // Before any work: the per-example file is new (or --force) and none of the inputs.
    if (const auto out = args.get("--out"))
        check_output_file(*out, args.has("--force"), input_paths(args, {model}));
    // Read the data before the models: a bad file fails in a second.
    TaskData examples;
    if (task != "stsb")
        examples = read_task_data(task, data, {.limit = limit});
    const Loaded lm = load_for_task(model, args);
    std::optional<Loaded> ref;
    if (const auto r = args.get("--reference")) {
        ref = load_for_task(*r, args);
        if (ref->model.model->config().vocab_size != lm.model.model->config().vocab_size)
            throw InputError("task: " + model + " and the reference " + *r +
                             " have different vocabularies; agreement needs one tokenizer");
    }
    if (task == "stsb")
        return run_similarity(args, data, lm, ref ? &*ref : nullptr);

    TaskResult r, rr;
    {
        ProgressPrinter progress(task, "examples", args.has("--quiet"));
        r = evaluate_task(*lm.model.model, *lm.model.tokenizer, examples, progress.callback());
    }
    if (ref) {
        ProgressPrinter progress(task + " (reference)", "examples", args.has("--quiet"));
        rr = on_reference(*ref, [&] {
            return evaluate_task(*ref->model.model, *ref->model.tokenizer, examples, progress.callback());
        });
    }
    if (const auto out = args.get("--out")) {
        create_parent_directories(*out);
        write_file_atomic(*out, examples_jsonl(r, ref ? &rr : nullptr));
    }
    Json j = {{"task", task}, {"model", model}, {"data", data}};
    j.update(task_json(r));
    if (ref) {
        j["reference"] = ref->path;
        j["reference_accuracy"] = rr.accuracy;
        j["reference_accuracy_norm"] = rr.accuracy_norm;
        j["agreement"] = choice_agreement(r, rr);
    }
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("%s: accuracy %.4f (acc_norm %.4f) over %lld examples (%.1f s)\n", task.c_str(), r.accuracy,
                r.accuracy_norm, (long long)r.n, r.seconds);
    if (!std::isnan(r.mcc))
        std::printf("%s: Matthews correlation %.4f\n", task.c_str(), r.mcc);
    if (!std::isnan(r.f1))
        std::printf("%s: F1 (label 1) %.4f\n", task.c_str(), r.f1);
    if (ref)
        std::printf("reference %s: accuracy %.4f (acc_norm %.4f); the same choice on %.4f of the examples\n",
                    ref->path.c_str(), rr.accuracy, rr.accuracy_norm, j["agreement"].get<double>());
    return 0;
}

} // namespace embedlab::cli
