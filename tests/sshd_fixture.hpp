// A real OpenSSH server on 127.0.0.1 for remote tests: host key, client key,
// authorized_keys, known_hosts and an ssh config (IdentityFile,
// UserKnownHostsFile, Port) in a temporary directory. `skip_reason` is set when
// sshd cannot be started here (not installed, not permitted).
#pragma once

#include <csignal>
#include <fstream>
#include <memory>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedlab/subprocess.hpp"
#include "test_support.hpp"

namespace embedlab::test {

class SshServer {
public:
    SshServer()
    {
        const std::string sshd = "/usr/sbin/sshd";
        if (::access(sshd.c_str(), X_OK) != 0 || !find_executable("ssh") || !find_executable("ssh-keygen")) {
            skip_reason = "OpenSSH server or client not installed (/usr/sbin/sshd, ssh, ssh-keygen)";
            return;
        }
        if (::geteuid() == 0 && !std::filesystem::exists("/run/sshd")) {
            std::filesystem::create_directories("/run/sshd");
            ::chmod("/run/sshd", 0755);
        }
        const auto d = dir.path();
        for (const char* key : {"host_key", "id"}) {
            const auto r =
                run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", (d / key).string()}, "",
                            std::chrono::seconds(30));
            if (r.status != 0) {
                skip_reason = "ssh-keygen failed: " + r.err;
                return;
            }
        }
        port = free_port();
        std::filesystem::copy_file(d / "id.pub", d / "authorized_keys");
        std::ofstream(d / "known_hosts") << "[127.0.0.1]:" << port << " " << read_text(d / "host_key.pub");
        const passwd* pw = ::getpwuid(::geteuid());
        user = pw ? pw->pw_name : "root";
        std::ofstream(d / "sshd_config")
            << "Port " << port << "\nListenAddress 127.0.0.1\nHostKey " << (d / "host_key").string()
            << "\nAuthorizedKeysFile " << (d / "authorized_keys").string()
            << "\nPermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
               "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPidFile "
            << (d / "sshd.pid").string() << "\nAcceptEnv " << kThreadVariables << "\n";
        ssh_config = d / "ssh_config";
        std::ofstream(ssh_config) << "Host loopback\n  HostName 127.0.0.1\n  Port " << port << "\n"
                                  << "Host *\n  User " << user << "\n  IdentityFile " << (d / "id").string()
                                  << "\n  IdentitiesOnly yes\n  UserKnownHostsFile "
                                  << (d / "known_hosts").string()
                                  << "\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
                                  << "  SendEnv " << kThreadVariables << "\n";
        start();
    }

    void start()
    {
        const auto d = dir.path();
        // The log goes to a file: nobody drains a pipe while tests run.
        const int log = ::open((d / "sshd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        server = std::make_unique<Subprocess>(
            std::vector<std::string>{"/usr/sbin/sshd", "-D", "-e", "-f", (d / "sshd_config").string()},
            SubprocessOptions{.stdin_fd = -2, .stdout_fd = log, .stderr_fd = log});
        ::close(log);
        for (int i = 0; i < 200; ++i) { // up to 10 s for the port to accept
            if (accepts(port))
                return;
            if (server->exit_status()) {
                skip_reason = "sshd did not start: " + read_text(d / "sshd.log");
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        skip_reason = "sshd did not accept connections on port " + std::to_string(port);
    }

    // "127.0.0.1:PORT"
    std::string host() const { return "127.0.0.1:" + std::to_string(port); }

    // Kills the listener and every process it started (connections, sessions),
    // all by process id.
    void kill_all()
    {
        if (!server)
            return;
        const pid_t root = server->pid();
        for (pid_t p : descendants(root))
            ::kill(p, SIGKILL);
        server->terminate(std::chrono::milliseconds(100));
    }

    ~SshServer()
    {
        if (server)
            kill_all();
    }

    // The test's thread settings (ctest gives each test EMBEDLAB_THREADS=1, OMP_NUM_THREADS=1,
    // OMP_WAIT_POLICY=PASSIVE) reach the commands ssh runs, as they reach a local
    // embedlab-cli: sshd starts a session with a fresh environment, where a worker ran on
    // every core with OpenMP spinning (1.6 x the CPU seconds of one thread, and the
    // other test on the machine slowed down).
    static constexpr const char* kThreadVariables =
        "EMBEDLAB_THREADS OMP_NUM_THREADS OMP_WAIT_POLICY OPENBLAS_NUM_THREADS";

    TempDir dir;
    int port = 0;
    std::string user;
    std::filesystem::path ssh_config;
    std::string skip_reason;
    std::unique_ptr<Subprocess> server;

private:
    static int free_port()
    {
        const int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
        socklen_t n = sizeof a;
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
        ::close(s);
        return ntohs(a.sin_port);
    }

    static bool accepts(int port)
    {
        const int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(s);
        return ok;
    }

    // Processes whose parent chain reaches `root` (from /proc/<pid>/stat).
    static std::vector<pid_t> descendants(pid_t root)
    {
        std::vector<std::pair<pid_t, pid_t>> parent_of;
        for (const auto& e : std::filesystem::directory_iterator("/proc")) {
            const std::string name = e.path().filename();
            if (name.find_first_not_of("0123456789") != std::string::npos)
                continue;
            const std::string stat = read_text(e.path() / "stat");
            const size_t close = stat.rfind(')');
            if (close == std::string::npos)
                continue;
            char state;
            int ppid = 0;
            if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2)
                parent_of.emplace_back(std::stoi(name), ppid);
        }
        std::set<pid_t> found{root};
        for (bool grew = true; grew;) {
            grew = false;
            for (const auto& [pid, ppid] : parent_of)
                if (found.count(ppid) && found.insert(pid).second)
                    grew = true;
        }
        found.erase(root);
        return {found.begin(), found.end()};
    }
};

// One server for a test executable, started on first use.
inline SshServer& shared_server()
{
    static SshServer server;
    return server;
}

} // namespace embedlab::test

// Skips the test, saying why, when sshd could not be started here.
#define REQUIRE_SSHD(server)                                                                                 \
    if (!(server).skip_reason.empty())                                                                       \
    GTEST_SKIP() << (server).skip_reason
