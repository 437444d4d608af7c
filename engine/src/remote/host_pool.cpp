// remote_doctor and run_job_pool.
#include <memory>
#include <mutex>
#include <thread>

#include "embedlab/remote.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

Json remote_doctor(const HostSpec& host, const RemoteOptions& options)
{
    Json j = {{"host", host.text}, {"destination", host.destination}};
    if (host.port)
        j["port"] = host.port;
    std::unique_ptr<SshSession> s;
    try {
        s = std::make_unique<SshSession>(host, options);
    } catch (const std::exception& e) {
        j["reachable"] = false;
        j["error"] = e.what();
        return j;
    }
    j["reachable"] = true;
    const auto r = s->run("exec " + shell_quote(options.remote_cli) + " worker --identify", "",
                          std::chrono::seconds(60));
    const auto id = Json::parse(r.out, nullptr, false);
    if (r.status != 0 || !id.is_object()) {
        j["embedlab_cli"] = false;
        j["error"] = r.status == 127
                         ? "'" + options.remote_cli +
                               "' not found on the host (install it, or give its path with --remote-cli)"
                         : host.text + ": '" + options.remote_cli + " worker --identify' failed (exit " +
                               std::to_string(r.status) + "): " + r.err;
        return j;
    }
    j["embedlab_cli"] = true;
    j["remote_cli"] = options.remote_cli;
    j["local_version"] = EMBEDLAB_VERSION;
    j["version_matches"] = id.value("embedlab_version", "") == EMBEDLAB_VERSION;
    j["identity"] = id;
    return j;
}

std::vector<JobOutcome> run_job_pool(const std::vector<Json>& jobs, const std::vector<HostSpec>& hosts,
                                     const RemoteOptions& options, const PoolEventFn& events,
                                     const CancelFn& cancelled)
{
    std::vector<JobOutcome> outcomes(jobs.size());
    std::vector<bool> started(jobs.size(), false);
    std::mutex mu;
    size_t next = 0;
    std::string connect_errors;
    auto is_cancelled = [&] { return cancelled && cancelled(); };
    std::vector<std::thread> threads;
    for (const auto& host : hosts)
        threads.emplace_back([&, host] {
            std::unique_ptr<SshSession> s;
            try {
                s = std::make_unique<SshSession>(host, options);
            } catch (const std::exception& e) {
                std::lock_guard lock(mu);
                connect_errors += (connect_errors.empty() ? "" : "; ") + std::string(e.what());
                return; // this host takes no jobs; the others share them
            }
            for (;;) {
                size_t i;
                {
                    std::lock_guard lock(mu);
                    if (next >= jobs.size() || is_cancelled())
                        return;
                    i = next++;
                    started[i] = true;
                }
                JobOutcome o{.ok = false, .host = host.text, .result = {}, .error = {}};
                try {
                    o.result = run_remote_job(
                        *s, jobs[i],
                        [&](const Json& e) {
                            std::lock_guard lock(mu);
                            if (events)
                                events(i, host.text, e);
                        },
                        cancelled);
                    o.ok = true;
                } catch (const std::exception& e) {
                    o.error = e.what();
                }
                std::lock_guard lock(mu);
                outcomes[i] = std::move(o);
            }
        });
    for (auto& t : threads)
        t.join();
    for (size_t i = 0; i < jobs.size(); ++i)
        if (!started[i])
            outcomes[i].error = is_cancelled() ? "cancelled before it started"
                                               : "not run: no host could be reached (" + connect_errors + ")";
    return outcomes;
}

} // namespace embedlab
