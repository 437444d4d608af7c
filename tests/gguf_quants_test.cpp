// Dequantisation of ggml's block types against llama.cpp's gguf-py (quants.py)
// on the real blocks of the zoo's quantised files and on random blocks of every
// type; hand-built blocks for what gguf-py does not decode (Q8_1, Q8_K). And
// EmbedLab's perplexity of each quantised GGUF against llamacpp-ppl's.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/model.hpp"
#include "io/gguf_parser.hpp"
#include "io/gguf_quants.hpp"
#include "io/mapped_file.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::shared_dir;

bool float_bits_equal(float a, float b)
{
    return std::memcmp(&a, &b, 4) == 0;
}

TEST(GgufQuants, HalvesDecodeExactly)
{
    EXPECT_EQ(io::half_to_float(0x3C00), 1.0f);
    EXPECT_EQ(io::half_to_float(0xC000), -2.0f);
    EXPECT_EQ(io::half_to_float(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(io::half_to_float(0x7BFF), 65504.0f);
    EXPECT_TRUE(std::isinf(io::half_to_float(0x7C00)));
    EXPECT_TRUE(std::isinf(io::half_to_float(0xFC00)) && io::half_to_float(0xFC00) < 0);
    EXPECT_TRUE(std::isnan(io::half_to_float(0x7E00)));
}

// Hand-built blocks: Q8_0 (d = 0.5) and Q4_0 (nibbles minus 8), Q8_K (float d).
TEST(GgufQuants, HandBuiltBlocks)
{
    uint8_t q8[34];
    const uint16_t half_d = 0x3800; // 0.5
    std::memcpy(q8, &half_d, 2);
    for (int j = 0; j < 32; ++j)
        q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
    float out[256];
    io::dequantize_row(8, q8, 32, out);
    for (int j = 0; j < 32; ++j)
        EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 16));

    uint8_t q4[18];
    std::memcpy(q4, &half_d, 2);
    for (int j = 0; j < 16; ++j)
        q4[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    io::dequantize_row(2, q4, 32, out);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 8));
        EXPECT_EQ(out[16 + j], 0.5f * static_cast<float>(7 - j));
    }

    uint8_t q8k[292] = {};
    const float d = 0.25f;
    std::memcpy(q8k, &d, 4);
    for (int j = 0; j < 256; ++j)
        q8k[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 128));
    io::dequantize_row(15, q8k, 256, out);
    EXPECT_EQ(out[0], -32.0f);
    EXPECT_EQ(out[255], 0.25f * 127);
}

TEST(GgufQuants, PartialBlocksAndUnknownTypesAreRefusedByName)
{
    float out[64];
    const uint8_t bytes[64] = {};
    try {
        io::dequantize_row(8, bytes, 33, out);
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("Q8_0 stores blocks of 32 values; a row of 33"),
                  std::string::npos)
            << e.what();
    }
    try {
        io::dequantize_row(16, bytes, 256, out); // IQ2_XXS
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("cannot be dequantised (supported: F32, F16, BF16, Q4_0"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(io::ggml_row_bytes(12, 256), 144u);
    EXPECT_EQ(io::ggml_row_bytes(12, 100), 0u);
}

// gguf-py's reference values, computed by tests/data/gguf_dequant_reference.py. Python runs
// with -B: no __pycache__ is written into ../shared, which stays read-only. When the script
// fails, the failure shows its own output (e.g. a missing module), not a JSON parse error.
void gguf_py(const std::vector<std::string>& args, const test::TempDir& tmp, json& ref)
{
    const auto out = tmp.path() / "reference.json";
    const auto log = tmp.path() / "reference.log";
    std::string cmd = "PYTHONDONTWRITEBYTECODE=1 PYTHONPATH='" +
                      (shared_dir() / "tools" / "gguf-py").string() + "' /usr/bin/python3 -B '" +
                      std::string(EMBEDLAB_SOURCE_DIR) + "/tests/data/gguf_dequant_reference.py'";
    for (const auto& a : args)
        cmd += " '" + a + "'";
    cmd += " '" + out.string() + "' >'" + log.string() + "' 2>&1";
    const int status = std::system(cmd.c_str());
    ASSERT_EQ(status, 0) << "gguf_dequant_reference.py failed (" << cmd << "):\n"
                         << (fs::exists(log) ? test::read_text(log) : std::string("(no output)"));
    ref = json::parse(test::read_text(out));
}

#define REQUIRE_GGUF_PY()                                                                                    \
    do {                                                                                                     \
        EMBEDLAB_REQUIRE_SHARED();                                                                           \
        if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)                          \
            GTEST_SKIP() << "needs /usr/bin/python3 with numpy (scripts/setup.sh --with-tests installs "     \
                            "python3-numpy)";                                                                \
    } while (0)

