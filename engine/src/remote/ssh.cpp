// Host strings, shell quoting and the ssh connection master.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedlab/remote.hpp"

namespace embedlab {

namespace {

bool all_digits(std::string_view s)
{
    return !s.empty() && s.size() <= 5 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string trimmed(std::string s)
{
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
        s.pop_back();
    return s;
}

// The pid recorded in a connection directory, or 0 when there is none.
pid_t recorded_owner(const std::filesystem::path& dir)
{
    std::ifstream in(dir / "owner.pid");
    long pid = 0;
    if (!(in >> pid) || pid <= 0)
        return 0;
    return static_cast<pid_t>(pid);
}

} // namespace

int remove_stale_ssh_directories(const std::filesystem::path& temp_dir, const std::string& ssh)
{
    namespace fs = std::filesystem;
    int removed = 0;
    std::error_code ec;
    for (fs::directory_iterator it(temp_dir, ec), end; !ec && it != end; it.increment(ec)) {
        const auto& dir = it->path();
        if (dir.filename().string().rfind("embedlab-ssh-", 0) != 0)
            continue;
        struct stat st {};
        if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
            continue;
        const pid_t owner = recorded_owner(dir);
        // Sessions without an owner file are either being created right now or
        // predate it: leave them unless a day old.
        if (owner == 0) {
            if (std::time(nullptr) - st.st_mtime < 24 * 3600)
                continue;
        } else if (::kill(owner, 0) == 0 || errno == EPERM) {
            continue; // the owner is alive
        }
        // The owner was killed before its destructor ran: stop its master (if the
        // socket is still there) and remove the directory.
        const auto socket = dir / "cm";
        if (fs::exists(fs::symlink_status(socket))) {
            try {
                run_command({ssh, "-o", "ControlPath=" + socket.string(), "-O", "exit", "--", "stale-master"},
                            "", std::chrono::seconds(5));
            } catch (...) {
                // The master also exits on its own after ControlPersist.
            }
        }
        std::error_code remove_ec;
        fs::remove_all(dir, remove_ec);
        removed += remove_ec ? 0 : 1;
    }
    return removed;
}

HostSpec parse_host(const std::string& text)
{
    if (text.empty())
        throw InputError("host: empty host name");
    if (text[0] == '-')
        throw InputError("host '" + text + "': a host may not start with '-'");
    HostSpec h{.text = text, .destination = text, .port = 0};
    const size_t at = text.rfind('@');
    const std::string user = at == std::string::npos ? "" : text.substr(0, at + 1);
    const std::string rest = at == std::string::npos ? text : text.substr(at + 1);
    std::string host = rest, port;
    bool has_port = false;
    if (!rest.empty() && rest[0] == '[') { // [v6 address]:port
        const size_t close = rest.find(']');
        if (close == std::string::npos)
            throw InputError("host '" + text + "': missing ']'");
        host = rest.substr(1, close - 1);
        if (close + 1 < rest.size()) {
            if (rest[close + 1] != ':')
                throw InputError("host '" + text + "': expected ':PORT' after ']'");
            port = rest.substr(close + 2);
            has_port = true;
        }
    } else if (const size_t colon = rest.find(':');
               colon != std::string::npos && rest.find(':', colon + 1) == std::string::npos) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
        has_port = true;
    }
    if (has_port) {
        if (!all_digits(port) || std::stoi(port) < 1 || std::stoi(port) > 65535)
            throw InputError("host '" + text + "': port must be a number in 1..65535");
        h.port = std::stoi(port);
    }
    if (host.empty() || host[0] == '-')
        throw InputError("host '" + text + "': no host name");
    h.destination = user + host;
    return h;
}

std::vector<HostSpec> parse_host_list(const std::string& text)
{
    std::vector<HostSpec> hosts;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ','))
        hosts.push_back(parse_host(item));
    if (hosts.empty())
        throw InputError("host: empty host list");
    return hosts;
}

