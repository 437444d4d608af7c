// Workbench compressions on a remote host (remote.hpp): the same "compress" job
// the CLI's `remote run` sends, with its evaluation computed there.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "analyses_internal.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/model.hpp"
#include "embedlab/remote.hpp"

namespace embedlab::app::detail {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The job's events on one progress bar (their "overall" share). The cancel flag
// is polled between events too, so it re-reports the last value, at most five
// times a second.
class ProgressBridge {
public:
    explicit ProgressBridge(const ProgressFn& progress) : progress_(progress) {}

    void on_event(const Json& e)
    {
        if (e.value("event", "") != "progress" || !e.contains("overall") || !e["overall"].is_number())
            return;
        report(static_cast<int64_t>(1000 * std::clamp(e["overall"].get<double>(), 0.0, 1.0)));
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

// The worker the target names, else the default one.
RemoteWorker worker_for(const RunTarget& target)
{
    RemoteWorker worker;
    if (!target.remote_cli.empty())
        worker.cli = target.remote_cli;
    if (!target.remote_dir.empty())
        worker.dir = target.remote_dir;
    return worker;
}

} // namespace

RunSummary remote_compress_and_evaluate(const CompressionRequest& request, const RunTarget& target,
                                        const ProgressFn& progress)
{
    return remote_compress_and_evaluate(request, target, progress, worker_for(target));
}

namespace {

// `job` run by the worker on target.host, its row named by the local model and text;
// errors name the host.
RunSummary run_on_host(const std::function<Json()>& make_job, const RunTarget& target,
                       const ProgressFn& progress, const RemoteWorker& worker, const std::string& model,
                       const std::string& text)
{
    const auto start = std::chrono::steady_clock::now();
    const std::string& host = target.host;
    try {
        const HostSpec spec = parse_host(host);
        if (!target.ssh_config.empty() && !fs::is_regular_file(target.ssh_config))
            throw InputError(target.ssh_config + ": no such ssh config file");
        const Json job = make_job();
        RemoteOptions options;
        options.ssh_config = target.ssh_config;
        options.remote_cli = worker.cli;
        options.remote_dir = worker.dir;
        options.fetch = false;
        options.cleanup = true; // the compressed model stays nowhere
        ProgressBridge bridge(progress);
        report_progress(progress, 0, 1000);
        SshSession session(spec, options);
        const Json result = run_remote_job(
            session, job, [&](const Json& ev) { bridge.on_event(ev); }, [&] { return bridge.cancelled(); });
        report_progress(progress, 1000, 1000);

        // The job evaluates the original on the host, on these ids, with this request's ctx
        // and stride: its own baseline, never one cached from another request or an earlier
        // state of the host's files.
        RunSummary r = summary_from_json(result.at("summary"));
        r.model = model;
        r.eval_text = text;
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

} // namespace

RunSummary remote_compress_and_evaluate(const CompressionRequest& request, const RunTarget& target,
                                        const ProgressFn& progress, const RemoteWorker& worker)
{
    const auto job = [&] {
        // Locally only what the job needs: d for the request, and the evaluated ids,
        // sent as ids (the job schema carries them: nothing is decoded and re-encoded).
        auto e = request;
        {
            auto lm = load_model(request.model);
            check_request(request, lm.model->config().hidden_size);
            auto ids = lm.tokenizer->encode(read_text_file(request.eval_text));
            if (request.eval_tokens > 0 && static_cast<int64_t>(ids.size()) > request.eval_tokens)
                ids.resize(static_cast<size_t>(request.eval_tokens));
            e.eval_text.clear();
            e.eval_tokens = 0;
            e.eval_ids = std::move(ids);
            e.has_eval_ids = true;
        }
        Json j = request_json(e);
        j["kind"] = "compress"; // no "out": the row needs only the numbers
        return j;
    };
    return run_on_host(job, target, progress, worker, request.model, request.eval_text);
}

RunSummary remote_chain_and_evaluate(const Json& pipeline, const RunTarget& target,
                                     const ProgressFn& progress, const RemoteWorker& worker)
{
    // The chain's text goes as a file (the runner uploads it and the files its steps name):
    // a trimmed chain's models tokenize it each their own way, so it cannot go as ids.
    const auto job = [&] {
        Json j = pipeline;
        j["kind"] = "compress"; // no "out": the row needs only the numbers
        return j;
    };
    return run_on_host(job, target, progress, worker, pipeline.value("model", ""),
                       pipeline.value("eval_text", ""));
}

RunSummary remote_chain_and_evaluate(const Json& pipeline, const RunTarget& target,
                                     const ProgressFn& progress)
{
    return remote_chain_and_evaluate(pipeline, target, progress, worker_for(target));
}

} // namespace embedlab::app::detail
