// Reading the lines `embedlab-cli worker` prints (job.hpp, remote.hpp). They come
// from another machine, so each is checked and normalised before anyone reads a
// field: a progress event always has a string stage and 0 <= done <= total, a log
// event a string message; anything else is passed on as a plain text line.
// Torch-free, so fuzz/fuzz_worker_events.cpp reaches all of it.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace embedlab::detail {

struct WorkerLine {
    enum class Kind { Text, Started, Progress, Log, Result, Error } kind = Kind::Text;
    // Progress: {event, stage, done, total}; Log: {event, message}; Result: the
    // result object; Error: {error_kind, message}; Text: {event: "log", message: line}.
    nlohmann::ordered_json json;
};
WorkerLine parse_worker_line(std::string_view line);

// Throws what the worker's error event reports, prefixed with `host`: Cancelled,
// InputError ("input"), or RemoteError ("the worker failed: ...").
[[noreturn]] void throw_worker_error(const std::string& host, const nlohmann::ordered_json& error);

} // namespace embedlab::detail
