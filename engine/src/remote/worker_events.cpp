#include "remote/worker_events.hpp"

#include <algorithm>

#include "embedlab/error.hpp"
#include "embedlab/remote.hpp"

namespace embedlab::detail {

using Json = nlohmann::ordered_json;

namespace {

std::string string_or(const Json& e, const char* key, const std::string& fallback)
{
    return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : fallback;
}

WorkerLine text_line(std::string_view line)
{
    return {WorkerLine::Kind::Text, Json{{"event", "log"}, {"message", std::string(line)}}};
}

} // namespace

WorkerLine parse_worker_line(std::string_view line)
{
    const auto e = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (!e.is_object() || !e.contains("event") || !e["event"].is_string())
        return text_line(line);
    const std::string event = e["event"];
    if (event == "started")
        return {WorkerLine::Kind::Started, e};
    if (event == "result")
        return {WorkerLine::Kind::Result,
                e.contains("result") && e["result"].is_object() ? e["result"] : Json::object()};
    if (event == "error")
        return {WorkerLine::Kind::Error, Json{{"error_kind", string_or(e, "error_kind", "internal")},
                                              {"message", string_or(e, "message", "unknown error")}}};
    if (event == "log")
        return {WorkerLine::Kind::Log, Json{{"event", "log"}, {"message", string_or(e, "message", "")}}};
    if (event == "progress") {
        if (!e.contains("done") || !e.contains("total") || !e["done"].is_number_integer() ||
            !e["total"].is_number_integer())
            return text_line(line);
        // Integers beyond int64 arrive as unsigned; clamp them instead of wrapping.
        auto value = [&](const char* key) {
            return e[key].is_number_unsigned() ? std::min<uint64_t>(e[key].get<uint64_t>(), INT64_MAX)
                                               : std::max<int64_t>(e[key].get<int64_t>(), 0);
        };
        const int64_t total = static_cast<int64_t>(value("total"));
        const int64_t done = std::min(static_cast<int64_t>(value("done")), total);
        Json progress{
            {"event", "progress"}, {"stage", string_or(e, "stage", "")}, {"done", done}, {"total", total}};
        // An experiment's share of the whole run (experiment.hpp), kept within [0, 1].
        if (e.contains("overall") && e["overall"].is_number()) {
            const double overall = e["overall"].get<double>();
            progress["overall"] = overall >= 0 && overall <= 1 ? overall : overall > 1 ? 1.0 : 0.0;
        }
        return {WorkerLine::Kind::Progress, progress};
    }
    return text_line(line);
}

void throw_worker_error(const std::string& host, const Json& error)
{
    const std::string kind = string_or(error, "error_kind", "internal");
    const std::string message = string_or(error, "message", "unknown error");
    if (kind == "cancelled")
        throw Cancelled();
    if (kind == "input")
        throw InputError(host + ": " + message);
    throw RemoteError(host + ": the worker failed: " + message);
}

} // namespace embedlab::detail
