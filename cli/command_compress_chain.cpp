// compress --method trim [--then METHOD ... --then-store TYPE] (compress_chain.hpp):
// the flags as a pipeline request, run as the worker runs its JSON form.
#include <cmath>
#include <limits>

#include "common.hpp"
#include "compress_chain.hpp"
#include "embedlab/model_files.hpp"
#include "embedlab/pipeline.hpp"
#include "embedlab/text_format.hpp"
#include "embedlab/trim_fields.hpp"
#include "method_flags.hpp"
#include "progress_printer.hpp"
#include "text_eval.hpp"

namespace embedlab::cli {

namespace {

// The chain's own flags: the steps after trim and trim's declared fields (trim_fields.hpp)
// but --freq-text, which lle after trim reads too.
const std::set<std::string>& chain_flags()
{
    static const std::set<std::string> flags = [] {
        std::set<std::string> own{"--method", "--then", "--then-store"};
        for (const MethodField& f : trim_fields())
            if (f.name != "freq_text")
                own.insert(trim_flag(f));
        return own;
    }();
    return flags;
}
// What trim alone reads besides its own flags.
const std::set<std::string> kTrimAloneFlags{"--freq-text", "--eval-text", "--ctx",  "--out",
                                            "--force",     "--json",      "--quiet"};

Args chain_args(const std::vector<std::string>& argv)
{
    std::set<std::string> valued{"--out",         "--eval-text", "--ctx",       "--stride",    "--batch",
                                 "--tokenizer",   "--seed",      "--task",      "--task-data", "--task-limit",
                                 "--eval-tokens", "--then",      "--then-store"},
        switches{"--dense", "--force", "--json", "--quiet", "--divergence", "--positions"};
    valued.insert(chain_flags().begin(), chain_flags().end());
    add_method_flags(valued, switches);
    return Args("compress", argv, valued, switches);
}

std::string flag_of(const std::string& word)
{
    return word.substr(0, word.find('='));
}

// argv without the chain's own flags and, unless the method reads a frequency text
// (lle after trim reads the same one), without trim's --freq-text.
std::vector<std::string> method_argv(const std::vector<std::string>& argv, bool keep_freq_text)
{
    std::vector<std::string> out;
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string flag = flag_of(argv[i]);
        if (!chain_flags().count(flag) && (keep_freq_text || flag != "--freq-text"))
            out.push_back(argv[i]);
        else if (argv[i].find('=') == std::string::npos)
            ++i; // its value
    }
    return out;
}

void refuse_method_flags(const std::vector<std::string>& argv)
{
    for (const auto& word : argv)
        if (word.rfind("--", 0) == 0 && !chain_flags().count(flag_of(word)) &&
            !kTrimAloneFlags.count(flag_of(word)))
            throw InputError(
                "compress: " + flag_of(word) +
                " does not apply to --method trim alone (name a method after it: --then METHOD)");
    if (std::find(argv.begin(), argv.end(), "--then-store") != argv.end())
        throw InputError(
            "compress: --then-store needs a method after trim to store (--then quant --type q8_0 "
            "stores the trimmed table as q8_0)");
}

// The method step and the evaluation, read as plain compress reads them.
CompressionRequest method_step(const std::vector<std::string>& argv, const std::string& method,
                               const std::string& model, int64_t max_context)
{
    const auto* m = find_method(method);
    if (!m)
        throw InputError("compress: unknown --then '" + method + "' (" + method_names() + ")");
    const Args args = chain_args(method_argv(argv, m->needs_frequency_text));
    CompressionRequest r;
    r.model = model;
    r.method = method;
    r.tokenizer = args.get("--tokenizer").value_or("");
    r.positions = args.has("--positions");
    method_flags_into(args, r);
    check_method_flags(args, method, "compress");
    if (args.has("--seed"))
        r.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    eval_flags_into(args, max_context, r);
    return r;
}

CompressionRequest trim_alone(const Args& args, const std::string& model, int64_t max_context)
{
    CompressionRequest r;
    r.model = model;
    if (const auto text = args.get("--eval-text")) {
        r.eval_text = *text;
        r.ctx = args.get_int("--ctx", std::min<int64_t>(128, max_context), 1, max_context);
    }
    return r;
}

std::string bytes_text(double before, double after)
{
    if (!std::isfinite(before) || !std::isfinite(after))
        return "not known (the input mixes dtypes)";
    return std::to_string(static_cast<long long>(before)) + " -> " +
           std::to_string(static_cast<long long>(after)) + " (ratio " + short_number(after / before) + ")";
}

void print_chain(const PipelineResult& r, const std::string& out)
{
    const RunSummary& s = r.summary;
    std::printf("%s: %s %s\n", out.c_str(), s.method.c_str(), s.parameters.c_str());
    const Json& trim = r.record["pipeline"]["trim"];
    std::printf("  vocabulary %lld -> %lld tokens; table params %lld -> %lld (ratio %.4f)\n",
                static_cast<long long>(trim["vocab_size_before"].get<int64_t>()),
                static_cast<long long>(trim["kept_tokens"].get<int64_t>()),
                static_cast<long long>(s.params_before), static_cast<long long>(s.params_after), s.ratio);
    std::printf("  table bytes %s, model bytes %s: against the original model\n",
                bytes_text(s.bytes_before, s.bytes_after).c_str(),
                bytes_text(s.model_bytes_before, s.model_bytes_after).c_str());
    if (std::isfinite(s.bits_per_byte))
        std::printf("  bits per byte %.6f -> %.6f; ppl %.4f -> %.4f (each on its own tokenization)\n",
                    s.bits_per_byte_original, s.bits_per_byte, s.ppl_original, s.ppl);
    std::printf("  total %.3f s\n", s.seconds);
}

// A second --then: two table methods do not stack (say why, not "given twice").
void refuse_second_method(const std::vector<std::string>& argv)
{
    std::vector<std::string> methods;
    for (size_t i = 0; i < argv.size(); ++i)
        if (argv[i] == "--then" && i + 1 < argv.size())
            methods.push_back(argv[i + 1]);
        else if (argv[i].rfind("--then=", 0) == 0)
            methods.push_back(argv[i].substr(7));
    if (methods.size() > 1)
        throw InputError(
            "compress: --then " + methods[1] + " after --then " + methods[0] +
            " does not apply: " + second_method_refusal(methods[0], methods[1], "--then-store TYPE"));
}

// Says what remove_stale_chain_directories removed: files of ours, but the user's disk.
void remove_stale_working_directories(const std::string& out)
{
    for (const auto& stale : remove_stale_chain_directories(out))
        std::fprintf(stderr,
                     "compress: removed %s, the working directory of a chain that was killed (process %ld no "
                     "longer runs)\n",
                     printable(stale.path.string()).c_str(), stale.pid);
}

} // namespace

