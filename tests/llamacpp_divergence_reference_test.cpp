// eval --reference-logits against llama.cpp itself: tinyllama and its pca k = 16
// exported to f32 GGUF, llama-perplexity --kl-divergence-base on the original, then
// llama-perplexity --kl-divergence and EmbedLab on the compressed model against that
// file. Every statistic llama.cpp prints agrees within its printed uncertainty and
// within the rounding of its printout. llama.cpp runs with an f32 KV cache and without
// flash attention: its default f16 cache moves single positions' KL by up to 1e-3
// (percentiles, extremes), not the means. Skips without ../shared or llama.cpp.
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "cli_support.hpp"
#include "llama_cpp_tools.hpp"

namespace embedlab {
namespace {

using test::cli;

struct Printed {
    double value = 0, uncertainty = -1; // -1: none printed
};

// llama-perplexity's "====== ... statistics ======" lines: "<label>: value [± uncertainty] [%]".
std::map<std::string, Printed> parse_statistics(const std::string& out)
{
    std::map<std::string, Printed> m;
    const auto start = out.find("====== Perplexity statistics ======");
    if (start == std::string::npos)
        return m;
    std::istringstream in(out.substr(start));
    std::string line;
    while (std::getline(in, line)) {
        const auto colon = line.find(": ");
        if (colon == std::string::npos || line.rfind("llama_", 0) == 0)
            continue;
        std::string label = line.substr(0, colon);
        label.erase(0, label.find_first_not_of(' '));
        label.erase(label.find_last_not_of(' ') + 1);
        Printed p;
        p.value = std::strtod(line.c_str() + colon + 2, nullptr);
        if (const auto pm = line.find("±"); pm != std::string::npos)
            p.uncertainty = std::strtod(line.c_str() + pm + std::string("±").size(), nullptr);
        m[label] = p;
    }
    return m;
}

void run(const std::string& command)
{
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(LlamaCppReference, TinyllamaPcaAgreesWithLlamaPerplexityKlDivergence)
{
    EMBEDLAB_REQUIRE_SHARED();
    if (!std::filesystem::exists(test::llama_cpp_dir() / "llama-perplexity"))
        GTEST_SKIP() << "needs llama-perplexity in " << test::llama_cpp_dir();
    const auto model = test::shared_dir() / "models/tinyllama";
    test::TempDir dir;
    // ~12 KB of held-out stories: about 3,000 tokens, 23 chunks of 128.
    const std::string text =
        test::read_text(test::shared_dir() / "data/tinystories-heldout.txt").substr(0, 12000);
    test::write_file(dir / "text.txt", text);
    const auto ok = [](const test::CliRun& r) {
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.exit_code == 0;
    };
    ASSERT_TRUE(ok(cli({"compress", model.string(), "--method", "pca", "--rank", "16", "--out",
                        (dir / "pca").string(), "--quiet"})));
    ASSERT_TRUE(ok(cli({"export", model.string(), "--format", "gguf", "--type", "f32", "--out",
                        (dir / "base.gguf").string()})));
    ASSERT_TRUE(ok(cli({"export", (dir / "pca").string(), "--format", "gguf", "--type", "f32", "--out",
                        (dir / "pca.gguf").string()})));
    const std::string perplexity = test::llama_cpp_command("llama-perplexity");
    const auto q = [](const std::filesystem::path& p) { return test::quote(p.string()); };
    run(perplexity + " -m " + q(dir / "base.gguf") + " -f " + q(dir / "text.txt") +
        " -c 128 -t 2 -ctk f32 -ctv f32 -fa off" + " --kl-divergence-base " + q(dir / "base.kld") + " > " +
        q(dir / "base.log") + " 2>&1");
    run(perplexity + " -m " + q(dir / "pca.gguf") +
        " -c 128 -t 2 -ctk f32 -ctv f32 -fa off --kl-divergence --kl-divergence-base " + q(dir / "base.kld") +
        " > " + q(dir / "kld.log") + " 2>&1");
    const auto llama = parse_statistics(test::read_text(dir / "kld.log"));
    ASSERT_GE(llama.size(), 30u) << test::read_text(dir / "kld.log");

    const auto r =
        cli({"eval", (dir / "pca").string(), "--reference-logits", (dir / "base.kld").string(), "--json"});
    ASSERT_TRUE(ok(r));
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["bos"].get<bool>()) << "llama.cpp adds BOS for tinyllama";

    // llama.cpp's label, EmbedLab's key, the printout's unit (100: percent).
    const std::vector<std::tuple<std::string, std::string, double>> rows = {
        {"Mean PPL(Q)", "ppl", 1},
        {"Mean PPL(base)", "reference_ppl", 1},
        {"Cor(ln(PPL(Q)), ln(PPL(base)))", "ln_ppl_correlation", 100},
        {"Mean ln(PPL(Q)/PPL(base))", "delta_ln_ppl", 1},
        {"Mean PPL(Q)/PPL(base)", "ppl_ratio", 1},
        {"Mean PPL(Q)-PPL(base)", "ppl_difference", 1},
        {"Mean    KLD", "kl_mean", 1},
        {"Maximum KLD", "kl_max", 1},
        {"99.9%   KLD", "kl_p999", 1},
        {"99.0%   KLD", "kl_p99", 1},
        {"95.0%   KLD", "kl_p95", 1},
        {"90.0%   KLD", "kl_p90", 1},
        {"Median  KLD", "kl_median", 1},
        {"10.0%   KLD", "kl_p10", 1},
        {"5.0%   KLD", "kl_p5", 1},
        {"1.0%   KLD", "kl_p1", 1},
        {"0.1%   KLD", "kl_p01", 1},
        {"Minimum KLD", "kl_min", 1},
        {"Mean    Δp", "delta_p_mean", 100},
        {"Maximum Δp", "delta_p_max", 100},
        {"99.9%   Δp", "delta_p_p999", 100},
        {"99.0%   Δp", "delta_p_p99", 100},
        {"95.0%   Δp", "delta_p_p95", 100},
        {"90.0%   Δp", "delta_p_p90", 100},
        {"75.0%   Δp", "delta_p_p75", 100},
        {"Median  Δp", "delta_p_median", 100},
        {"25.0%   Δp", "delta_p_p25", 100},
        {"10.0%   Δp", "delta_p_p10", 100},
        {"5.0%   Δp", "delta_p_p5", 100},
        {"1.0%   Δp", "delta_p_p1", 100},
        {"0.1%   Δp", "delta_p_p01", 100},
        {"Minimum Δp", "delta_p_min", 100},
        {"RMS Δp", "delta_p_rms", 100},
        {"Same top p", "top1_agreement", 100},
    };
    std::string report;
    for (const auto& [label, key, unit] : rows) {
        ASSERT_TRUE(llama.count(label)) << "llama-perplexity printed no \"" << label << "\"";
        const auto& p = llama.at(label);
        const double ours = unit * j.at(key).get<double>();
        // Printed to 6 decimals (KLD, PPL), 3 (percent) or 2 (Cor, percent): half a last digit.
        const bool cor = label.rfind("Cor", 0) == 0;
        const double digit = cor ? 5e-3 : unit == 100 ? 5e-4 : 5e-7;
        report +=
            label + ": llama.cpp " + std::to_string(p.value) + " EmbedLab " + std::to_string(ours) + "\n";
        // Within the printed uncertainty (the bar) and, tighter, within the
        // printout's rounding: the same f32 weights, tokens and arithmetic on both sides.
        if (p.uncertainty >= 0) {
            EXPECT_LE(std::abs(ours - p.value), p.uncertainty + digit) << label;
        }
        EXPECT_NEAR(ours, p.value, 2e-5 * std::abs(p.value) + 2 * digit) << label << " (" << key << ")";
        const std::string ukey = key + "_uncertainty";
        if (p.uncertainty > 0 && j.contains(ukey)) {
            EXPECT_NEAR(unit * j[ukey].get<double>(), p.uncertainty, 1e-3 * p.uncertainty + digit) << ukey;
        }
    }
    std::cout << report;
    EXPECT_NEAR(100 * j["top1_agreement_uncertainty"].get<double>(), llama.at("Same top p").uncertainty,
                5e-4);
    EXPECT_NEAR(j["tokens"].get<double>(), j["windows"].get<double>() * 63, 0);
}

} // namespace
} // namespace embedlab
