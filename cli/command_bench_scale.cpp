// bench scale --like NAME: the cost of each operation on a full-size random-weight
// model (synth_model.hpp). Every operation runs as a child embedlab-cli, so its
// peak RSS is its own (wait4's rusage, Subprocess::usage) and nothing it leaves
// in this process's heap inflates the next one. Figures, not assertions.
//
//   inspect        DIR --json
//   eval           the first 257 ids of the held-out text (256 scored), ctx 128 or less
//   compress pca   --rank 64 (or d)
//   compress lle   --keep-ratio 0.5 --k 5, frequencies from the same text
//   compress flat  --remaining 0.5, 4 calibration samples of ctx tokens
//   compress tt    --eps 0.5 on the most balanced 3-factor shape of d
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include <unistd.h>

#include "common.hpp"
#include "embedlab/accounting.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/file_input.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/subprocess.hpp"
#include "embedlab/synth_model.hpp"
#include "embedlab/tokenizer.hpp"
#include "work_dir.hpp"

namespace embedlab::cli {

namespace {

namespace fs = std::filesystem;

struct Operation {
    std::string name;
    std::vector<std::string> args; // after the executable
    std::string skip;              // why it does not apply to this model ("" runs it)
    fs::path out;                  // what it writes, removed after it ran
};

struct Outcome {
    double seconds = 0;
    Subprocess::Usage usage;
    int status = 0;
    std::string error; // the child's last stderr line when it failed
    Json out;          // its --json output, when it printed one
};

Outcome run_child(const fs::path& exe, const std::vector<std::string>& args)
{
    std::vector<std::string> argv = {exe.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto t0 = std::chrono::steady_clock::now();
    Subprocess p(argv, {.stdin_fd = -2});
    const auto limit = std::chrono::hours(6);
    Outcome o;
    o.status = p.pump({}, limit) ? p.wait(limit) : (p.terminate(), -1);
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.usage = p.usage();
    if (o.status != 0) {
        std::string err = p.stderr_text();
        while (!err.empty() && err.back() == '\n')
            err.pop_back();
        o.error = err.substr(err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1);
        if (o.error.empty())
            o.error = o.status < 0 ? "timed out" : "exit status " + std::to_string(o.status);
        return o;
    }
    o.out = Json::parse(p.stdout_text(), nullptr, /*allow_exceptions=*/false);
    return o;
}

std::string joined_ints(const std::vector<int64_t>& v)
{
    std::string s;
    for (int64_t x : v) {
        if (!s.empty())
            s += ',';
        s += std::to_string(x);
    }
    return s;
}

std::string megabytes(double bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
    return buf;
}

} // namespace

int bench_scale(const std::vector<std::string>& argv)
{
    Args args("bench scale", argv, {"--like", "--layers", "--dtype", "--keep", "--seed"},
              {"--json", "--quiet"});
    if (!args.positional().empty())
        throw InputError("bench scale: unexpected argument '" + args.positional().front() +
                         "'; the model is synthesized (--like NAME) or kept in --keep DIR");
    const std::string like = args.required("--like", "NAME", "one of synth's models, e.g. qwen2.5-0.5b");
    const bool quiet = args.has("--quiet");
    const fs::path exe = fs::read_symlink("/proc/self/exe");
    const fs::path text = default_sample_text_path();
    WorkDir work("embedlab-bench-scale");
    const fs::path model = args.has("--keep") ? fs::path(*args.get("--keep")) : work.path() / "model";
    auto note = [&](const std::string& what) {
        if (!quiet)
            std::fprintf(stderr, "bench scale: %s\n", what.c_str());
    };

    Json ops = Json::array();
    std::map<std::string, std::string> not_applicable; // method -> why
    auto record = [&](const std::string& name, const Outcome& o) {
        Json j = {{"operation", name},
                  {"seconds", o.seconds},
                  {"peak_rss_bytes", o.usage.peak_rss_bytes},
                  {"cpu_seconds", o.usage.user_seconds + o.usage.system_seconds},
                  {"status", o.status}};
        if (!o.error.empty())
            j["error"] = o.error;
        ops.push_back(j);
    };

    // An existing --keep DIR is used as it is (a previous run's model); otherwise synth writes it.
    const bool kept = args.has("--keep") && fs::exists(model / "config.json");
    if (!kept) {
        std::vector<std::string> synth = {"synth", "--like", like, "--out", model.string(), "--quiet"};
        for (const char* option : {"--layers", "--dtype", "--seed"})
            if (const auto v = args.get(option))
                synth.insert(synth.end(), {option, *v});
        note("synth --like " + like + " into " + model.string());
        const Outcome o = run_child(exe, synth);
        record("synth", o);
        if (o.status != 0)
            throw InputError("bench scale: synth failed: " + o.error);
    } else {
        if (args.has("--layers") || args.has("--dtype") || args.has("--seed"))
            throw InputError("bench scale: " + model.string() +
                             " exists; --layers, --dtype and --seed apply only when synth writes it");
        note("using the model in " + model.string());
    }

    const fs::path config_path = model / "config.json";
    const ModelConfig config = parse_hf_config(
        io::read_regular_file(config_path, io::metadata_file_cap, "config file"), config_path.string());
    const int64_t ctx = config.max_positions > 0 ? std::min<int64_t>(128, config.max_positions) : 128;
    const int64_t d = config.hidden_size;
    const std::vector<int64_t> tt_shape = balanced_tt_shape(d, "bench scale");
    if (tt_shape.empty())
        not_applicable["tt"] = "d = " + std::to_string(d) + " has no 3-factor shape";

    // 257 ids: 256 scored tokens, two windows of 128. Tokenized here, so eval's child
    // loads no tokenizer and measures the model alone.
    auto ids = load_tokenizer_from_directory(model)->encode(read_text_file(text));
    ids.resize(std::min<size_t>(ids.size(), 257));
    const fs::path ids_file = work.path() / "ids.txt";
    {
        std::ofstream out(ids_file);
        for (int32_t id : ids)
            out << id << '\n';
        if (!out)
            throw InputError(ids_file.string() + ": cannot write the eval ids");
    }

    for (const auto& m : method_applicability(config))
        if (!m.applies)
            not_applicable[m.method] = m.reason;
    auto compress = [&](const std::string& method, std::vector<std::string> extra) {
        Operation op{
            "compress " + method, {"compress", model.string(), "--method", method}, "", work.path() / method};
        op.args.insert(op.args.end(), extra.begin(), extra.end());
        op.args.insert(op.args.end(), {"--out", op.out.string(), "--quiet", "--json"});
        if (const auto it = not_applicable.find(method); it != not_applicable.end())
            op.skip = it->second;
        return op;
    };
    const std::vector<Operation> operations = {
        {"inspect", {"inspect", model.string(), "--json"}, ""},
        {"eval",
         {"eval", model.string(), "--ids", ids_file.string(), "--ctx", std::to_string(ctx), "--quiet",
          "--json"},
         ""},
        compress("pca", {"--rank", std::to_string(std::min<int64_t>(64, d))}),
        compress("lle", {"--freq-text", text.string(), "--keep-ratio", "0.5", "--k", "5"}),
        compress("flat", {"--remaining", "0.5", "--calib-text", text.string(), "--samples", "4", "--seqlen",
                          std::to_string(ctx)}),
        compress("tt", {"--shape", joined_ints(tt_shape), "--eps", "0.5"}),
    };

    int64_t parameters = 0;
    double tokens_per_second = 0;
    int failures = 0;
    for (const auto& op : operations) {
        if (!op.skip.empty()) {
            ops.push_back({{"operation", op.name}, {"skipped", op.skip}});
            continue;
        }
        note(op.name);
        const Outcome o = run_child(exe, op.args);
        record(op.name, o);
        failures += o.status != 0;
        if (!op.out.empty()) { // a full model for flat: the disk is not the bench's to fill
            std::error_code ec;
            fs::remove_all(op.out, ec);
        }
        if (o.status != 0 || !o.out.is_object())
            continue;
        if (op.name == "inspect")
            parameters = o.out["parameters"]["counts"]["total"].get<int64_t>();
        if (op.name == "eval") {
            tokens_per_second = o.out["tokens_per_second"].get<double>();
            ops.back()["tokens"] = o.out["tokens"];
            ops.back()["ctx"] = o.out["ctx"];
            ops.back()["tokens_per_second"] = tokens_per_second;
            ops.back()["load_seconds"] = o.out["load_seconds"];
        }
    }

    uint64_t file_bytes = 0;
    for (const auto& entry : fs::directory_iterator(model))
        if (entry.path().extension() == ".safetensors")
            file_bytes += entry.file_size();
    const double f32_bytes = 4.0 * static_cast<double>(parameters);
    Json j = {{"bench", "scale"},
              {"like", like},
              {"model", model.string()},
              {"reused", kept}, // an existing --keep DIR, not synthesized by this run
              {"model_type", config.model_type},
              {"layers", config.num_layers},
              {"parameters", parameters},
              {"float32_weight_bytes", f32_bytes},
              {"file_bytes", file_bytes},
              {"threads", at::get_num_threads()},
              // issue 21: eval's peak RSS should stay within 1.3 x the float32 weights + 300 MB
              {"eval_rss_bound_bytes", 1.3 * f32_bytes + 300e6},
              {"operations", ops}};
    if (args.has("--json")) {
        print_json(j);
    } else {
        std::printf("bench scale: %s (%s, %lld layers, %lld parameters; float32 weights %s, files %s), "
                    "%d threads\n",
                    like.c_str(), config.model_type.c_str(), (long long)config.num_layers,
                    (long long)parameters, megabytes(f32_bytes).c_str(),
                    megabytes(static_cast<double>(file_bytes)).c_str(), at::get_num_threads());
        std::printf("  %-14s %9s %12s %9s  %s\n", "operation", "seconds", "peak RSS", "CPU s", "note");
        for (const auto& op : ops) {
            const std::string name = op["operation"];
            if (op.contains("skipped")) {
                std::printf("  %-14s %9s %12s %9s  not applicable: %s\n", name.c_str(), "-", "-", "-",
                            op["skipped"].get<std::string>().c_str());
                continue;
            }
            std::string what;
            if (op.contains("error"))
                what = "failed: " + op["error"].get<std::string>();
            else if (op.contains("tokens_per_second"))
                what =
                    std::to_string(std::lround(op["tokens_per_second"].get<double>())) + " tokens/s (" +
                    op["tokens"].dump() + " tokens, ctx " + op["ctx"].dump() +
                    "); bound 1.3 x float32 + 300 MB = " + megabytes(j["eval_rss_bound_bytes"].get<double>());
            std::printf("  %-14s %9.2f %12s %9.2f  %s\n", name.c_str(), op["seconds"].get<double>(),
                        megabytes(op["peak_rss_bytes"].get<double>()).c_str(),
                        op["cpu_seconds"].get<double>(), what.c_str());
        }
    }
    return failures ? 1 : 0;
}

} // namespace embedlab::cli
