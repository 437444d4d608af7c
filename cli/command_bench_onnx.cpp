// bench onnx: each model exported as ONNX (float32, export_onnx) into a temporary directory
// and run in ONNX Runtime (npm's onnxruntime-node, by node with resources/onnx/ort_run.mjs,
// the script the tests run too), on the first --ctx tokens of a text, beside EmbedLab's own
// forward pass on the same window: the file's bytes (graph + data), ONNX Runtime's peak RSS
// (the node process's, node and the library included), its session load time and tokens/s,
// EmbedLab's tokens/s, and both perplexities (row t of the logits predicts token t + 1).
// --arch arm64 runs ONNX Runtime's arm64 build with Debian's arm64 node under qemu's user
// mode emulation (tests/onnx_runtime.hpp says how to prepare it): emulated figures.
// A figure, not a test: nothing here asserts a time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/onnx_export.hpp"
#include "embedlab/subprocess.hpp"
#include "progress_printer.hpp"
#include "work_dir.hpp"

namespace embedlab::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kOnnxRuntimeVersion = "1.30.0"; // scripts/setup.sh's

std::string env_or(const char* name, const std::string& otherwise)
{
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : otherwise;
}

std::string host_arch()
{
#if defined(__aarch64__)
    return "arm64";
#else
    return "x64";
#endif
}

// <build>/cli/embedlab-cli -> <build>/test-tools, where scripts/setup.sh --with-tests installs.
fs::path test_tools_dir()
{
    std::error_code ec;
    const auto exe = fs::read_symlink("/proc/self/exe", ec);
    return (ec ? fs::path("build/cli") : exe.parent_path()).parent_path() / "test-tools";
}

// How ONNX Runtime is run: the command before the script's arguments.
struct OrtRunner {
    fs::path dir; // holds node_modules/onnxruntime-node
    fs::path script;
    std::vector<std::string> command;
};

// Everything checked before any model is loaded; InputError naming where it looked.
OrtRunner find_onnxruntime(const std::optional<std::string>& flag, const std::string& arch)
{
    OrtRunner r;
    std::string where;
    if (flag) {
        r.dir = *flag;
        where = r.dir.string() + " (--onnxruntime)";
    } else if (const char* env = std::getenv("EMBEDLAB_ONNXRUNTIME_DIR"); env && *env) {
        r.dir = env;
        where = r.dir.string() + " ($EMBEDLAB_ONNXRUNTIME_DIR)";
    } else {
        r.dir = test_tools_dir() / "onnxruntime";
        where = r.dir.string() +
                " (the build tree's: neither --onnxruntime DIR nor $EMBEDLAB_ONNXRUNTIME_DIR given)";
    }
    const std::string install =
        "scripts/setup.sh --with-tests installs it in the build tree, or `npm install "
        "--ignore-scripts onnxruntime-node@" +
        std::string(kOnnxRuntimeVersion) + " --prefix DIR` in DIR";
    const auto package = r.dir / "node_modules" / "onnxruntime-node";
    std::error_code ec;
    if (!fs::exists(package / "package.json", ec))
        throw InputError("bench onnx: ONNX Runtime (npm's onnxruntime-node) is not installed in " + where +
                         ": no node_modules/onnxruntime-node there; " + install);
    const auto binding = package / "bin" / "napi-v6" / "linux" / arch / "onnxruntime_binding.node";
    if (!fs::exists(binding, ec))
        throw InputError("bench onnx: ONNX Runtime's " + arch + " library is not in " +
                         binding.parent_path().string() + " (a partial install? " + install + ")");
    r.script = resource_dir() / "onnx" / "ort_run.mjs";
    if (!fs::exists(r.script, ec))
        throw InputError("bench onnx: " + r.script.string() +
                         ": the script that runs ONNX Runtime is missing (set EMBEDLAB_RESOURCES to the "
                         "checkout's resources/)");
    r.command = {"env", "EMBEDLAB_ONNXRUNTIME_DIR=" + fs::absolute(r.dir).string()};
    if (arch == host_arch()) {
        const char* env = std::getenv("EMBEDLAB_NODE");
        const std::string node = env && *env ? env : "node";
        const auto found = find_executable(node);
        if (!found)
            throw InputError(
                "bench onnx: " +
                (env && *env ? "node " + node + " ($EMBEDLAB_NODE) cannot be run"
                             : std::string("node is not on PATH (or set $EMBEDLAB_NODE)")) +
                ": Debian's nodejs runs ONNX Runtime; scripts/setup.sh --with-tests installs it");
        r.command.push_back(found->string());
        return r;
    }
    if (arch != "arm64")
        throw InputError("bench onnx: --arch " + arch + ": ONNX Runtime runs on the host's architecture (" +
                         host_arch() + ") or arm64 under qemu");
    const std::string qemu = env_or("EMBEDLAB_QEMU_AARCH64", "qemu-aarch64-static");
    const auto found = find_executable(qemu);
    if (!found)
        throw InputError("bench onnx --arch arm64: " + qemu +
                         " is not on PATH (Debian's qemu-user-static; or set $EMBEDLAB_QEMU_AARCH64)");
    const fs::path root = env_or("EMBEDLAB_ARM64_ROOT", (test_tools_dir() / "arm64-node").string());
    if (!fs::exists(root / "usr" / "bin" / "node", ec))
        throw InputError(
            "bench onnx --arch arm64: no arm64 node in " + root.string() +
            " ($EMBEDLAB_ARM64_ROOT, else <build>/test-tools/arm64-node): extract the arm64 "
            ".debs of Debian's nodejs and what it needs there (tests/onnx_runtime.hpp says how)");
    // qemu -L: the guest's absolute paths (its loader, libraries, /usr/share/nodejs) are
    // looked up in the root first.
    r.command.insert(r.command.end(),
                     {found->string(), "-L", root.string(), (root / "usr" / "bin" / "node").string()});
    return r;
}

