// run_remote_job: upload inputs by digest, run the worker, stream events, fetch outputs.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>

#include <fcntl.h>

#include <openssl/evp.h>
#include <unistd.h>

#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"
#include "embedlab/remote.hpp"
#include "remote/worker_events.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

constexpr auto kShort = std::chrono::seconds(60);
constexpr auto kTransfer = std::chrono::hours(2);
constexpr auto kJob = std::chrono::hours(48);

std::string sha256_hex(std::string_view bytes)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < n; ++i)
        s += {hex[md[i] >> 4], hex[md[i] & 15]};
    return s;
}

struct Input {
    fs::path local;
    bool directory = false;
    std::string digest;   // over relative paths and file sha256s
    std::string relative; // the path the job sees, relative to its job directory
};

Input describe_input(const std::string& field, const fs::path& path)
{
    Input in{.local = path, .directory = fs::is_directory(path), .digest = {}, .relative = {}};
    if (!fs::exists(path))
        throw InputError(path.string() + ": does not exist (job field \"" + field + "\")");
    std::vector<std::pair<std::string, fs::path>> files;
    if (in.directory) {
        for (const auto& e :
             fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink))
            if (e.is_regular_file())
                files.emplace_back(fs::relative(e.path(), path).generic_string(), e.path());
        std::sort(files.begin(), files.end());
    } else {
        files.emplace_back(path.filename().string(), path);
    }
    std::string listing;
    for (const auto& [name, file] : files)
        listing += name + '\0' + sha256_file(file) + '\n';
    in.digest = sha256_hex(listing);
    in.relative = "../../blobs/" + in.digest + (in.directory ? "" : "/" + path.filename().string());
    return in;
}

// ssh's exit status and last stderr line as a message.
std::string ssh_failure(const SshSession& s, const std::string& what, const CommandResult& r)
{
    std::string err = r.err;
    while (!err.empty() && err.back() == '\n')
        err.pop_back();
    if (const size_t nl = err.rfind('\n'); nl != std::string::npos)
        err = err.substr(nl + 1);
    return s.host().text + ": " + what + " failed" +
           (r.timed_out       ? " (timed out)"
            : r.status == 255 ? " (ssh: connection failed or lost)"
                              : " (exit " + std::to_string(r.status) + ")") +
           (err.empty() ? "" : ": " + err);
}

// Streams `producer`'s stdout into `consumer`'s stdin; both must succeed.
void pipe_between(const std::vector<std::string>& producer, const std::vector<std::string>& consumer,
                  const std::string& what, const SshSession& s)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        throw RemoteError("pipe: " + std::string(std::strerror(errno)));
    std::unique_ptr<Subprocess> from, to;
    try {
        from = std::make_unique<Subprocess>(producer, SubprocessOptions{.stdin_fd = -2, .stdout_fd = fds[1]});
        to = std::make_unique<Subprocess>(consumer, SubprocessOptions{.stdin_fd = fds[0]});
    } catch (...) {
        ::close(fds[0]);
        ::close(fds[1]);
        throw;
    }
    ::close(fds[0]);
    ::close(fds[1]);
    CommandResult r;
    const bool done = to->pump({}, kTransfer);
    r.status = done ? to->wait(std::chrono::seconds(30)) : (to->terminate(), -1);
    r.timed_out = r.status == -1;
    r.err = to->stderr_text();
    from->pump({}, std::chrono::seconds(30));
    const int from_status = from->wait(std::chrono::seconds(30));
    r.err = from->stderr_text() + to->stderr_text();
    if (r.status != 0 || from_status != 0) {
        if (r.status == 0)
            r.status = from_status;
        throw RemoteError(ssh_failure(s, what, r));
    }
}

void upload(const SshSession& s, const Input& in, const JobEventFn& events)
{
    const std::string blob = s.remote_path({"blobs", in.digest});
    const auto check = s.run("test -d " + blob, "", kShort);
    if (check.status == 0) {
        if (events)
            events(Json{
                {"event", "log"},
                {"message", in.local.string() + ": already on the host (" + in.digest.substr(0, 12) + ")"}});
        return;
    }
    if (check.status != 1)
        throw RemoteError(ssh_failure(s, "checking the cache", check));
    if (events)
        events(Json{{"event", "log"}, {"message", "copying " + in.local.string() + " to the host"}});
    const auto dir = in.directory                     ? in.local
                     : in.local.parent_path().empty() ? fs::path(".")
                                                      : in.local.parent_path();
    const std::string name = in.directory ? "." : in.local.filename().string();
    const std::string script =
        "set -e; umask 077; mkdir -p " + s.remote_path({"blobs"}) + "; t=" + blob +
        ".tmp.$$; rm -rf \"$t\"; mkdir \"$t\"; tar -xf - -C \"$t\"; chmod -R u+w \"$t\"; " +
        // rename(2) refuses a non-empty target: a concurrent upload of the
        // same digest wins, ours is dropped.
        "if ! mv -T \"$t\" " + blob + " 2>/dev/null; then rm -rf \"$t\"; [ -d " + blob + " ]; fi";
    pipe_between({"tar", "-C", dir.string(), "-chf", "-", "--", name}, s.argv(script),
                 "copying " + in.local.string(), s);
}

