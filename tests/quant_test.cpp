// quant (issue 38): the token table in ggml's block formats. The bytes are
// llama-quantize's (--token-embedding-type, no importance matrix) byte for byte; a
// compressed directory holds exactly the bytes its accounting reports and reloads to
// the same model; a type whose blocks do not divide d is refused naming those that do.
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/model_export.hpp"
#include "embedlab/quantised_table.hpp"
#include "io/gguf_parser.hpp"
#include "io/mapped_file.hpp"
#include "io/safetensors.hpp"
#include "llama_cpp_tools.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

namespace {

using embedlab::test::TempDir;
using Json = nlohmann::json;

// Every type, with its bits per value (block scales included) and a bound on the
// relative Frobenius error of a N(0, 0.02) table.
struct TypeCase {
    const char* name;
    double bits, error;
};
const std::vector<TypeCase>& type_cases()
{
    static const std::vector<TypeCase> cases{
        {"f16", 16, 1e-3},   {"bf16", 16, 1e-2},  {"q8_0", 8.5, 0.01},    {"q6_k", 6.5625, 0.03},
        {"q5_k", 5.5, 0.05}, {"q5_1", 6, 0.05},   {"q5_0", 5.5, 0.05},    {"q4_k", 4.5, 0.1},
        {"q4_1", 5, 0.1},    {"q4_0", 4.5, 0.12}, {"q3_k", 3.4375, 0.25}, {"q2_k", 2.625, 0.5}};
    return cases;
}

// N(0, 0.02) rows, and the corners a quantizer must get right: a zero row, values
// near the smallest normal scales, an outlier, one-signed rows, a constant row.
torch::Tensor awkward_table(int64_t V, int64_t d, uint64_t seed = 3)
{
    torch::manual_seed(static_cast<int64_t>(seed));
    auto t = 0.02 * torch::randn({V, d});
    t[0].zero_();
    t[1] *= 1e-6;
    t[2][5] = 3.0;
    t[3] = -t[3].abs();
    t[4] = t[4].abs();
    t[5].fill_(0.5);
    return t.contiguous();
}

double relative_error(const torch::Tensor& a, const torch::Tensor& b)
{
    return (a - b).norm().item<double>() / b.norm().item<double>();
}

} // namespace

TEST(Quant, EveryTypeStoresItsBitsAndDequantisesWithinItsError)
{
    const int64_t V = 40, d = 256;
    const auto table = awkward_table(V, d);
    const auto rows = torch::arange(6, V); // the N(0, 0.02) rows
    for (const auto& c : type_cases()) {
        SCOPED_TRACE(c.name);
        const auto e = embedlab::quantise_table(table, c.name);
        EXPECT_EQ(e->type(), c.name);
        EXPECT_DOUBLE_EQ(e->bits_per_value(), c.bits);
        ASSERT_EQ(e->blocks().scalar_type(), torch::kUInt8);
        EXPECT_EQ(e->blocks().sizes().vec(), (std::vector<int64_t>{V, static_cast<int64_t>(d * c.bits / 8)}));
        EXPECT_EQ(e->parameter_count(), V * d);
        const auto back = e->rebuilt_rows();
        ASSERT_EQ(back.sizes().vec(), (std::vector<int64_t>{V, d}));
        const double error = relative_error(back.index_select(0, rows), table.index_select(0, rows));
        EXPECT_LT(error, c.error);
        EXPECT_GT(error, 0.0); // every type loses something on random rows
        EXPECT_TRUE(torch::equal(back[0], torch::zeros({d}))) << "a zero row stays zero";
        EXPECT_LT(relative_error(back[2], table[2]), 2 * c.error + 0.02) << "the outlier's row";
        // Lookup keeps the ids' shape; the tied head multiplies the dequantised rows.
        const auto ids = torch::tensor({{7, 0, 39}, {2, 2, 5}}, torch::kLong);
        const auto looked = e->lookup(ids);
        EXPECT_EQ(looked.sizes().vec(), (std::vector<int64_t>{2, 3, d}));
        EXPECT_TRUE(torch::equal(looked[1][2], back[5]));
        const auto hidden = torch::randn({3, d});
        EXPECT_TRUE(torch::allclose(e->project(hidden), torch::matmul(hidden, back.t()), 1e-5, 1e-6));
        EXPECT_THROW(e->lookup(torch::tensor({V}, torch::kLong)), embedlab::InputError);
    }
    // Fewer bits, more error: q8_0 < q4_0 < q2_k.
    auto error_of = [&](const char* type) {
        const auto back = embedlab::quantise_table(table, type)->rebuilt_rows();
        return relative_error(back.index_select(0, rows), table.index_select(0, rows));
    };
    EXPECT_LT(error_of("q8_0"), error_of("q4_0"));
    EXPECT_LT(error_of("q4_0"), error_of("q2_k"));
}

