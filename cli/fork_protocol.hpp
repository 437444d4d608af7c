// The wire format between the tests' client (tests/cli_fork_client.hpp) and
// embedlab-cli's fork server (fork_server.hpp), over a Unix stream socket. A request
// is a list of strings: working directory, stdin, stdout and stderr paths, argc, the
// argv words, then the environment; each string a 4-byte length and its bytes, after
// a 4-byte count. The reply is one ForkedRun. Header-only, no engine: the tests'
// client includes it directly. Functions are thread safe; a socket is not shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

extern char** environ;

// In namespace embedlab, not embedlab::cli: a visible namespace cli makes the tests'
// unqualified cli(...) ambiguous (run_in_process.hpp).
namespace embedlab::fork_protocol {

// Names the server's socket fd in embedlab-cli's environment (fork_server.hpp).
inline constexpr const char* kServerVariable = "EMBEDLAB_CLI_FORK_SERVER";

// How a forked run ended: waitpid's status and the child's resource use.
struct ForkedRun {
    int64_t wait_status = -1;
    int64_t max_rss_kb = 0;
    int64_t user_us = 0, system_us = 0;
};

// This process's environment as "NAME=value" strings, in environ's order.
inline std::vector<std::string> environment_strings()
{
    std::vector<std::string> variables;
    for (char** e = environ; e && *e; ++e)
        variables.emplace_back(*e);
    return variables;
}

// `words` as the null-terminated char* array exec and posix_spawn take (pointing into them).
inline std::vector<char*> c_strings(std::vector<std::string>& words)
{
    std::vector<char*> p;
    for (auto& w : words)
        p.push_back(w.data());
    p.push_back(nullptr);
    return p;
}

inline bool send_all(int fd, const void* data, size_t size)
{
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL); // a closed peer is an error, not SIGPIPE
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

// False at the end of the stream or on an error.
inline bool receive_all(int fd, void* data, size_t size)
{
    char* p = static_cast<char*>(data);
    while (size > 0) {
        const ssize_t n = ::read(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

inline bool send_strings(int fd, const std::vector<std::string>& strings)
{
    std::string message;
    const auto put = [&message](uint32_t n) { message.append(reinterpret_cast<const char*>(&n), sizeof n); };
    put(static_cast<uint32_t>(strings.size()));
    for (const auto& s : strings) {
        put(static_cast<uint32_t>(s.size()));
        message += s;
    }
    return send_all(fd, message.data(), message.size());
}

// Nothing at the end of the stream, on an error or on a count past the limits.
inline std::optional<std::vector<std::string>> receive_strings(int fd)
{
    constexpr uint32_t kMostStrings = 1 << 20, kLongestString = 1 << 24;
    uint32_t count = 0;
    if (!receive_all(fd, &count, sizeof count) || count > kMostStrings)
        return std::nullopt;
    std::vector<std::string> strings(count);
    for (auto& s : strings) {
        uint32_t size = 0;
        if (!receive_all(fd, &size, sizeof size) || size > kLongestString)
            return std::nullopt;
        s.resize(size);
        if (size > 0 && !receive_all(fd, s.data(), size))
            return std::nullopt;
    }
    return strings;
}

} // namespace embedlab::fork_protocol