int compress_chain(const std::vector<std::string>& argv)
{
    refuse_second_method(argv);
    const Args args = chain_args(argv);
    if (args.required("--method", "trim") != "trim")
        throw InputError("compress: --then follows --method trim (a chain is trim, then one method; a single "
                         "method's --then-store is its --store)");
    const auto path = model_argument(args);
    const std::string out = args.required("--out", "DIR");
    PipelineRequest p;
    p.trim = trim_options(args);
    check_trim_options(*p.trim);
    const ModelFiles files = read_model_files(path, WeightValues::ShapesOnly);
    const int64_t max_context =
        files.config.max_positions > 0 ? files.config.max_positions : std::numeric_limits<int64_t>::max();
    if (const auto then = args.get("--then")) {
        p.request = method_step(argv, *then, path.string(), max_context);
        // The engine's checker, naming the flags (--rank for "rank"); run_pipeline checks the rest.
        check_request(p.request, files.config.hidden_size, "compress", method_field_flag);
        if (const auto store = args.get("--then-store")) {
            if (args.has("--store"))
                throw InputError(
                    "compress: --store and --then-store name the same step's stored type; give one");
            p.request.store = *store;
        }
    } else {
        refuse_method_flags(argv);
        p.request = trim_alone(args, path.string(), max_context);
    }
    p.steps = pipeline_json(p)["pipeline"];
    std::vector<std::filesystem::path> inputs{path};
    if (!p.trim->keep_tokens.empty())
        inputs.push_back(p.trim->keep_tokens);
    prepare_output_directory(out, args.has("--force"), input_paths(args, inputs));
    remove_stale_working_directories(out);
    StagePrinter stages(args.has("--quiet") || args.has("--json"));
    const auto result = run_pipeline(p, out, {.overwrite = args.has("--force"), .dense = args.has("--dense")},
                                     stages.callback());
    if (args.has("--json"))
        print_json(result.record);
    else
        print_chain(result, out);
    return 0;
}

} // namespace embedlab::cli
