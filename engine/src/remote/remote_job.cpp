// run_remote_job: upload inputs by digest, run the worker, stream events, fetch outputs.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <set>

#include <fcntl.h>

#include <openssl/evp.h>
#include <unistd.h>

#include "embedlab/file_output.hpp"
#include "embedlab/model.hpp"
#include "embedlab/pipeline_request.hpp"
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
    std::vector<std::string> files; // a directory's files that are sent, relative to it
    std::string digest;             // over relative paths and file sha256s
    std::string relative;           // the path the job sees, relative to its job directory
};

// The files a model or tokenizer directory's loaders read (hf_model.cpp,
// tokenizer/directory.cpp, compressed_model.cpp). Nothing else in the directory
// is sent: a directory that is not a model sends nothing (issue 24 item 12).
bool is_model_directory_file(const std::string& name)
{
    static const std::set<std::string> names{"config.json",
                                             "generation_config.json",
                                             "embedlab.json",
                                             "model.safetensors.index.json",
                                             "tokenizer.json",
                                             "tokenizer_config.json",
                                             "special_tokens_map.json",
                                             "added_tokens.json",
                                             "vocab.json",
                                             "merges.txt",
                                             "tokenizer.model"};
    const std::string ext = ".safetensors";
    return names.count(name) > 0 ||
           (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0);
}

