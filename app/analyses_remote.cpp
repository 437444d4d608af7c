// Workbench compressions on a remote host (remote.hpp): the same "compress" job
// the CLI's `remote run` sends, with its evaluation computed there.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "analyses_internal.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "embedlab/remote.hpp"

namespace embedlab::app::detail {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// A private temp directory, removed with everything in it.
class ScratchDir {
public:
    ScratchDir()
    {
        std::string pattern = (fs::temp_directory_path() / "embedlab-remote-XXXXXX").string();
        if (!::mkdtemp(pattern.data()))
            throw InputError(pattern + ": cannot create a temp directory for the remote job");
        path_ = pattern;
    }
    ~ScratchDir()
    {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

// The text the host evaluates: a job takes a whole file, so the first
// `eval_tokens` ids become a file of their own when it tokenizes back to exactly
// those ids; otherwise the whole text, and the row says so.
struct EvalText {
    std::string path;
    size_t ids = 0;   // how many ids the host evaluates
    std::string note; // for the parameters column; empty when the ids are the local ones
};
EvalText eval_text_for(const Tokenizer& tokenizer, const std::string& text, int64_t eval_tokens,
                       const ScratchDir& scratch)
{
    auto ids = tokenizer.encode(read_text_file(text));
    if (eval_tokens <= 0 || static_cast<int64_t>(ids.size()) <= eval_tokens)
        return {text, ids.size(), ""};
    const size_t all = ids.size();
    ids.resize(static_cast<size_t>(eval_tokens));
    const std::string prefix = tokenizer.decode(ids);
    if (tokenizer.encode(prefix) != ids) {
        return {text, all,
                "whole text evaluated: its first " + std::to_string(eval_tokens) +
                    " ids do not tokenize back from their own text"};
    }
    const fs::path file = scratch.path() / ("first-" + std::to_string(eval_tokens) + "-ids.txt");
    std::ofstream out(file, std::ios::binary);
    out << prefix;
    out.close();
    if (!out)
        throw InputError(file.string() + ": cannot write the truncated evaluation text");
    return {file.string(), ids.size(), ""};
}

std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

std::string joined(const Json& list, const char* sep)
{
    std::string s;
    for (const auto& v : list) {
        s += s.empty() ? "" : sep;
        s += std::to_string(v.get<int64_t>());
    }
    return s;
}

// The job's events on one progress bar (fit 30%, original 30%, compressed 35%,
// write 5%). The cancel flag is polled between events too, so it re-reports the
// last value, at most five times a second.
class ProgressBridge {
public:
    explicit ProgressBridge(const ProgressFn& progress) : progress_(progress) {}

    void on_event(const Json& e)
    {
        if (e.value("event", "") != "progress")
            return;
        const std::string stage = e.value("stage", "");
        const int64_t total = e.value("total", int64_t{0}), done = e.value("done", int64_t{0});
        int64_t offset = 0, weight = 0;
        if (stage.rfind("compress", 0) == 0)
            offset = 0, weight = 300;
        else if (stage == "eval original")
            offset = 300, weight = 300;
        else if (stage == "eval compressed")
            offset = 600, weight = 350;
        else if (stage == "write")
            offset = 950, weight = 50;
        else
            return;
        report(offset + (total > 0 ? weight * std::min(done, total) / total : 0));
    }

    bool cancelled()
    {
        if (!cancelled_ && progress_ &&
            std::chrono::steady_clock::now() - last_ > std::chrono::milliseconds(200))
            report(done_);
        return cancelled_;
    }

private:
    void report(int64_t done)
    {
        done_ = std::max(done_, done);
        last_ = std::chrono::steady_clock::now();
        if (progress_ && !progress_(done_, 1000))
            cancelled_ = true;
    }

    ProgressFn progress_;
    int64_t done_ = 0;
    bool cancelled_ = false;
    std::chrono::steady_clock::time_point last_{};
};

// Errors name the host first (the engine's usually do already).
std::string on_host(const std::string& host, const std::string& message)
{
    return message.rfind(host, 0) == 0 ? message : host + ": " + message;
}

} // namespace

CompressionRun remote_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                            const std::string& text, const ProgressFn& progress)
{
    RemoteWorker worker;
    if (!request.remote_cli.empty())
        worker.cli = request.remote_cli;
    if (!request.remote_dir.empty())
        worker.dir = request.remote_dir;
    return remote_compress_and_evaluate(model, request, text, progress, worker);
}

CompressionRun remote_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                            const std::string& text, const ProgressFn& progress,
                                            const RemoteWorker& worker)
{
    const auto start = std::chrono::steady_clock::now();
    const std::string& host = request.host;
    try {
        const HostSpec spec = parse_host(host);
        if (request.method != "pca" && request.method != "svd" && request.method != "tt")
            throw InputError("the host's worker runs pca, svd or tt, not '" + request.method +
                             "' (run it on this computer)");
        if (request.lora_rank > 0)
            throw InputError("LoRA recovery runs on this computer only (the worker has no fine-tuning job)");
        if (!request.ssh_config.empty() && !fs::is_regular_file(request.ssh_config))
            throw InputError(request.ssh_config + ": no such ssh config file");
        // Locally only what the job needs: d for the request, the context, the tokenizer.
        auto lm = load_model(model);
        const auto& config = lm.model->config();
        check_request(request, config.hidden_size);
        const ScratchDir scratch;
        const EvalText eval = eval_text_for(*lm.tokenizer, text, request.eval_tokens, scratch);
        const int64_t ctx = std::min<int64_t>(128, lm.model->max_context());
        Json job = {{"kind", "compress"}, {"model", model}, {"method", request.method}};
        if (request.method == "tt") {
            job["shape"] = balanced_shape(config.hidden_size, model);
            job["eps"] = request.eps;
        } else {
            job["rank"] = request.rank;
        }
        job["eval_text"] = eval.path;
        job["ctx"] = ctx;
        job["out"] = (scratch.path() / "out").string(); // never fetched: the row needs only the numbers
        lm = LoadedModel{};

        RemoteOptions options;
        options.ssh_config = request.ssh_config;
        options.remote_cli = worker.cli;
        options.remote_dir = worker.dir;
        options.fetch = false;
        options.cleanup = true; // the compressed model stays nowhere
        ProgressBridge bridge(progress);
        report_progress(progress, 0, 1000);
        SshSession session(spec, options);
        const Json result = run_remote_job(
            session, job, [&](const Json& e) { bridge.on_event(e); }, [&] { return bridge.cancelled(); });
        report_progress(progress, 1000, 1000);

        const Json& manifest = result.at("manifest");
        const Json& accounting = manifest.at("accounting");
        const Json& evaluation = manifest.at("evaluation");
        CompressionRun r;
        r.method = request.method;
        r.parameters = request.method == "tt"
                           ? "shape " + joined(accounting.at("shape"), "x") + ", eps " + number(request.eps) +
                                 ", ranks " + joined(accounting.at("ranks"), ",")
                           : "rank " + std::to_string(accounting.at("rank").get<int64_t>());
        if (!eval.note.empty())
            r.parameters += " (" + eval.note + ")";
        r.params_before = accounting.at("params_before");
        r.params_after = accounting.at("params_after");
        r.ratio = accounting.at("ratio");
        // The job evaluates the original on the host anyway; the cache keeps every
        // row of this host, model and text on one baseline.
        const std::string key = host + "\n" + model + "\n" + text + "\n" + std::to_string(eval.ids);
        const double job_baseline = evaluation.at("baseline").at("ppl");
        r.ppl_original = original_perplexity(key, [&] { return job_baseline; });
        r.ppl = evaluation.at("compressed").at("ppl");
        r.delta_ln_ppl = std::log(r.ppl) - std::log(r.ppl_original); // TensorSLM eq. 12
        r.mean_cosine = manifest.at("reconstruction").at("mean_cosine");
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        r.host = host;
        return r;
    } catch (const Cancelled&) {
        throw;
    } catch (const InputError& e) {
        throw InputError(on_host(host, e.what()));
    } catch (const RemoteError& e) {
        throw RemoteError(on_host(host, e.what()));
    } catch (const nlohmann::json::exception& e) {
        throw RemoteError(host + ": the worker's result lacks a field the row needs (" + e.what() + ")");
    }
}

} // namespace embedlab::app::detail
