// embedlab-cli trim: vocabulary trimming (engine: trim.hpp).
#include "common.hpp"
#include "compress_chain.hpp"
#include "embedlab/text_format.hpp"
#include "embedlab/trim.hpp"
#include "embedlab/trim_fields.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

TrimOptions trim_options(const Args& args)
{
    TrimOptions o;
    const MethodField& freq = trim_field("freq_text"); // its value name and help as declared
    o.freq_text = args.required(trim_flag(freq), freq.doc.value_name, freq.doc.help);
    if (args.has("--keep"))
        o.keep = args.get_int("--keep", 0, 1, INT32_MAX);
    if (args.has("--coverage"))
        o.coverage = args.get_double("--coverage", 0, -1e300, 1e300); // trim's check names the range
    if (auto f = args.get("--keep-tokens"))
        o.keep_tokens = *f;
    if (auto f = args.get("--eval-text"))
        o.eval_text = *f;
    o.ctx = args.get_int("--ctx", 0, 1, 1 << 20);
    o.overwrite = args.has("--force");
    return o;
}

namespace {

void print_summary(const TrimReport& r)
{
    const Json& j = r.record;
    std::printf(
        "trimmed %s vocabulary: %lld -> %lld tokens (%lld required), %s of the frequency text covered\n",
        r.family.c_str(), static_cast<long long>(r.vocab_before), static_cast<long long>(r.kept.size()),
        static_cast<long long>(r.required), short_number(j["frequency"]["covered"].get<double>()).c_str());
    std::printf("  weights %s -> %s bytes (ratio %s); tensors cut: %s\n",
                std::to_string(j["bytes_before"].get<uint64_t>()).c_str(),
                std::to_string(j["bytes_after"].get<uint64_t>()).c_str(),
                short_number(j["bytes_ratio"].get<double>()).c_str(),
                joined(j["tensors_cut"].get<std::vector<std::string>>()).c_str());
    if (!j.contains("evaluation"))
        return;
    const Json& e = j["evaluation"];
    std::printf("  eval text: %s of its tokens changed, %s were dropped ids\n",
                short_number(e["changed_token_share"].get<double>()).c_str(),
                short_number(e["dropped_token_share"].get<double>()).c_str());
    if (e.contains("original") && e["original"].contains("bits_per_byte") &&
        e["trimmed"].contains("bits_per_byte"))
        std::printf(
            "  bits per byte %.6f -> %.6f, ppl %.4f -> %.4f (token ppl over different tokenizations), "
            "dropped mass %.6f\n",
            e["original"]["bits_per_byte"].get<double>(), e["trimmed"]["bits_per_byte"].get<double>(),
            e["original"]["ppl"].get<double>(), e["trimmed"]["ppl"].get<double>(),
            e["dropped_mass_mean"].get<double>());
}

} // namespace

int command_trim(const std::vector<std::string>& argv)
{
    std::set<std::string> valued{"--eval-text", "--ctx", "--out"};
    for (const MethodField& f : trim_fields()) // --freq-text, --coverage, --keep, --keep-tokens
        valued.insert(trim_flag(f));
    Args args("trim", argv, valued, {"--force", "--json", "--quiet"});
    const auto model = args.single_positional("MODEL");
    if (!model)
        throw InputError("trim: MODEL is required (a Hugging Face model directory)");
    const std::string out = args.required("--out", "DIR");
    const TrimOptions options = trim_options(args);
    check_trim_options(options);
    std::vector<std::filesystem::path> inputs{std::filesystem::path(*model)};
    if (!options.keep_tokens.empty())
        inputs.push_back(options.keep_tokens);
    prepare_output_directory(out, options.overwrite, input_paths(args, inputs));
    ProgressPrinter bar("trim", "steps", args.has("--quiet") || args.has("--json"));
    const TrimReport report = trim_model(*model, out, options, bar.callback());
    if (args.has("--json"))
        print_json(report.record);
    else
        print_summary(report);
    return 0;
}

} // namespace embedlab::cli
