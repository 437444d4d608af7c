#include "embedlab/power.hpp"

#include <chrono>
#include <map>
#include <regex>
#include <sstream>

#include "embedlab/subprocess.hpp"

namespace embedlab {

namespace {
const std::vector<std::string> kPmicCommand = {"vcgencmd", "pmic_read_adc"};
constexpr auto kCommandTimeout = std::chrono::milliseconds(5000);
} // namespace

std::optional<double> parse_pmic_read_adc(const std::string& output)
{
    static const std::regex line(R"(^\s*(\S+)_([AV])\s+(current|volt)\(\d+\)=([-+0-9.eE]+)[AV]\s*$)");
    std::map<std::string, double> amps, volts;
    std::istringstream in(output);
    for (std::string s; std::getline(in, s);) {
        std::smatch m;
        if (!std::regex_match(s, m, line))
            continue;
        (m[2] == "A" ? amps : volts)[m[1]] = std::stod(m[4]);
    }
    double total = 0;
    bool any = false;
    for (const auto& [rail, a] : amps)
        if (const auto v = volts.find(rail); v != volts.end()) {
            total += a * v->second;
            any = true;
        }
    return any ? std::optional<double>(total) : std::nullopt;
}

double integrate_energy(const std::vector<PowerSample>& samples, double idle_watts)
{
    double joules = 0;
    for (size_t i = 1; i < samples.size(); ++i)
        joules += 0.5 * (samples[i].watts + samples[i - 1].watts - 2 * idle_watts) *
                  (samples[i].seconds - samples[i - 1].seconds);
    return joules;
}

double mean_power(const std::vector<PowerSample>& samples)
{
    if (samples.empty())
        return 0;
    const double span = samples.back().seconds - samples.front().seconds;
    if (samples.size() == 1 || span <= 0)
        return samples.front().watts;
    return integrate_energy(samples, 0) / span;
}

bool power_sampling_available(std::string* why)
{
    auto say = [&](const std::string& s) {
        if (why)
            *why = s;
        return false;
    };
    if (!find_executable("vcgencmd"))
        return say("vcgencmd not found (power sampling needs a Raspberry Pi 5)");
    try {
        const auto r = run_command(kPmicCommand, "", kCommandTimeout);
        if (r.status != 0)
            return say("vcgencmd pmic_read_adc failed (exit " + std::to_string(r.status) + ")");
        if (!parse_pmic_read_adc(r.out))
            return say("vcgencmd pmic_read_adc printed no rail current and voltage (not a Raspberry Pi 5?)");
    } catch (const std::exception& e) {
        return say(e.what());
    }
    return true;
}

PowerSampler::~PowerSampler()
{
    if (thread_.joinable())
        stop();
}

void PowerSampler::start()
{
    samples_.clear();
    running_ = true;
    thread_ = std::thread([this] {
        const auto t0 = std::chrono::steady_clock::now();
        while (running_) {
            CommandResult r;
            try {
                r = run_command(kPmicCommand, "", kCommandTimeout);
            } catch (const std::exception&) {
                break; // vcgencmd vanished: keep the samples taken so far
            }
            const auto w = r.status == 0 ? parse_pmic_read_adc(r.out) : std::nullopt;
            if (w)
                samples_.push_back(
                    {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), *w});
        }
    });
}

std::vector<PowerSample> PowerSampler::stop()
{
    running_ = false;
    if (thread_.joinable())
        thread_.join();
    return std::move(samples_);
}

} // namespace embedlab
