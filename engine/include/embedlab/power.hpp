// Measured power on a Raspberry Pi 5: `vcgencmd pmic_read_adc` sampled while
// work runs, integrated over time, idle power subtracted.
//
//   auto watts = embedlab::parse_pmic_read_adc(output);   // sum of I x V over rails
//   embedlab::PowerSampler s;                              // nullopt-free only if available
//   if (embedlab::power_sampling_available()) { s.start(); work(); auto samples = s.stop(); }
//   double joules = embedlab::integrate_energy(samples, idle_watts);
//
// pmic_read_adc prints lines such as `VDD_CORE_A current(7)=2.51390000A` and
// `VDD_CORE_V volt(15)=0.85236100V`; a rail's power is its current times its
// voltage, matched by name (X_A with X_V); the total is the sum over rails that
// report both (EXT5V_V and BATT_V have no current and are left out).
// Thread safety: functions are reentrant; one PowerSampler per thread.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace embedlab {

struct PowerSample {
    double seconds = 0; // since the sampler started
    double watts = 0;
};

// Total watts from one pmic_read_adc output; nullopt if no rail has both values.
std::optional<double> parse_pmic_read_adc(const std::string& output);

// Trapezoid integral of (watts - idle_watts) over the samples, in joules.
double integrate_energy(const std::vector<PowerSample>& samples, double idle_watts);

// Mean power of the samples (time-weighted; a single sample is its own mean).
double mean_power(const std::vector<PowerSample>& samples);

// vcgencmd on PATH and a parsable pmic_read_adc; `why` says what is missing.
bool power_sampling_available(std::string* why = nullptr);

// Runs `vcgencmd pmic_read_adc` in a loop on a thread of its own.
class PowerSampler {
public:
    PowerSampler() = default;
    ~PowerSampler();
    PowerSampler(const PowerSampler&) = delete;
    PowerSampler& operator=(const PowerSampler&) = delete;
    void start();
    std::vector<PowerSample> stop();

private:
    std::atomic<bool> running_{false};
    std::thread thread_;
    std::vector<PowerSample> samples_;
};

} // namespace embedlab
