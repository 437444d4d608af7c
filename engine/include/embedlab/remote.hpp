// Running jobs (job.hpp) on another Linux host, e.g. a Raspberry Pi, over the
// system OpenSSH client: the user's ~/.ssh/config, keys, agent, jump hosts and
// known_hosts apply; BatchMode (never a prompt), host keys always checked.
//
//   embedlab::RemoteOptions o{.ssh_config = "~/.ssh/config"};
//   auto doctor = embedlab::remote_doctor(embedlab::parse_host("pi@raspberrypi"), o);
//   embedlab::SshSession pi(embedlab::parse_host("pi"), o);       // one connection master
//   auto result = embedlab::run_remote_job(pi, job, on_event, cancelled);
//   auto all = embedlab::run_job_pool(jobs, {parse_host("pi1"), parse_host("pi2")}, o, on_event);
//
// A job's inputs (model file or directory, texts) are copied once to
// <remote_dir>/blobs/<digest> (sha256 over the files' relative paths and
// sha256s), the job runs as `embedlab-cli worker --job job.json` in
// <remote_dir>/jobs/<id>, its JSON-line events are streamed to the callback, and
// its output directory is fetched back to the job's local "out" (written
// atomically: a failure leaves the local workspace as it was). Commands reach
// ssh as a fixed argv; the one remote command line is built from single-quoted
// words, so no user string is ever interpreted by a shell.
// Thread safety: one SshSession per thread; run_job_pool runs one thread per host
// and calls `events` under a mutex.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/job.hpp"
#include "embedlab/subprocess.hpp"

namespace embedlab {

// A host: a name from the ssh config, or [user@]host[:port] ([v6addr]:port).
struct HostSpec {
    std::string text;        // as given (results and messages name the host by it)
    std::string destination; // what ssh gets as its destination
    int port = 0;            // 0: ssh's default or the config's
};
// InputError for an empty host or one starting with '-'.
HostSpec parse_host(const std::string& text);
// "a,b,c" -> hosts.
std::vector<HostSpec> parse_host_list(const std::string& text);

// One POSIX shell word: 'it'\''s' for it's.
std::string shell_quote(std::string_view word);

struct RemoteOptions {
    std::filesystem::path ssh_config;             // passed to ssh as -F
    std::string remote_cli = "embedlab-cli";      // the worker executable on the host
    std::string remote_dir = "~/.cache/embedlab"; // blobs/ and jobs/ live here ("~/" = remote $HOME)
    std::string ssh = "ssh";
    int connect_timeout_seconds = 10;
    bool fetch = true;    // copy a job's output directory back to its local "out"
    bool cleanup = false; // remove the remote job directory afterwards
};

// The connection or the remote side failed (not the job's input).
class RemoteError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Removes this user's embedlab-ssh-* connection directories in temp_dir whose
// owning process is gone (a client killed before it could clean up), first asking
// their connection master to exit. SshSession calls it; returns how many it removed.
int remove_stale_ssh_directories(const std::filesystem::path& temp_dir, const std::string& ssh);

class SshSession {
public:
    // Starts a connection master in a private temp dir; RemoteError naming the
    // host and ssh's message when it cannot connect.
    SshSession(HostSpec host, RemoteOptions options);
    ~SshSession(); // stops the master, removes the temp dir
    SshSession(const SshSession&) = delete;
    SshSession& operator=(const SshSession&) = delete;

    const HostSpec& host() const { return host_; }
    const RemoteOptions& options() const { return options_; }
    // ssh's argv for one remote command line (already quoted by the caller).
    std::vector<std::string> argv(const std::string& remote_command) const;
    CommandResult run(const std::string& remote_command, std::string_view input,
                      std::chrono::milliseconds timeout) const;
    // A shell word for remote_dir/part1/part2..., each part quoted.
    std::string remote_path(const std::vector<std::string>& parts) const;

private:
    std::vector<std::string> base_argv() const;
    HostSpec host_;
    RemoteOptions options_;
    std::filesystem::path control_dir_;
};

// Reachability, remote embedlab-cli version (and whether it matches ours), CPU,
// cores, memory, device model, power sampling. Never throws for an unreachable
// host: {"reachable": false, "error": ...}.
nlohmann::ordered_json remote_doctor(const HostSpec& host, const RemoteOptions& options);

// Runs one job on the session's host. The result is the worker's, with "host"
// (the host's identity) and "remote" {host, job_dir}; "out" is the local path the
// output was fetched to. Throws InputError (the job's input), RemoteError
// (connection lost, worker died: the message says which) or Cancelled.
nlohmann::ordered_json run_remote_job(SshSession& session, const nlohmann::ordered_json& job,
                                      const JobEventFn& events = {}, const CancelFn& cancelled = {});

struct JobOutcome {
    bool ok = false;
    std::string host; // the host's text
    nlohmann::ordered_json result;
    std::string error; // when !ok
};
using PoolEventFn =
    std::function<void(size_t job, const std::string& host, const nlohmann::ordered_json& event)>;
// Jobs spread over hosts, one job per host at a time; outcomes in job order.
std::vector<JobOutcome> run_job_pool(const std::vector<nlohmann::ordered_json>& jobs,
                                     const std::vector<HostSpec>& hosts, const RemoteOptions& options,
                                     const PoolEventFn& events = {}, const CancelFn& cancelled = {});

} // namespace embedlab