std::string shell_quote(std::string_view word)
{
    std::string q = "'";
    for (char c : word) {
        if (c == '\'')
            q += "'\\''";
        else
            q += c;
    }
    return q + "'";
}

SshSession::SshSession(HostSpec host, RemoteOptions options)
    : host_(std::move(host)), options_(std::move(options))
{
    const auto temp = std::filesystem::temp_directory_path();
    remove_stale_ssh_directories(temp, options_.ssh);
    std::string pattern = (temp / "embedlab-ssh-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
        throw RemoteError("cannot create a private temp directory for the ssh connection: " +
                          std::string(std::strerror(errno)));
    control_dir_ = pattern;
    std::ofstream(control_dir_ / "owner.pid") << ::getpid() << '\n';
    const auto log = control_dir_ / "master.log";
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    auto argv = base_argv();
    for (const char* a : {"-o", "ControlMaster=yes", "-o", "ControlPersist=300", "-N", "-f", "--"})
        argv.emplace_back(a);
    argv.push_back(host_.destination);
    int status = -1;
    try {
        // The backgrounded master keeps stderr: a file, never a pipe we wait on.
        Subprocess master(argv, {.stdin_fd = -2, .stdout_fd = log_fd, .stderr_fd = log_fd});
        status = master.wait(std::chrono::seconds(options_.connect_timeout_seconds + 20));
    } catch (...) {
        ::close(log_fd);
        std::filesystem::remove_all(control_dir_);
        throw;
    }
    ::close(log_fd);
    if (status != 0) {
        std::ifstream in(log);
        std::stringstream s;
        s << in.rdbuf();
        std::error_code ec;
        std::filesystem::remove_all(control_dir_, ec);
        throw RemoteError(host_.text + ": cannot connect" +
                          (status == -1 ? " (timed out)" : " (ssh exit " + std::to_string(status) + ")") +
                          ": " + trimmed(s.str()));
    }
}

SshSession::~SshSession()
{
    try {
        auto argv = base_argv();
        for (const char* a : {"-O", "exit", "--"})
            argv.emplace_back(a);
        argv.push_back(host_.destination);
        run_command(argv, "", std::chrono::seconds(5));
    } catch (...) {
        // The master also exits on its own after ControlPersist.
    }
    std::error_code ec;
    std::filesystem::remove_all(control_dir_, ec);
}

std::vector<std::string> SshSession::base_argv() const
{
    std::vector<std::string> a = {options_.ssh};
    if (!options_.ssh_config.empty())
        a.insert(a.end(), {"-F", options_.ssh_config.string()});
    a.insert(a.end(), {"-T", "-o", "BatchMode=yes", "-o",
                       "ConnectTimeout=" + std::to_string(options_.connect_timeout_seconds), "-o",
                       "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o",
                       "ControlPath=" + (control_dir_ / "cm").string()});
    if (host_.port)
        a.insert(a.end(), {"-p", std::to_string(host_.port)});
    return a;
}

std::vector<std::string> SshSession::argv(const std::string& remote_command) const
{
    auto a = base_argv();
    // Without the master (it died): connect directly rather than start another.
    a.insert(a.end(), {"-o", "ControlMaster=no", "--", host_.destination, remote_command});
    return a;
}

CommandResult SshSession::run(const std::string& remote_command, std::string_view input,
                              std::chrono::milliseconds timeout) const
{
    return run_command(argv(remote_command), input, timeout);
}

std::string SshSession::remote_path(const std::vector<std::string>& parts) const
{
    const std::string& d = options_.remote_dir;
    // Appends only: GCC 12 flags `"literal" + std::string` with a false
    // -Wstringop-overflow (27 lines of noise in every build).
    std::string word;
    if (d == "~" || d.rfind("~/", 0) == 0) {
        word = "\"$HOME\"";
        if (d.size() > 2) {
            word += '/';
            word += shell_quote(d.substr(2));
        }
    } else {
        word = shell_quote(d);
    }
    for (const auto& p : parts) {
        word += '/';
        word += shell_quote(p);
    }
    return word;
}

} // namespace embedlab