void write_tensor(const fs::path& file, const torch::Tensor& t)
{
    const auto c = t.contiguous();
    std::ofstream out(file, std::ios::binary);
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    if (!out.flush())
        throw InputError(file.string() + ": cannot write");
}

struct OrtResult {
    torch::Tensor logits; // [T, V]
    double load_seconds = 0, run_seconds = 0;
    int64_t peak_rss_bytes = 0;
};

// ort_run.mjs on `onnx` with the window `ids` [1, T], `repeat` timed runs.
OrtResult run_onnxruntime(const OrtRunner& ort, const fs::path& onnx, const torch::Tensor& ids,
                          const fs::path& work, int repeat, int threads)
{
    const int64_t T = ids.size(1);
    write_tensor(work / "input_ids.bin", ids);
    write_tensor(work / "attention_mask.bin", torch::ones({1, T}, torch::kLong));
    write_tensor(work / "position_ids.bin", torch::arange(T, torch::kLong).unsqueeze(0));
    nlohmann::json request{{"inputs", nlohmann::json::array()},
                           {"outputs", nlohmann::json::array({{{"name", "logits"}, {"file", "logits.bin"}}})},
                           {"repeat", repeat},
                           {"threads", threads}};
    for (const char* name : {"input_ids", "attention_mask", "position_ids"})
        request["inputs"].push_back(
            {{"name", name}, {"type", "int64"}, {"shape", {1, T}}, {"file", std::string(name) + ".bin"}});
    {
        std::ofstream out(work / "request.json");
        out << request.dump();
        if (!out.flush())
            throw InputError((work / "request.json").string() + ": cannot write");
    }
    auto argv = ort.command;
    argv.insert(argv.end(), {ort.script.string(), onnx.string(), (work / "request.json").string()});
    Subprocess p(argv, {.stdin_fd = -2});
    // Ctrl-C reaches this process only (the child has its own process group).
    if (!p.pump({}, std::chrono::hours(24), [] { return !interrupted(); })) {
        p.terminate();
        if (interrupted())
            throw Cancelled();
        throw InputError("bench onnx: ONNX Runtime on " + onnx.filename().string() + " took over 24 hours");
    }
    const int status = p.wait(std::chrono::minutes(1));
    const auto& err = p.stderr_text();
    if (status != 0)
        throw InputError("bench onnx: ONNX Runtime failed (exit " + std::to_string(status) +
                         "): " + err.substr(err.size() > 2000 ? err.size() - 2000 : 0));
    // The reply is the last line on stdout.
    std::string out = p.stdout_text();
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
        out.pop_back();
    const auto newline = out.rfind('\n');
    OrtResult r;
    std::vector<int64_t> shape;
    try {
        const auto reply = nlohmann::json::parse(out.substr(newline == std::string::npos ? 0 : newline + 1));
        r.load_seconds = reply.at("load_seconds").get<double>();
        r.run_seconds = reply.at("run_seconds").get<double>();
        r.peak_rss_bytes = reply.at("peak_rss_bytes").get<int64_t>();
        shape = reply.at("outputs").at(0).at("shape").get<std::vector<int64_t>>();
    } catch (const nlohmann::json::exception& e) {
        throw InputError("bench onnx: unexpected output from ort_run.mjs '" + out + "' (" + e.what() + ")");
    }
    if (shape.size() != 3 || shape[0] != 1 || shape[1] != T)
        throw InputError("bench onnx: ONNX Runtime's logits have an unexpected shape");
    r.logits = torch::empty({shape[1], shape[2]}, torch::kFloat);
    std::ifstream in(work / "logits.bin", std::ios::binary);
    in.read(static_cast<char*>(r.logits.data_ptr()), static_cast<std::streamsize>(r.logits.nbytes()));
    if (in.gcount() != static_cast<std::streamsize>(r.logits.nbytes()))
        throw InputError("bench onnx: ONNX Runtime's logits file is short");
    return r;
}