bool inside(const fs::path& p, const fs::path& dir)
{
    const auto rel = p.lexically_relative(dir);
    return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

// A link in a directory input may point inside it, or, in a Hugging Face cache
// snapshot (.../snapshots/REV), into the cache's blobs/; anything else is refused.
void check_link(const fs::path& file, const fs::path& root, const std::string& field)
{
    std::error_code ec;
    if (!fs::is_symlink(file, ec))
        return;
    const auto base = fs::canonical(root, ec);
    const auto target = fs::weakly_canonical(file, ec);
    const bool hf_blob = base.has_parent_path() && base.parent_path().filename() == "snapshots" &&
                         inside(target, base.parent_path().parent_path() / "blobs");
    if (ec || !(inside(target, base) || hf_blob))
        throw InputError(file.string() + ": links to " + target.string() + ", outside " + root.string() +
                         " (job field \"" + field +
                         "\"); only files inside the directory are sent "
                         "(copy it with cp -L to send the target)");
}

Input describe_input(const std::string& field, const fs::path& path)
{
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (!fs::exists(status))
        throw InputError(path.string() + ": does not exist (job field \"" + field + "\")");
    Input in{.local = path, .directory = fs::is_directory(status), .files = {}, .digest = {}, .relative = {}};
    const bool model_like = field == "model" || field == "tokenizer";
    if (in.directory && !model_like)
        throw InputError(path.string() + ": is a directory; job field \"" + field + "\" takes a text file");
    if (!in.directory && !fs::is_regular_file(status))
        throw InputError(path.string() + ": is not a regular file (job field \"" + field + "\")");
    std::vector<std::pair<std::string, fs::path>> files;
    if (in.directory) {
        // The top level only: model directories keep what a loader reads there.
        for (const auto& e : fs::directory_iterator(path, ec)) {
            const std::string name = e.path().filename().string();
            if (!is_model_directory_file(name) || !fs::is_regular_file(e.path(), ec))
                continue;
            check_link(e.path(), path, field);
            files.emplace_back(name, e.path());
        }
        if (ec)
            throw InputError(path.string() + ": cannot be listed (" + ec.message() + ")");
        std::sort(files.begin(), files.end());
        const bool has_config =
            std::any_of(files.begin(), files.end(), [](const auto& f) { return f.first == "config.json"; });
        const bool has_tokenizer = std::any_of(files.begin(), files.end(), [](const auto& f) {
            return f.first == "tokenizer.json" || f.first == "vocab.json" || f.first == "tokenizer.model";
        });
        if (field == "model" && !has_config)
            throw InputError(path.string() +
                             ": is not a model directory (no config.json; job field \"model\" "
                             "takes a Hugging Face or EmbedLab directory, a .gguf or a llama2.c .bin file)");
        if (field == "tokenizer" && !has_tokenizer)
            throw InputError(path.string() + ": has no tokenizer.json, vocab.json or tokenizer.model "
                                             "(job field \"tokenizer\")");
        for (const auto& f : files)
            in.files.push_back(f.first);
    } else {
        if (field == "model" && path.extension() != ".gguf" && path.extension() != ".bin")
            throw InputError(path.string() + ": is not a model file (job field \"model\" takes a directory, "
                                             "a .gguf or a llama2.c .bin file)");
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

// True when this call copied the input (false: the host had it already).
bool upload(const SshSession& s, const Input& in, const JobEventFn& events)
{
    const std::string blob = s.remote_path({"blobs", in.digest});
    const auto check = s.run("test -d " + blob, "", kShort);
    if (check.status == 0) {
        if (events)
            events(Json{
                {"event", "log"},
                {"message", in.local.string() + ": already on the host (" + in.digest.substr(0, 12) + ")"}});
        return false;
    }
    if (check.status != 1)
        throw RemoteError(ssh_failure(s, "checking the cache", check));
    if (events)
        events(Json{{"event", "log"}, {"message", "copying " + in.local.string() + " to the host"}});
    const auto dir = in.directory                     ? in.local
                     : in.local.parent_path().empty() ? fs::path(".")
                                                      : in.local.parent_path();
    std::vector<std::string> tar{"tar", "-C", dir.string(), "-chf", "-", "--"};
    if (in.directory)
        tar.insert(tar.end(), in.files.begin(), in.files.end()); // checked by describe_input
    else
        tar.push_back(in.local.filename().string());
    const std::string script =
        "set -e; umask 077; mkdir -p " + s.remote_path({"blobs"}) + "; t=" + blob +
        ".tmp.$$; rm -rf \"$t\"; mkdir \"$t\"; tar -xf - -C \"$t\"; chmod -R u+w \"$t\"; " +
        // rename(2) refuses a non-empty target: a concurrent upload of the
        // same digest wins, ours is dropped.
        "if ! mv -T \"$t\" " + blob + " 2>/dev/null; then rm -rf \"$t\"; [ -d " + blob + " ]; fi";
    pipe_between(tar, s.argv(script), "copying " + in.local.string(), s);
    return true;
}

// The fetched output may hold only files and directories: a link from the host
// could point anywhere on this machine (issue 24 item 17).
void check_fetched(const fs::path& dir, const SshSession& s)
{
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        const auto st = it->symlink_status(ec);
        if (!fs::is_regular_file(st) && !fs::is_directory(st))
            throw RemoteError(s.host().text + ": the job's output holds " +
                              (fs::is_symlink(st) ? "a link" : "a special file") + ", '" +
                              it->path().lexically_relative(dir).string() +
                              "'; refused (nothing was written)");
    }
    if (ec)
        throw RemoteError(dir.string() + ": cannot check the fetched output (" + ec.message() + ")");
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

// The rest of run_remote_job once the inputs are on the host.
Json run_uploaded_job(SshSession& s, const Json& remote_job, const fs::path& local_out, bool force,
                      const JobEventFn& events, const CancelFn& cancelled);

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
    // Every input is checked before anything is sent.
    std::vector<std::pair<std::string, Input>> inputs;
    for (const auto& field : job_input_fields())
        if (job.contains(field))
            inputs.emplace_back(field, describe_input(field, job[field].get<std::string>()));
    for (const auto& pointer : pipeline_input_pointers(job)) // a chain's steps name files too
        inputs.emplace_back(pointer,
                            describe_input(pointer, job.at(Json::json_pointer(pointer)).get<std::string>()));
    // What this job copied is removed again if it fails (issue 24 item 12).
    std::vector<std::string> uploaded;
    auto remove_uploads = [&] {
        for (const auto& blob : uploaded)
            try {
                s.run("rm -rf " + blob, "", kShort);
            } catch (...) { // the job's own error is the one to report
            }
    };
    try {
        for (const auto& [field, in] : inputs) {
            check_cancel();
            if (upload(s, in, events))
                uploaded.push_back(s.remote_path({"blobs", in.digest}));
            remote_job[Json::json_pointer(field.front() == '/' ? field : "/" + field)] = in.relative;
        }
        return run_uploaded_job(s, remote_job, local_out, force, events, cancelled);
    } catch (...) {
        remove_uploads();
        throw;
    }
}

namespace {

Json run_uploaded_job(SshSession& s, const Json& remote_job_in, const fs::path& local_out, bool force,
                      const JobEventFn& events, const CancelFn& cancelled)
{
    Json remote_job = remote_job_in;
    auto check_cancel = [&] {
        if (cancelled && cancelled())
            throw Cancelled();
    };
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
        check_fetched(dir.path(), s);
        dir.commit();
        result["out"] = local_out.string();
    }
    cleanup();
    return result;
}

} // namespace

} // namespace embedlab
