// The JSON lines a remote worker prints (another machine's output): each is
// normalised before anyone reads it. Progress must come out with a string stage
// and 0 <= done <= total, log with a string message; an error event must throw
// only Cancelled, InputError or RemoteError.
#include <cstdlib>

#include "embedlab/remote.hpp"
#include "fuzz_support.hpp"
#include "remote/worker_events.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    using Kind = detail::WorkerLine::Kind;
    std::string_view rest = fuzz::as_text(data, size);
    while (!rest.empty()) {
        const size_t end = rest.find('\n');
        const std::string_view line = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        const auto parsed = detail::parse_worker_line(line);
        const auto& j = parsed.json;
        switch (parsed.kind) {
        case Kind::Progress:
            if (!j["stage"].is_string() || !j["done"].is_number_integer() ||
                !j["total"].is_number_integer() || j["done"].get<int64_t>() < 0 ||
                j["done"].get<int64_t>() > j["total"].get<int64_t>())
                std::abort();
            break;
        case Kind::Log:
        case Kind::Text:
            if (j["event"] != "log" || !j["message"].is_string())
                std::abort();
            break;
        case Kind::Result:
            if (!j.is_object())
                std::abort();
            break;
        case Kind::Error:
            try {
                detail::throw_worker_error("host", j);
            } catch (const Cancelled&) {
            } catch (const InputError&) {
            } catch (const RemoteError&) {
            }
            break;
        case Kind::Started:
            if (!j.is_object())
                std::abort();
            break;
        }
    }
    return 0;
}