TEST(Quant, ATypeWhoseBlocksDoNotDivideTheWidthIsRefusedNamingThoseThatDo)
{
    auto message = [](const embedlab::CompressionRequest& r, int64_t d) {
        try {
            embedlab::check_request(r, d);
        } catch (const embedlab::InputError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    const std::string narrow = message({.model = "m", .method = "quant", .type = "q4_k"}, 64);
    EXPECT_NE(narrow.find("q4_k stores blocks of 256 values"), std::string::npos) << narrow;
    EXPECT_NE(narrow.find("d = 64"), std::string::npos) << narrow;
    EXPECT_NE(narrow.find("f16, bf16, q8_0, q5_1, q5_0, q4_1, q4_0"), std::string::npos) << narrow;
    EXPECT_NE(message({.model = "m", .method = "quant", .type = "q7"}, 64).find("'q7' is not one"),
              std::string::npos);
    EXPECT_NE(message({.model = "m", .method = "quant"}, 64).find("is required"), std::string::npos);
    EXPECT_EQ(message({.model = "m", .method = "quant", .type = "Q4_K"}, 512), "(accepted)");
    EXPECT_NE(message({.model = "m", .method = "quant", .rank = 3, .type = "q8_0"}, 64).find("rank"),
              std::string::npos);
    try {
        embedlab::quantise_table(awkward_table(8, 64), "q6_k");
        FAIL() << "q6_k quantised rows of 64";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("blocks of 256"), std::string::npos) << e.what();
    }
    auto nan = awkward_table(8, 64);
    nan[1][3] = std::nan("");
    EXPECT_THROW(embedlab::quantise_table(nan, "q8_0"), embedlab::InputError);
}

TEST(Quant, ACompressedDirectoryHoldsTheReportedBytesAndReloadsToTheSameModel)
{
    TempDir dir;
    auto c = embedlab::test::tiny_config(embedlab::Architecture::Llama);
    c.hidden_size = 64, c.vocab_size = 96;
    const auto model =
        embedlab::test::write_tiny_hf_model(dir / "tiny", c, embedlab::test::random_weights(c));
    embedlab::CompressionRequest r{.model = model.string(), .method = "quant", .type = "Q4_0"};
    for (int32_t i = 0; i < 80; ++i)
        r.eval_ids.push_back((i * 37 + 11) % 96);
    r.has_eval_ids = true;
    r.ctx = 16;
    const auto json = embedlab::request_json(r);
    EXPECT_EQ(json["type"], "Q4_0");
    const auto run = embedlab::run_compression(embedlab::request_from_json(json));
    const auto& a = run.embedding->accounting;
    EXPECT_EQ(run.embedding->spec.type, "q4_0");
    EXPECT_EQ(a.params_after, 96 * 64);
    EXPECT_DOUBLE_EQ(a.bits_per_value_before, 32);
    EXPECT_DOUBLE_EQ(a.bits_per_value_after, 4.5);
    EXPECT_DOUBLE_EQ(a.bytes_after, 96 * 36.0);         // two blocks of 18 bytes a row
    EXPECT_EQ(run.summary.bytes_after, a.bytes_after);  // the results row's bytes
    EXPECT_EQ(run.summary.bytes_before, 96 * 64 * 4.0); // the F32 table
    EXPECT_TRUE(std::isfinite(run.summary.ppl));
    EXPECT_GT(run.embedding->reconstruction.mean_cosine, 0.98);

    const auto out = dir / "q4_0";
    const auto manifest = embedlab::export_run(run, out);
    EXPECT_EQ(manifest["method"], "quant");
    EXPECT_EQ(manifest["parameters"]["type"], "q4_0");
    EXPECT_EQ(manifest["factor_tensors"]["model.embed_tokens.quant.blocks"], Json::array({96, 36}));
    EXPECT_EQ(manifest["accounting"]["storage"]["bytes_after"].get<double>(), a.bytes_after);
    const auto bytes = embedlab::test::read_text(out / "model.safetensors");
    const auto header = embedlab::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                           bytes.size(), "model.safetensors");
    bool found = false;
    for (const auto& e : header.entries)
        if (e.name == "model.embed_tokens.quant.blocks") {
            found = true;
            EXPECT_EQ(e.dtype, "U8");
            EXPECT_EQ(static_cast<double>(e.end - e.begin), a.bytes_after);
        }
    EXPECT_TRUE(found);

    auto reloaded = embedlab::load_model(out, {.need_tokenizer = false});
    const auto* q =
        dynamic_cast<const embedlab::QuantisedTokenEmbedding*>(&reloaded.model->token_embedding());
    ASSERT_NE(q, nullptr) << reloaded.model->token_embedding().kind();
    const auto* fitted =
        dynamic_cast<const embedlab::QuantisedTokenEmbedding*>(run.embedding->embedding.get());
    EXPECT_TRUE(torch::equal(q->blocks(), fitted->blocks()));
    const std::vector<int32_t> ids(r.eval_ids.begin(), r.eval_ids.end());
    const auto again = embedlab::evaluate_perplexity(*reloaded.model, ids, {.ctx = 16});
    EXPECT_NEAR(again.ppl, run.summary.ppl, 1e-9 * run.summary.ppl);
}