TEST(GgufQuants, RandomBlocksOfEveryTypeMatchGgufPy)
{
    REQUIRE_GGUF_PY();
    test::TempDir tmp;
    json ref;
    ASSERT_NO_FATAL_FAILURE(gguf_py({"random"}, tmp, ref));
    ASSERT_EQ(ref.at("cases").size(), 8u);
    for (const auto& c : ref.at("cases")) {
        const std::string hex = c.at("bytes");
        std::vector<uint8_t> bytes(hex.size() / 2);
        for (size_t i = 0; i < bytes.size(); ++i)
            bytes[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
        const int64_t n = c.at("elems");
        std::vector<float> out(static_cast<size_t>(n));
        io::dequantize_row(c.at("type").get<uint32_t>(), bytes.data(), n, out.data());
        const auto& expected = c.at("values");
        int64_t differ = 0;
        for (int64_t i = 0; i < n; ++i)
            differ +=
                !float_bits_equal(out[static_cast<size_t>(i)], expected[static_cast<size_t>(i)].get<float>());
        EXPECT_EQ(differ, 0) << c.at("name").get<std::string>() << ": values differ from gguf-py";
    }
}

class QuantisedFile : public ::testing::TestWithParam<std::string> {};

// First, second and last rows of every tensor, bit for bit as gguf-py decodes them.
TEST_P(QuantisedFile, RealBlocksMatchGgufPy)
{
    REQUIRE_GGUF_PY();
    test::TempDir tmp;
    const fs::path path = shared_dir() / "models" / "zoo" / (GetParam() + ".gguf");
    json ref;
    ASSERT_NO_FATAL_FAILURE(gguf_py({"file", path.string()}, tmp, ref));
    const auto file = io::MappedFile::open(path);
    const auto gguf = io::parse_gguf(*file);
    std::set<std::string> types;
    for (const auto& t : ref.at("tensors")) {
        const auto info = std::find_if(gguf.tensors.begin(), gguf.tensors.end(),
                                       [&](const auto& g) { return g.name == t.at("name"); });
        ASSERT_NE(info, gguf.tensors.end());
        const int64_t n = t.at("row_elems");
        const uint64_t row_bytes = io::ggml_row_bytes(info->type, n);
        types.insert(io::ggml_type_traits(info->type)->name);
        std::vector<float> out(static_cast<size_t>(n));
        for (const auto& row : t.at("rows")) {
            const uint8_t* src =
                file->data() + gguf.data_start + info->offset + row.at("row").get<uint64_t>() * row_bytes;
            io::dequantize_row(info->type, src, n, out.data());
            int64_t differ = 0;
            for (int64_t i = 0; i < n; ++i)
                differ += !float_bits_equal(out[static_cast<size_t>(i)],
                                            row.at("values")[static_cast<size_t>(i)].get<float>());
            EXPECT_EQ(differ, 0) << info->name << " row " << row.at("row");
        }
    }
    std::string list;
    for (const auto& t : types)
        list += t + " ";
    std::printf("%s: %s\n", GetParam().c_str(), list.c_str());
}

// EmbedLab (float32 activations) against llamacpp-ppl (which quantises
// activations for quantised weights) on the same file and ids: within 0.5%.
TEST_P(QuantisedFile, PerplexityMatchesLlamaCpp)
{
    EMBEDLAB_REQUIRE_SHARED();
    const json zoo = json::parse(test::read_text(shared_dir() / "reference" / "zoo.json"));
    const auto& q = zoo.at("quantized").at(GetParam()).at("ppl_ctx64_first4097");
    auto ids = read_ids_file(shared_dir() / zoo.at("ids").at("source").get<std::string>());
    ids.resize(4097);
    const auto lm =
        load_model(shared_dir() / "models" / "zoo" / (GetParam() + ".gguf"), {.need_tokenizer = false});
    const double ppl = evaluate_perplexity(*lm.model, ids, {.ctx = q.at("ctx").get<int64_t>()}).ppl;
    const double expected = q.at("ppl").get<double>();
    std::printf("%-18s EmbedLab %.6g  llamacpp-ppl %.6g  relative %+.2e\n", GetParam().c_str(), ppl, expected,
                ppl / expected - 1);
    EXPECT_NEAR(ppl / expected, 1.0, 5e-3);
}

INSTANTIATE_TEST_SUITE_P(Zoo, QuantisedFile,
                         ::testing::Values("tinyllama-q8_0", "tinyllama-q4_0", "tinyllama-q4_k_m",
                                           "qwen2-q4_k_m"),
                         test::ParamName());

} // namespace
} // namespace embedlab