// Perplexity of ids[1..] under logits [T, V] (row t predicts id t + 1), in float64.
double window_perplexity(const torch::Tensor& logits, const torch::Tensor& ids)
{
    const int64_t T = ids.size(1);
    const auto lp = torch::log_softmax(logits.narrow(0, 0, T - 1).to(torch::kFloat64), -1);
    return std::exp(-lp.gather(1, ids[0].narrow(0, 1, T - 1).unsqueeze(1)).mean().item<double>());
}

std::string mib(int64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1 << 20));
    return buf;
}

} // namespace

int bench_onnx(const std::vector<std::string>& argv)
{
    Args args("bench onnx", argv, {"--text", "--ctx", "--repeat", "--onnxruntime", "--arch", "--tokenizer"},
              {"--json", "--quiet", "--no-verify"});
    std::vector<fs::path> models;
    for (const auto& m : args.positional())
        models.emplace_back(m);
    if (models.empty())
        models.push_back(default_model_path());
    const fs::path text = args.get("--text").value_or(default_sample_text_path().string());
    const int64_t ctx = args.get_int("--ctx", 128, 2, 1 << 20);
    const int repeat = static_cast<int>(args.get_int("--repeat", 5, 1, 1000));
    const std::string arch = args.get("--arch").value_or(host_arch());
    if (arch != "x64" && arch != "arm64")
        throw InputError("bench onnx: --arch must be x64 or arm64, got '" + arch + "'");
    const bool quiet = args.has("--quiet");
    const auto ort = find_onnxruntime(args.get("--onnxruntime"), arch);
    const std::string content = read_text_file(text);
    const int threads = at::get_num_threads();

    Json rows = Json::array();
    for (const auto& path : models) {
        auto lm = load_model(path, load_options(args));
        print_warnings(lm.files.warnings);
        const auto all = lm.tokenizer->encode(content);
        const int64_t T = std::min<int64_t>(ctx, static_cast<int64_t>(all.size()));
        if (T < 2)
            throw InputError("bench onnx: " + text.string() + " has fewer than 2 tokens");
        if (T > lm.model->max_context())
            throw InputError("bench onnx: --ctx " + std::to_string(T) + " exceeds " + path.string() +
                             "'s context of " + std::to_string(lm.model->max_context()));
        const auto ids =
            torch::tensor(std::vector<int64_t>(all.begin(), all.begin() + T), torch::kLong).unsqueeze(0);
        Json row = {
            {"model", path.string()}, {"embedding", lm.model->token_embedding().kind()}, {"tokens", T}};
        if (const auto refusal = onnx_export_refusal(*lm.model); !refusal.empty()) {
            row["skipped"] = refusal;
            rows.push_back(row);
            continue;
        }

        // EmbedLab's forward pass on the window: one warm-up, then `repeat` timed.
        torch::Tensor ours;
        double ours_seconds = 0;
        {
            c10::InferenceMode guard;
            ours = lm.model->logits(ids)[0];
            for (int r = 0; r < repeat; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                ours = lm.model->logits(ids)[0];
                ours_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            }
            ours_seconds /= repeat;
        }

        WorkDir work("embedlab-bench-onnx");
        const fs::path onnx = work.path() / "model.onnx";
        ModelExportReport report;
        {
            ProgressPrinter p("bench " + path.filename().string() + ": export", "tensors", quiet);
            report = export_onnx(lm, onnx, {}, p.callback());
        }
        if (!quiet)
            std::fprintf(stderr, "bench %s: ONNX Runtime (%s, %d runs of %lld tokens)\n",
                         path.filename().string().c_str(), arch.c_str(), repeat, (long long)T);
        const auto theirs = run_onnxruntime(ort, onnx, ids, work.path(), repeat, threads);
        if (theirs.logits.sizes() != ours.sizes())
            throw InputError("bench onnx: ONNX Runtime's logits are [" +
                             std::to_string(theirs.logits.size(0)) + ", " +
                             std::to_string(theirs.logits.size(1)) + "], EmbedLab's [" +
                             std::to_string(ours.size(0)) + ", " + std::to_string(ours.size(1)) + "]");
        const double ppl_ours = window_perplexity(ours, ids),
                     ppl_theirs = window_perplexity(theirs.logits, ids);
        row.update({{"file_bytes", report.bytes},
                    {"external_data", fs::exists(work.path() / "model.onnx.data")},
                    {"peak_rss_bytes", theirs.peak_rss_bytes},
                    {"load_seconds", theirs.load_seconds},
                    {"run_seconds", theirs.run_seconds},
                    {"tokens_per_second", static_cast<double>(T) / theirs.run_seconds},
                    {"embedlab_run_seconds", ours_seconds},
                    {"embedlab_tokens_per_second", static_cast<double>(T) / ours_seconds},
                    {"ppl_onnxruntime", ppl_theirs},
                    {"ppl_embedlab", ppl_ours},
                    {"ppl_rel_diff", ppl_theirs / ppl_ours - 1},
                    {"max_abs_logit_diff", (theirs.logits - ours).abs().max().item<double>()}});
        rows.push_back(row);
    }

    Json j = {{"bench", "onnx"},
              {"arch", arch},
              {"emulated", arch != host_arch()},
              {"onnxruntime_dir", fs::absolute(ort.dir).string()},
              {"text", text.string()},
              {"ctx", ctx},
              {"repeat", repeat},
              {"threads", threads},
              {"rows", rows}};
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("bench onnx: ONNX Runtime (%s%s) against EmbedLab, %s, ctx %lld, %d runs, %d threads\n",
                arch.c_str(), arch != host_arch() ? ", emulated by qemu" : "", text.c_str(), (long long)ctx,
                repeat, threads);
    if (arch != host_arch())
        std::printf("(EmbedLab runs natively on the %s host; only ONNX Runtime is emulated)\n",
                    host_arch().c_str());
    std::printf("%-36s %-12s %10s %11s %8s %10s %12s %11s %11s %12s\n", "model", "embedding", "ONNX MiB",
                "ORT RSS MiB", "load s", "ORT tok/s", "EmbedLab t/s", "ppl ORT", "ppl EmbedLab",
                "ppl rel diff");
    for (const auto& r : rows) {
        if (r.contains("skipped")) {
            std::printf("%-36s %-12s skipped: %s\n", r["model"].get<std::string>().c_str(),
                        r["embedding"].get<std::string>().c_str(), r["skipped"].get<std::string>().c_str());
            continue;
        }
        std::printf("%-36s %-12s %10s %11s %8.2f %10.1f %12.1f %11.4f %11.4f %12.2e\n",
                    r["model"].get<std::string>().c_str(), r["embedding"].get<std::string>().c_str(),
                    mib(r["file_bytes"].get<int64_t>()).c_str(),
                    mib(r["peak_rss_bytes"].get<int64_t>()).c_str(), r["load_seconds"].get<double>(),
                    r["tokens_per_second"].get<double>(), r["embedlab_tokens_per_second"].get<double>(),
                    r["ppl_onnxruntime"].get<double>(), r["ppl_embedlab"].get<double>(),
                    r["ppl_rel_diff"].get<double>());
    }
    return 0;
}

} // namespace embedlab::cli
