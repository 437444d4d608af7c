// sweep: one compression per setting on the same tokenized text, one row each,
// so ppl can be read against size (a rank sweep, or TT shapes x ranks / eps).
#include <cmath>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "common.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/sweep_list.hpp"
#include "embedlab/text_format.hpp"
#include "frequency_text.hpp"
#include "progress_printer.hpp"
#include "sweep_table.hpp"
#include "text_eval.hpp"

namespace embedlab::cli {

namespace {

std::vector<std::string> split_list(const std::string& s);

// The sweep's flags as the registry's grammars read them (method_registry.hpp).
class ArgsSweepValues : public SweepValues {
public:
    explicit ArgsSweepValues(const Args& args) : args_(args) {}
    bool has(const std::string& option) const override { return args_.has(option); }
    // A list or a range (sweep_list.hpp, as the workbench's number boxes read them).
    std::vector<int64_t> integers(const std::string& option, int64_t lo, int64_t hi) const override
    {
        const auto v = args_.get(option);
        return v ? sweep_integers(*v, lo, hi, "sweep: " + option) : std::vector<int64_t>{};
    }
    std::vector<double> numbers(const std::string& option, double lo, double hi) const override
    {
        const auto v = args_.get(option);
        return v ? sweep_numbers(*v, lo, hi, "sweep: " + option) : std::vector<double>{};
    }
    std::vector<std::vector<int64_t>> integer_sets(const std::string& option, int64_t lo,
                                                   int64_t hi) const override
    {
        std::vector<std::vector<int64_t>> out;
        std::stringstream in(args_.get(option).value_or(""));
        std::string part;
        while (std::getline(in, part, ':'))
            out.push_back(Args("sweep", {option, part}, {option}, {}).get_int_list(option, lo, hi));
        return out;
    }
    std::vector<std::string> words(const std::string& option) const override
    {
        return split_list(args_.get(option).value_or(""));
    }

private:
    const Args& args_;
};

std::vector<std::string> split_list(const std::string& s)
{
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string part;
    while (std::getline(in, part, ','))
        if (!part.empty())
            out.push_back(part);
    return out;
}

} // namespace

Json sweep_row(const Json& run_record)
{
    // Copies: a member a record lacks reads as null (a const Json's operator[] on a
    // missing key is undefined behaviour), a mistyped one throws json::exception, and
    // check_sweep_row says what printing needs (sweep-collect reads records from files).
    Json record = run_record;
    Json e = record.contains("evaluation") ? record["evaluation"] : Json::object();
    Json fit = record.contains("fit") ? record["fit"] : Json::object();
    Json row = record["spec"];
    if (record.contains("summary"))
        row["setting"] = record["summary"].value("parameters", "");
    row["params"] = record["accounting"]["params_after"];
    row["ratio"] = record["accounting"]["ratio"];
    // Bytes as stored (issue 38): what a quantised baseline is compared at.
    if (record["accounting"].contains("storage")) {
        row["bytes_after"] = record["accounting"]["storage"]["bytes_after"];
        row["bytes_ratio"] = record["accounting"]["storage"]["bytes_ratio"];
    }
    if (fit.contains("explained_variance_at_rank"))
        row["explained_variance"] = fit["explained_variance_at_rank"];
    row["relative_frobenius"] = record["reconstruction"]["relative_frobenius"];
    row["mean_cosine"] = record["reconstruction"]["mean_cosine"];
    if (row.contains("keep_ratio")) {
        row["rare_mean_cosine"] = fit.contains("rare_cosine") ? fit["rare_cosine"].value("mean", 1.0) : 1.0;
        row["token_coverage"] = e["coverage"]["token_coverage"];
        row["line_coverage"] = e["coverage"]["line_coverage"];
        if (fit.contains("knn") && fit["knn"].contains("recall_at_k")) { // lle --knn ivf: the lists as run
            row["nlist"] = fit["knn"]["nlist"];
            row["nprobe"] = fit["knn"]["nprobe"];
            row["knn_recall_at_k"] = fit["knn"]["recall_at_k"];
        }
    }
    row["ppl"] = e["compressed"]["ppl"];
    row["nll_per_token"] = e["compressed"]["nll_per_token"];
    row["delta_ln_ppl"] = e["delta_ln_ppl"];
    row["fit_seconds"] = fit.value("seconds", 0.0);
    sweep_evaluation_columns(e, row);
    return row;
}

void sweep_evaluation_columns(const Json& e, Json& row)
{
    if (e.contains("divergence")) {
        row["kl_mean"] = e["divergence"]["kl_mean"];
        row["top1_agreement"] = e["divergence"]["top1_agreement"];
    }
    if (e.contains("task")) {
        row["task"] = e["task"]["name"];
        row["task_accuracy"] = e["task"]["accuracy"];
        row["task_accuracy_original"] = e["task"]["original"]["accuracy"];
        row["task_n"] = e["task"]["n"];
    }
}

std::string sweep_setting(const Json& row)
{
    // The settings as run, in the method's own words (TableMethod::parameters).
    return row.value("method", std::string()) + " " + row.value("setting", std::string());
}

void sweep_print_header()
{
    std::printf("%-36s %12s %8s %10s %10s %12s %12s %8s\n", "setting", "params", "ratio", "expl.var",
                "mean cos", "ppl", "dlnPPL", "fit s");
}

void check_sweep_row(const Json& row)
{
    const auto number = [&](const char* column) {
        if (!row.contains(column) || !row[column].is_number())
            throw InputError(std::string("record gives no number for the column ") + column + " (" +
                             (row.contains(column) ? printable(row[column].dump(), 60) : "missing") + ")");
    };
    const auto text = [&](const char* column) {
        if (row.contains(column) && !row[column].is_string())
            throw InputError(std::string("record's ") + column + " is " + printable(row[column].dump(), 60) +
                             ", not a string");
    };
    if (!row.is_object())
        throw InputError("record's spec is " + printable(row.dump(), 60) + ", not an object");
    text("method");
    text("setting");
    for (const char* column : {"params", "ratio", "mean_cosine", "ppl", "delta_ln_ppl", "fit_seconds"})
        number(column);
    if (row.contains("explained_variance"))
        number("explained_variance");
    if (row.contains("bytes_after"))
        for (const char* column : {"bytes_after", "bytes_ratio"})
            number(column);
    if (row.contains("keep_ratio"))
        for (const char* column : {"rare_mean_cosine", "token_coverage", "line_coverage"})
            number(column);
    if (row.contains("kl_mean"))
        for (const char* column : {"kl_mean", "top1_agreement"})
            number(column);
    if (row.contains("task_accuracy")) {
        if (!row.contains("task") || !row["task"].is_string())
            throw InputError("record gives no task name");
        for (const char* column : {"task_accuracy", "task_accuracy_original", "task_n"})
            number(column);
    }
}

void sweep_print_row(const Json& row, const std::string& suffix)
{
    // Strings from a record (sweep-collect's come from files) are escaped (text_format.hpp).
    std::printf("%-36s %12lld %8.4f %10s %10.6f %12.4f %+12.6f %8.3f",
                printable(sweep_setting(row), 2000).c_str(), (long long)row["params"].get<int64_t>(),
                row["ratio"].get<double>(),
                row.contains("explained_variance")
                    ? std::to_string(row["explained_variance"].get<double>()).substr(0, 8).c_str()
                    : "-",
                row["mean_cosine"].get<double>(), row["ppl"].get<double>(), row["delta_ln_ppl"].get<double>(),
                row["fit_seconds"].get<double>());
    if (row.contains("bytes_after"))
        std::printf("  bytes %.0f (ratio %.4f)", row["bytes_after"].get<double>(),
                    row["bytes_ratio"].get<double>());
    if (row.contains("keep_ratio")) // the paper's Tables 5, 6 and 9
        std::printf("  rare cos %.4f  token cov %.4f  line cov %.4f", row["rare_mean_cosine"].get<double>(),
                    row["token_coverage"].get<double>(), row["line_coverage"].get<double>());
    if (row.contains("kl_mean"))
        std::printf("  KL %.6f  top-1 %.4f", row["kl_mean"].get<double>(),
                    row["top1_agreement"].get<double>());
    if (row.contains("task_accuracy"))
        std::printf("  %s acc %.4f (original %.4f, n %lld)",
                    printable(row["task"].get<std::string>()).c_str(), row["task_accuracy"].get<double>(),
                    row["task_accuracy_original"].get<double>(), (long long)row["task_n"].get<int64_t>());
    std::printf("%s\n", suffix.c_str());
    std::fflush(stdout);
}

Json sweep_json(const std::string& model, const Json& run_record, const Json& rows)
{
    Json first_record = run_record; // a copy, as in sweep_row: a missing member reads as null
    Json e = first_record["evaluation"];
    return {{"model", model},
            {"method", first_record.value("method", "")},
            {"text", e["text"]},
            {"text_sha256", e["text_sha256"]},
            {"tokens", e["tokens"]},
            {"ctx", e["ctx"]},
            {"stride", e["stride"]},
            {"baseline_ppl", e["baseline"]["ppl"]},
            {"params_before", first_record["accounting"]["params_before"]},
            {"rows", rows}};
}

void sweep_print_original(const Json& sweep)
{
    std::printf("%-36s %12lld %8.4f %10s %10s %12.4f %12s\n", "original",
                (long long)sweep["params_before"].get<int64_t>(), 1.0, "1", "1",
                sweep["baseline_ppl"].get<double>(), "0");
}

int command_sweep(const std::vector<std::string>& argv)
{
    // A method of the attention values (flat) sweeps through its own flags and path.
    const auto* peeked = find_method(peek_option(argv, "--method"));
    if (peeked && peeked->part == CompressedPart::AttentionValues)
        return sweep_flat(argv);
    // sweep's own flags, then every method's sweep options (its grammar in the registry).
    std::set<std::string> valued{
        "--method",    "--eval-text", "--ctx",           "--stride",     "--batch",       "--tokenizer",
        "--freq-text", "--reg",       "--knn",           "--nlist",      "--nprobe",      "--sweep-dir",
        "--partition", "--time",      "--cpus-per-task", "--mem",        "--array-limit", "--sbatch-arg",
        "--slurm-cli", "--task",      "--task-data",     "--task-limit", "--eval-tokens"},
        switches{"--json", "--quiet", "--divergence", "--slurm", "--no-wait"};
    std::vector<std::string> sweeping; // every method's sweep options, for "does not apply"
    for (const auto& m : method_registry()) {
        valued.insert(m.sweep.options.begin(), m.sweep.options.end());
        switches.insert(m.sweep.switches.begin(), m.sweep.switches.end());
        sweeping.insert(sweeping.end(), m.sweep.options.begin(), m.sweep.options.end());
        sweeping.insert(sweeping.end(), m.sweep.switches.begin(), m.sweep.switches.end());
    }
    Args args("sweep", argv, valued, switches);
    const auto path = model_argument(args);
    if (!args.has("--eval-text"))
        throw InputError("sweep: --eval-text FILE is required (each row reports its perplexity)");
    const auto* method = find_method(args.get("--method").value_or(""));
    if (!method || !method->sweep.settings) {
        std::string sweepable;
        for (const auto& m : method_registry())
            if (m.sweep.settings || m.part == CompressedPart::AttentionValues) // flat: sweep_flat
                sweepable += (sweepable.empty() ? "" : "|") + std::string(m.name);
        throw InputError(
            "sweep: --method " + sweepable + " is required" +
            (method ? std::string(" (") + method->name + " has no sweep: run compress per setting)" : ""));
    }
    const auto takes = [&](const std::string& field) {
        return std::find(method->fields.begin(), method->fields.end(), field) != method->fields.end();
    };
    for (const auto& o : sweeping)
        if (args.has(o) &&
            std::find(method->sweep.options.begin(), method->sweep.options.end(), o) ==
                method->sweep.options.end() &&
            std::find(method->sweep.switches.begin(), method->sweep.switches.end(), o) ==
                method->sweep.switches.end())
            throw InputError("sweep: " + o + " does not apply to --method " + method->name + " (it takes " +
                             method->sweep.usage + ")");
    for (const auto& [flag, field] : {std::pair{"--freq-text", "freq_text"}, std::pair{"--reg", "reg"}})
        if (args.has(flag) && !takes(field))
            throw InputError(std::string("sweep: ") + flag + " applies to the lle methods");
    if (takes("freq_text") && !args.has("--freq-text"))
        throw InputError("the lle methods need --freq-text FILE (token frequencies decide common vs rare)");
    const KnnFlags knn = knn_flags(args, "sweep"); // lle's neighbour search
    for (const auto& o : kKnnOptions)
        if (!method->needs_frequency_text && args.has(o))
            throw InputError("sweep: " + o + " applies to --method lle (its neighbour search)");
    if (method->needs_frequency_text)
        warn_if_frequency_text_is_evaluated(args);
    auto lm = load_model(path, load_options(args));
    print_warnings(lm.files.warnings);
    auto& model = *lm.model;
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(path.string() + ": sweep needs an uncompressed model");
    // Each setting is an experiment request (experiment.hpp), run by the engine; the
    // original's perplexity is computed once (the engine caches it per model and ids).
    CompressionRequest base;
    base.model = path.string();
    base.tokenizer = args.get("--tokenizer").value_or("");
    base.method = method->name;
    eval_flags_into(args, model.max_context(), base);
    if (takes("freq_text")) {
        base.freq_text = *args.get("--freq-text");
        base.reg = args.get_double("--reg", base.reg, 0, 1e6);
        base.knn = knn.knn; // check_request refuses ivf on lle-unk and lle-pca
        base.nlist = knn.nlist;
        base.nprobe = knn.nprobe;
    }
    std::vector<CompressionRequest> requests =
        method->sweep.settings(ArgsSweepValues(args), base, model.config().hidden_size);
    // Every setting is checked against the model before any runs (a q4_k on d = 128 fails
    // now, not after the others' evaluations).
    for (const auto& r : requests)
        check_request(r, model.config().embedding_dim(), path.string());
    // A repeated setting runs once; a sweep of more than kMaxSweepRuns settings is
    // refused before any work (each is a compression and an evaluation).
    {
        constexpr size_t kMaxSweepRuns = 256;
        std::set<std::string> seen;
        std::vector<CompressionRequest> unique;
        for (const auto& r : requests)
            if (seen.insert(request_json(r).dump()).second)
                unique.push_back(r);
        if (unique.size() < requests.size() && !args.has("--quiet"))
            std::fprintf(stderr, "sweep: %zu repeated settings run once\n", requests.size() - unique.size());
        if (unique.size() > kMaxSweepRuns)
            throw InputError("sweep: " + std::to_string(unique.size()) +
                             " settings, each a compression and an evaluation; a sweep runs at most " +
                             std::to_string(kMaxSweepRuns) + ": split it");
        requests = std::move(unique);
    }
    if (args.has("--slurm")) {
        lm = LoadedModel{}; // the nodes load it; nothing here needs it any more
        return sweep_on_slurm(args, requests, path.string());
    }
    for (const char* option : {"--sweep-dir", "--partition", "--time", "--cpus-per-task", "--mem",
                               "--array-limit", "--sbatch-arg", "--slurm-cli", "--no-wait"})
        if (args.has(option))
            throw InputError(std::string("sweep: ") + option + " applies to --slurm sweeps");
    const bool quiet = args.has("--quiet");
    std::optional<LoadedModel> loaded(std::move(lm)); // the first run takes it; later runs load again

    Json rows = Json::array(), first_record;
    if (!args.has("--json"))
        sweep_print_header();
    for (const auto& request : requests) {
        StagePrinter stages(quiet);
        const auto run =
            loaded ? run_compression(request, std::exchange(loaded, std::nullopt).value(), stages.callback())
                   : run_compression(request, stages.callback());
        const Json record = run_json(run);
        if (first_record.is_null())
            first_record = record;
        Json row = sweep_row(record);
        if (!args.has("--json"))
            sweep_print_row(row);
        rows.push_back(row);
    }
    const Json sweep = sweep_json(path.string(), first_record, rows);
    if (args.has("--json"))
        print_json(sweep);
    else
        sweep_print_original(sweep);
    return 0;
}

} // namespace embedlab::cli