std::string new_job_id()
{
    std::random_device rd;
    std::string id;
    static const char* hex = "0123456789abcdef";
    for (int i = 0; i < 16; ++i)
        id += hex[rd() & 15];
    return id;
}

} // namespace

Json run_remote_job(SshSession& s, const Json& job, const JobEventFn& events, const CancelFn& cancelled)
{
    check_job(job);
    auto check_cancel = [&] {
        if (cancelled && cancelled())
            throw Cancelled();
    };
    const fs::path local_out = job.value("out", "");
    const bool force = job.value("force", false);
    if (!local_out.empty() && s.options().fetch && fs::exists(local_out) && !force)
        throw InputError(local_out.string() + ": already exists (set \"force\": true to replace it)");
    Json remote_job = job;
    for (const auto& field : job_input_fields())
        if (job.contains(field)) {
            const Input in = describe_input(field, job[field].get<std::string>());
            check_cancel();
            upload(s, in, events);
            remote_job[field] = in.relative;
        }
    if (!local_out.empty()) {
        remote_job["out"] = "out";
        remote_job["force"] = false;
    }
    check_cancel();
    const std::string id = new_job_id();
    const std::string job_dir = s.remote_path({"jobs", id});
    const auto put = s.run("set -e; umask 077; mkdir -p " + job_dir + "; cat > " + job_dir + "/job.json",
                           remote_job.dump(), kShort);
    if (put.status != 0)
        throw RemoteError(ssh_failure(s, "writing the job file", put));
    auto cleanup = [&] {
        if (s.options().cleanup)
            s.run("rm -rf " + job_dir, "", kShort);
    };

    // stdin stays open: closing it is how the worker learns to stop.
    Subprocess worker(s.argv("cd " + job_dir + " && exec " + shell_quote(s.options().remote_cli) +
                             " worker --job job.json"));
    Json result, error;
    bool cancel_sent = false;
    std::chrono::steady_clock::time_point cancel_time;
    const bool finished = worker.pump(
        [&](std::string_view line) {
            auto parsed = detail::parse_worker_line(line);
            using Kind = detail::WorkerLine::Kind;
            if (parsed.kind == Kind::Result)
                result = std::move(parsed.json);
            else if (parsed.kind == Kind::Error)
                error = std::move(parsed.json);
            else if (events && (parsed.kind != Kind::Text || !line.empty()))
                events(parsed.json);
        },
        kJob,
        [&] {
            if (!cancel_sent && cancelled && cancelled()) {
                worker.close_stdin();
                cancel_sent = true;
                cancel_time = std::chrono::steady_clock::now();
            }
            // A worker deep in one long step gets 30 s to notice, then ssh is stopped.
            return !cancel_sent || std::chrono::steady_clock::now() - cancel_time < std::chrono::seconds(30);
        });
    const int status = finished ? worker.wait(std::chrono::seconds(30)) : (worker.terminate(), -1);
    if (!error.is_null()) {
        cleanup();
        detail::throw_worker_error(s.host().text, error);
    }
    if (cancel_sent)
        throw Cancelled();
    if (result.is_null() || status != 0) {
        std::string err = worker.stderr_text();
        while (!err.empty() && err.back() == '\n')
            err.pop_back();
        throw RemoteError(
            s.host().text + ": the job ended without a result (" +
            (status == 255   ? "ssh exit 255: the connection was lost or the worker was killed"
             : status == 127 ? "'" + s.options().remote_cli + "' not found on the host"
             : status == -1  ? "timed out"
                             : "exit " + std::to_string(status)) +
            ")" +
            (err.empty()
                 ? ""
                 : ": " + err.substr(err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1)));
    }
    result["remote"] = {{"host", s.host().text}, {"job_dir", s.options().remote_dir + "/jobs/" + id}};
    if (!local_out.empty() && s.options().fetch) {
        check_cancel();
        if (events)
            events(Json{{"event", "log"}, {"message", "fetching the output to " + local_out.string()}});
        if (local_out.has_parent_path())
            fs::create_directories(local_out.parent_path());
        AtomicDirectory dir(local_out, force);
        pipe_between(s.argv("cd " + job_dir + "/out && tar -cf - ."),
                     {"tar", "-xf", "-", "-C", dir.path().string()}, "fetching the output", s);
        dir.commit();
        result["out"] = local_out.string();
    }
    cleanup();
    return result;
}

} // namespace embedlab