// The bytes llama-quantize writes for token_embd, for every type, on the zoo's qwen2
// (width 256, the K-types' block) with the awkward rows first: quantise_table gives
// the same bytes.
TEST(Quant, BytesAreLlamaQuantizesForEveryType)
{
    namespace fs = std::filesystem;
    const fs::path zoo = embedlab::test::shared_dir() / "models" / "zoo" / "qwen2";
    if (!embedlab::test::have_llama_cpp() || !fs::exists(zoo / "config.json"))
        GTEST_SKIP() << "needs ../shared/tools/llama.cpp (llama-quantize) and ../shared/models/zoo/qwen2";
    TempDir dir;
    const fs::path model = dir / "qwen2";
    fs::create_directories(model);
    for (const auto& e : fs::directory_iterator(zoo))
        if (e.path().filename() != "model.safetensors")
            fs::copy_file(e.path(), model / e.path().filename());
    auto weights = embedlab::load_safetensors(zoo / "model.safetensors");
    auto table = weights.at("model.embed_tokens.weight").to(torch::kFloat32).contiguous();
    table.narrow(0, 0, 6).copy_(awkward_table(6, table.size(1), 11));
    weights["model.embed_tokens.weight"] = table;
    std::vector<std::pair<std::string, torch::Tensor>> tensors(weights.begin(), weights.end());
    embedlab::write_safetensors(model / "model.safetensors", tensors, {{"format", "pt"}});
    const auto f32 = dir / "f32.gguf";
    embedlab::export_gguf(embedlab::load_model(model), f32, {.type = embedlab::GgufExportType::F32});
    for (const auto& t : type_cases()) {
        SCOPED_TRACE(t.name);
        const auto out = dir / (std::string(t.name) + ".gguf");
        const auto log = dir / "log.txt";
        const std::string command = embedlab::test::llama_cpp_command("llama-quantize") +
                                    " --token-embedding-type " + t.name + " --output-tensor-type " + t.name +
                                    " '" + f32.string() + "' '" + out.string() + "' F32 " +
                                    embedlab::test::llama_cpp_threads() + " > '" + log.string() + "' 2>&1";
        ASSERT_EQ(std::system(command.c_str()), 0) << embedlab::test::read_text(log);
        const auto file = embedlab::io::MappedFile::open(out);
        const auto gguf = embedlab::io::parse_gguf(*file);
        const auto ours = embedlab::quantise_table(table, t.name);
        std::string upper = t.name;
        for (char& ch : upper)
            ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        bool found = false;
        for (const auto& info : gguf.tensors) {
            if (info.name != "token_embd.weight")
                continue;
            found = true;
            ASSERT_EQ(embedlab::io::ggml_type_name(info.type), upper)
                << "llama-quantize wrote another type:\n"
                << embedlab::test::read_text(log);
            const auto& blocks = ours->blocks();
            const uint8_t* theirs = file->data() + gguf.data_start + info.offset;
            int64_t differing_rows = 0, first = -1;
            for (int64_t v = 0; v < blocks.size(0); ++v)
                if (std::memcmp(blocks[v].data_ptr<uint8_t>(), theirs + v * blocks.size(1), blocks.size(1)) !=
                    0) {
                    first = first < 0 ? v : first;
                    ++differing_rows;
                }
            EXPECT_EQ(differing_rows, 0) << "of " << blocks.size(0) << " rows, the first " << first;
        }
        EXPECT_TRUE(found);
    }
}
