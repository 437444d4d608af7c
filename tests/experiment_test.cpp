// The experiment API (experiment.hpp, experiment_request.hpp): the registry, the
// request's JSON form (the compress job's schema) and its checks, runs of every
// method on the bundled model, a job equal to the direct call, and export from
// memory loading back with the run's perplexity.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <chrono>
#include <tuple>

#include <gtest/gtest.h>

#include "embedlab/eval.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/job.hpp"
#include "embedlab/masked_lm.hpp"
#include "embedlab/resources.hpp"
#include "embedlab/table_method.hpp"
#include "embedlab/tasks.hpp"
#include "embedlab/tokenizer.hpp"
#include "test_support.hpp"

using embedlab::CompressionRequest;
using embedlab::test::TempDir;
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

std::string model()
{
    return embedlab::default_model_path().string();
}

std::string sample()
{
    return embedlab::default_sample_text_path().string();
}

// One short request per method, evaluated on the first 256 ids of the sample.
CompressionRequest request_for(const std::string& method)
{
    CompressionRequest r{.model = model(), .method = method};
    if (method == "pca" || method == "svd")
        r.rank = 8;
    else if (method == "tt")
        r.eps = 0.4;
    else if (method == "tucker")
        r.shape = {8, 16}, r.ranks = {4, 8};
    else if (method.rfind("lle", 0) == 0)
        r.freq_text = sample(), r.keep_ratio = 0.5, r.k = method == "lle-unk" ? 0 : 4;
    else if (method == "fourier")
        r.steps = 10;
    else if (method == "quant")
        r.type = "q8_0";
    else if (method == "aq")
        r.codebooks = 8, r.codewords = 16, r.steps = 20;
    else if (method == "flat")
        r.remaining = 0.5, r.calib_text = sample(), r.samples = 4, r.seqlen = 32;
    r.eval_text = sample();
    r.eval_tokens = 256;
    r.ctx = 64;
    return r;
}

// Every tensor's bytes in a safetensors file (its header excluded).
double data_bytes(const fs::path& file)
{
    const auto bytes = embedlab::test::read_text(file);
    const auto header = embedlab::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                           bytes.size(), file.string());
    double total = 0;
    for (const auto& e : header.entries)
        total += static_cast<double>(e.end - e.begin);
    return total;
}

// The run of request_for(method), fitted once per process for the methods two cases
// check (lle and flat: EveryMethodRunsAndItsNumbersAgree and AJobRunsTheSameRequest each
// fitted them); the request is the same, so is the run.
const embedlab::CompressionRun& run_shared_by_cases(const std::string& method)
{
    static std::map<std::string, embedlab::CompressionRun> runs;
    auto found = runs.find(method);
    if (found == runs.end())
        found = runs.emplace(method, embedlab::run_compression(request_for(method))).first;
    return found->second;
}

bool run_is_shared(const std::string& method)
{
    return method == "lle" || method == "flat";
}

} // namespace

TEST(MethodRegistry, NamesAreUniqueAndLookedUp)
{
    std::set<std::string> names;
    for (const auto& m : embedlab::method_registry()) {
        EXPECT_TRUE(names.insert(m.name).second) << m.name;
        EXPECT_EQ(&embedlab::method_descriptor(m.name), &embedlab::method_descriptor(m.id));
    }
    EXPECT_EQ(names.size(), 11u);
    EXPECT_EQ(embedlab::method_names(),
              "pca, svd, tt, tucker, lle, lle-unk, lle-pca, fourier, quant, aq, flat");
    try {
        embedlab::method_descriptor("zip");
        FAIL() << "an unknown method was found";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("unknown method 'zip'"), std::string::npos) << e.what();
    }
}

// Every token-embedding method of the registry has its one TableMethod; flat (attention
// values) has none; an unknown name is an error everywhere, never read as another method.
TEST(MethodRegistry, EveryTableMethodHasOneImplementationAndUnknownNamesAreErrors)
{
    for (const auto& m : embedlab::method_registry()) {
        int found = 0;
        for (const auto* t : embedlab::table_methods())
            found += t->name() == m.name;
        EXPECT_EQ(found, m.part == embedlab::CompressedPart::TokenEmbedding ? 1 : 0) << m.name;
        if (m.part == embedlab::CompressedPart::TokenEmbedding) {
            EXPECT_EQ(embedlab::table_method(m.name).name(), m.name) << m.name;
        }
    }
    EXPECT_EQ(embedlab::table_methods().size(), embedlab::compression_methods().size());
    auto message = [](auto&& f) {
        try {
            f();
        } catch (const embedlab::InputError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    EXPECT_NE(
        message([] { embedlab::table_method("flat"); }).find("the attention values, not the token embedding"),
        std::string::npos);
    // Before, spec_json wrote an unknown method's "rank" as if it were pca, and
    // accounting_json left its fields out as if it were fourier.
    EXPECT_NE(message([] { embedlab::spec_json({.method = "zip", .rank = 3}); }).find("unknown method 'zip'"),
              std::string::npos);
    embedlab::EmbeddingAccounting a;
    a.method = "zip";
    EXPECT_NE(message([&] { embedlab::accounting_json(a); }).find("unknown method 'zip'"), std::string::npos);
    EXPECT_EQ(embedlab::spec_json({.method = "lrf", .rank = 3})["rank"], 3); // finetune --from-scratch
    const torch::Tensor table = torch::randn({64, 8});
    EXPECT_NE(message([&] {
                  embedlab::compress_table(table, {.method = "zip", .rank = 2});
              }).find("unknown method"),
              std::string::npos);
}

// Each row's fields are the request's (a typo would never apply), each field is one
// method family's or shared, and a field outside every row is refused for every method.
TEST(MethodRegistry, EveryRowsFieldsAreRequestFieldsWithTheirChecks)
{
    const auto& all = embedlab::request_fields();
    for (const auto& m : embedlab::method_registry()) {
        EXPECT_TRUE(m.check && m.describe) << m.name;
        for (const auto& f : m.fields)
            EXPECT_NE(std::find(all.begin(), all.end(), f), all.end()) << m.name << ": " << f;
        if (m.part == embedlab::CompressedPart::TokenEmbedding) {
            EXPECT_NE(std::string(m.stored_as), "") << m.name;
        }
    }
    // tt's eps given to lle: refused, naming the field and the method.
    try {
        embedlab::check_request({.model = "m", .method = "lle", .eps = 0.5, .freq_text = "t", .k = 2});
        FAIL() << "lle took tt's eps";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("eps does not apply to method lle"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(embedlab::describe_request({.method = "tucker", .shape = {4, 4}, .ranks = {2, 3}}),
              "tucker 4x4 ranks 2,3");
}

// Issue 59: a method field's doc (what the help and the GUI's boxes show) is the range
// check_request holds it to: each end passes, a step beyond it is refused naming the
// field; every field has a label and a help line; the example is a valid request
// holding every required field.
TEST(MethodRegistry, FieldDocsAreTheRangesTheChecksHold)
{
    constexpr int64_t d = 768;
    auto request_of = [](const Json& j) {
        CompressionRequest r;
        for (const auto& [k, v] : j.items())
            embedlab::set_request_field(r, k, v);
        return r;
    };
    auto refused_naming = [&](const Json& j, const std::string& field) {
        try {
            embedlab::check_request(request_of(j), d);
        } catch (const embedlab::InputError& e) {
            return std::string(e.what()).find(field) != std::string::npos;
        }
        return false;
    };
    int ranged = 0;
    for (const auto& m : embedlab::method_registry()) {
        SCOPED_TRACE(m.name);
        ASSERT_FALSE(m.example.empty());
        Json base = Json::parse(m.example);
        base["model"] = "m";
        base["method"] = m.name;
        EXPECT_NO_THROW(embedlab::check_request(request_of(base), d)) << base.dump();
        for (const auto& f : m.fields) {
            const auto& doc = embedlab::method_field_doc(m, f);
            EXPECT_FALSE(doc.label.empty() || doc.help.empty()) << f;
            EXPECT_TRUE(!doc.required || base.contains(f)) << f << " is required: the example lacks it";
            if (!doc.ranged)
                continue;
            ++ranged;
            Json with = base;
            if (!doc.applies_with.empty()) {
                const Json others = Json::parse(doc.applies_with);
                for (const auto& [k, v] : others.items())
                    with[k] = v;
            }
            const bool integer = embedlab::request_field_type(f) == embedlab::RequestFieldType::Integer;
            const double hi = doc.hi_is_width ? double(d) : doc.hi;
            const double step = integer ? 1 : std::max(1e-9, std::abs(hi) * 1e-9);
            const double lo_step = integer ? 1 : std::max(1e-9, std::abs(doc.lo) * 1e-9);
            auto at = [&](double v) {
                Json j = with;
                j[f] = integer ? Json(int64_t(v)) : Json(v);
                return j;
            };
            const double first = doc.lo_open ? doc.lo + lo_step : doc.lo;
            const double last = doc.hi_open ? hi - step : hi;
            for (double v : {first, last}) {
                EXPECT_TRUE(embedlab::field_value_allowed(doc, at(v)[f], d)) << f << " " << v;
                EXPECT_NO_THROW(embedlab::check_request(request_of(at(v)), d)) << at(v).dump();
            }
            double below = doc.lo_open ? doc.lo : doc.lo - lo_step;
            if (below == 0 && !doc.zero.empty())
                below = -lo_step; // 0 means something of its own
            const double above = doc.hi_open ? hi : hi + step;
            for (double v : {below, above}) {
                EXPECT_FALSE(embedlab::field_value_allowed(doc, at(v)[f], d)) << f << " " << v;
                EXPECT_TRUE(refused_naming(at(v), f)) << at(v).dump();
            }
        }
    }
    EXPECT_GE(ranged, 30);
    EXPECT_EQ(embedlab::field_range_text(embedlab::default_field_doc("keep_ratio")), "(0, 1]");
    EXPECT_EQ(embedlab::field_range_text(embedlab::default_field_doc("rank"), 768), "1..768");
    EXPECT_EQ(embedlab::field_range_text(embedlab::default_field_doc("nlist")), "0 (automatic) or 1..2^31");
    EXPECT_EQ(embedlab::field_range_text(embedlab::default_field_doc("knn")), "exact|ivf");
}

// A sweep's option values as a map (what embedlab-cli sweep's flags hold).
class MapSweepValues : public embedlab::SweepValues {
public:
    explicit MapSweepValues(std::map<std::string, std::string> v) : v_(std::move(v)) {}
    bool has(const std::string& o) const override { return v_.count(o) > 0; }
    std::vector<int64_t> integers(const std::string& o, int64_t, int64_t) const override
    {
        std::vector<int64_t> out;
        for (const auto& w : words(o))
            out.push_back(std::stoll(w));
        return out;
    }
    std::vector<double> numbers(const std::string& o, double, double) const override
    {
        std::vector<double> out;
        for (const auto& w : words(o))
            out.push_back(std::stod(w));
        return out;
    }
    std::vector<std::vector<int64_t>> integer_sets(const std::string& o, int64_t lo,
                                                   int64_t hi) const override
    {
        std::vector<std::vector<int64_t>> out;
        std::stringstream in(has(o) ? v_.at(o) : "");
        std::string part;
        while (std::getline(in, part, ':'))
            out.push_back(MapSweepValues(std::map<std::string, std::string>{{o, part}}).integers(o, lo, hi));
        return out;
    }
    std::vector<std::string> words(const std::string& o) const override
    {
        std::vector<std::string> out;
        std::stringstream in(has(o) ? v_.at(o) : "");
        std::string part;
        while (std::getline(in, part, ','))
            out.push_back(part);
        return out;
    }

private:
    std::map<std::string, std::string> v_;
};

// Each method's sweep grammar (issue 37) lives in its registry row: the settings it
// expands to are checkable requests, and a missing list is named.
TEST(MethodRegistry, EachSweepGrammarExpandsToCheckedRequests)
{
    const int64_t d = 64;
    auto settings = [&](const std::string& method, std::map<std::string, std::string> values) {
        embedlab::CompressionRequest base{.model = "m", .method = method};
        if (embedlab::method_descriptor(method).needs_frequency_text)
            base.freq_text = "f.txt";
        auto out =
            embedlab::method_descriptor(method).sweep.settings(MapSweepValues(std::move(values)), base, d);
        for (const auto& r : out)
            EXPECT_NO_THROW(embedlab::check_request(r, d)) << embedlab::request_json(r).dump();
        return out;
    };
    const auto pca = settings("pca", {{"--ranks", "4,16"}});
    ASSERT_EQ(pca.size(), 2u);
    EXPECT_EQ(pca[1].rank, 16);
    // tt: a uniform inner rank is clipped to each position's cap (4x16: cap 4), and eps
    // values are settings of their own.
    const auto tt = settings("tt", {{"--shapes", "4,16:8,8"}, {"--ranks", "8"}});
    ASSERT_EQ(tt.size(), 2u);
    EXPECT_EQ(tt[0].ranks, (std::vector<int64_t>{1, 4, 1}));
    EXPECT_EQ(tt[1].ranks, (std::vector<int64_t>{1, 8, 1}));
    const auto eps = settings("tt", {{"--shape", "8,8"}, {"--eps", "0.3,0.5"}, {"--uniform-ranks", ""}});
    ASSERT_EQ(eps.size(), 2u);
    EXPECT_EQ(eps[1].eps, 0.5);
    EXPECT_TRUE(eps[1].uniform_ranks);
    // tucker: a set of one value is the uniform rank min(r, I_k).
    const auto tucker = settings("tucker", {{"--shape", "4,16"}, {"--ranks", "8:2,3"}});
    ASSERT_EQ(tucker.size(), 2u);
    EXPECT_EQ(tucker[0].ranks, (std::vector<int64_t>{4, 8}));
    EXPECT_EQ(tucker[1].ranks, (std::vector<int64_t>{2, 3}));
    // lle: keep ratios x ks; lle-unk needs no k.
    EXPECT_EQ(settings("lle", {{"--keep-ratios", "0.5,1"}, {"--ks", "1,3"}}).size(), 4u);
    EXPECT_EQ(settings("lle-unk", {{"--keep-ratios", "0.5"}}).size(), 1u);
    EXPECT_EQ(settings("quant", {{"--types", "q8_0,f16"}})[1].type, "f16");
    // A missing list is named, per method.
    for (const auto& [method, needs] :
         std::vector<std::pair<std::string, std::string>>{{"pca", "--ranks"},
                                                          {"tt", "--ranks"},
                                                          {"tucker", "--ranks"},
                                                          {"lle", "--keep-ratios"},
                                                          {"quant", "--types"}}) {
        try {
            settings(method, {});
            FAIL() << method << " swept nothing";
        } catch (const embedlab::InputError& e) {
            EXPECT_NE(std::string(e.what()).find(needs), std::string::npos) << e.what();
        }
    }
    EXPECT_FALSE(embedlab::method_descriptor("fourier").sweep.settings); // no sweep: compress per setting
}

TEST(CompressionRequestJson, EveryMethodRoundTrips)
{
    for (const auto& m : embedlab::method_registry()) {
        auto r = request_for(m.name);
        r.lora_rank = m.lora ? 4 : 0;
        r.train_text = m.lora ? sample() : "";
        r.seed = 7;
        const Json j = embedlab::request_json(r);
        EXPECT_EQ(j["method"], m.name);
        const auto back = embedlab::request_from_json(j);
        EXPECT_EQ(embedlab::request_json(back), j) << m.name;
        // A field the method does not take is refused, naming it.
        Json extra = j;
        extra[m.id == embedlab::Method::PCA || m.id == embedlab::Method::SVD ? "remaining" : "rank"] = 3;
        EXPECT_THROW(embedlab::request_from_json(extra), embedlab::InputError) << m.name;
    }
    // Token ids travel as ids.
    CompressionRequest ids{.model = "m", .method = "pca", .rank = 2};
    ids.eval_ids = {5, 6, 7};
    ids.has_eval_ids = true;
    const auto back = embedlab::request_from_json(embedlab::request_json(ids));
    EXPECT_EQ(back.eval_ids, ids.eval_ids);
    EXPECT_TRUE(back.has_eval_ids);
}

TEST(CompressionRequestJson, BadFieldsAreNamed)
{
    const std::vector<std::pair<std::string, std::string>> bad{
        {R"({"model": "m", "method": "pca"})", "rank"},
        {R"({"model": "m", "method": "pca", "rank": 3.5})", "rank"},
        {R"({"model": "m", "method": "tt", "eps": 1.5})", "eps"},
        {R"({"model": "m", "method": "tt", "shape": [4, 32], "ranks": [1, 2]})", "ranks"},
        {R"({"model": "m", "method": "lle", "k": 4})", "freq_text"},
        {R"({"model": "m", "method": "lle", "freq_text": "t", "k": 4, "keep_ratio": 0})", "keep_ratio"},
        {R"({"model": "m", "method": "fourier", "steps": 0})", "steps"},
        {R"({"model": "m", "method": "fourier", "steps": 5, "mlp": "relu"})", "mlp"},
        {R"({"model": "m", "method": "flat", "remaining": 0.5})", "calib_text"},
        {R"({"model": "m", "method": "flat", "remaining": 2, "calib_text": "t"})", "remaining"},
        {R"({"model": "m", "method": "flat", "remaining": 0.5, "calib_text": "t", "lora_rank": 2})",
         "lora_rank"},
        {R"({"model": "m", "method": "pca", "rank": 2, "lora_rank": 2})", "train_text"},
        {R"({"model": "m", "method": "pca", "rank": 2, "eval_ids": [1, -2]})", "eval_ids"},
        {R"({"model": "m", "method": "pca", "rank": 2, "eval_ids": [1, 2], "eval_text": "t"})", "eval_ids"},
        {R"({"model": "m", "method": "pca", "rank": 2, "ctx": 8, "stride": 9})", "stride"},
        {R"({"model": "m", "method": "zip"})", "pca, svd, tt"},
        {R"({"model": "m", "method": "pca", "rank": 2, "device": "pi"})", "raspberry-pi-5, a100-server"},
        {R"({"model": "m", "method": "pca", "rank": 2, "device": "raspberry-pi-5", "nu": 3})", "device"},
        {R"({"model": "m", "method": "pca", "rank": 2, "tau": -1})", "tau"},
        {R"({"model": "m", "method": "lle", "freq_text": "t", "k": 4, "keep_ratio": 0.5, "nu": 3})", "nu"},
        {R"({"method": "pca", "rank": 2})", "model"},
    };
    for (const auto& [text, field] : bad) {
        try {
            embedlab::request_from_json(Json::parse(text));
            ADD_FAILURE() << text << ": accepted, expected an error naming " << field;
        } catch (const embedlab::InputError& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << text << ": " << e.what();
        }
    }
    // Checked against d: a rank beyond the model's hidden size.
    EXPECT_THROW(embedlab::check_request({.model = "m", .method = "pca", .rank = 129}, 128),
                 embedlab::InputError);
    EXPECT_NO_THROW(embedlab::check_request({.model = "m", .method = "pca", .rank = 128}, 128));
    // A compress job refuses a field that is neither the request's nor the job's.
    EXPECT_THROW(embedlab::check_job(Json::parse(R"({"kind": "compress", "model": "m", "method": "pca",
                                                     "rank": 2, "rnak": 3})")),
                 embedlab::InputError);
}

TEST(RunCompression, EveryMethodRunsAndItsNumbersAgree)
{
    // The independent reference, loaded once (it is the same for every method): the original
    // model, the scored ids, their perplexity and their bytes, each byte-level BPE token
    // decoded on its own (bits per byte, issue 60).
    auto lm = embedlab::load_model(model());
    auto ids = lm.tokenizer->encode(embedlab::read_text_file(sample()));
    ids.resize(256);
    const double original_ppl = embedlab::evaluate_perplexity(*lm.model, ids, {.ctx = 64}).ppl;
    double bytes = 0;
    for (size_t i = 1; i < ids.size(); ++i)
        bytes += double(lm.tokenizer->decode(std::span(ids).subspan(i, 1)).size());
    for (const auto& m : embedlab::method_registry()) {
        const auto fitted = run_is_shared(m.name) ? std::optional<embedlab::CompressionRun>()
                                                  : embedlab::run_compression(request_for(m.name));
        const auto& run = fitted ? *fitted : run_shared_by_cases(m.name);
        const auto& s = run.summary;
        EXPECT_EQ(s.method, m.name);
        EXPECT_GT(s.params_before, 0) << m.name;
        EXPECT_DOUBLE_EQ(s.ratio, double(s.params_after) / double(s.params_before)) << m.name;
        EXPECT_EQ(s.eval_tokens, run.evaluation["tokens"].get<int64_t>()) << m.name;
        EXPECT_EQ(run.evaluation["first_ids"], 256) << m.name;
        EXPECT_DOUBLE_EQ(s.ppl, run.evaluation["compressed"]["ppl"].get<double>()) << m.name;
        EXPECT_NEAR(s.delta_ln_ppl, std::log(s.ppl) - std::log(s.ppl_original), 1e-12) << m.name;
        if (m.part == embedlab::CompressedPart::AttentionValues)
            EXPECT_TRUE(std::isnan(s.mean_cosine)) << m.name;
        else
            EXPECT_DOUBLE_EQ(s.mean_cosine, run.embedding->reconstruction.mean_cosine) << m.name;
        // The perplexity is the compressed model's, recomputed independently here.
        const auto again = embedlab::evaluate_perplexity(run.compressed_model(), ids, {.ctx = 64});
        EXPECT_NEAR(again.ppl, s.ppl, 1e-9 * s.ppl) << m.name;
        EXPECT_NEAR(original_ppl, s.ppl_original, 1e-9 * s.ppl_original) << m.name;
        // Bits per byte (issue 60): the scored ids' NLL in bits over their bytes.
        const double bits = double(s.eval_tokens) / std::log(2.0) / bytes;
        EXPECT_NEAR(s.bits_per_byte, std::log(s.ppl) * bits, 1e-9 * s.bits_per_byte) << m.name;
        EXPECT_NEAR(s.bits_per_byte_original, std::log(s.ppl_original) * bits, 1e-9 * s.bits_per_byte)
            << m.name;
        EXPECT_EQ(run.evaluation["scored_bytes"], int64_t(bytes)) << m.name;
    }
}

// SentencePiece drops the text's leading space (its dummy prefix) and writes a space
// as part of the next piece: the scored bytes are the text's less its first piece's.
TEST(BitsPerByte, AreTheScoredTextsBytesUnderSentencePiece)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto tokenizer =
        embedlab::load_sentencepiece(embedlab::test::shared_dir() / "models/tinyllama/tokenizer.model");
    const std::string text = "Hello world. Once upon a time, a caf\u00e9 sold t\u00e9 \xe2\x9c\x93 at noon.";
    const auto ids = tokenizer->encode(text);
    ASSERT_GE(ids.size(), 4u);
    ASSERT_EQ(tokenizer->decode(ids), text);
    embedlab::PerplexityResult r{.tokens = int64_t(ids.size()) - 1, .nll_per_token = 1.0};
    embedlab::add_bits_per_byte(r, ids, *tokenizer);
    EXPECT_EQ(r.scored_bytes, int64_t(text.size()) - 5) << "all but \"Hello\"";
    EXPECT_NEAR(r.bits_per_byte, double(r.tokens) / std::log(2.0) / double(r.scored_bytes), 1e-12);
    // One id: nothing is scored, nothing is claimed.
    embedlab::PerplexityResult none{.tokens = 0};
    embedlab::add_bits_per_byte(none, std::span(ids).first(1), *tokenizer);
    EXPECT_EQ(none.scored_bytes, 0);
    EXPECT_TRUE(std::isnan(none.bits_per_byte));
}

// Issue 19: the run records how the input stored its table: the bundled model is
// F16 (16 bits a value, the factors 32), a quantised GGUF's table Q6_K.
TEST(RunCompression, RecordsTheTablesBitsPerStoredValue)
{
    auto request = request_for("pca");
    request.eval_text.clear();
    const auto f16 = embedlab::run_compression(request);
    const auto& a = f16.embedding->accounting;
    EXPECT_EQ(a.stored_type_before, "F16");
    EXPECT_DOUBLE_EQ(a.bits_per_value_before, 16);
    EXPECT_DOUBLE_EQ(a.bits_per_value_after, 32);
    EXPECT_NEAR(a.bytes_ratio, 2 * a.ratio, 1e-12);

    const auto gguf = embedlab::test::shared_dir() / "models" / "zoo" / "qwen2-q4_k_m.gguf";
    if (!fs::exists(gguf))
        GTEST_SKIP() << gguf << " absent (../shared): the quantised case is not checked";
    request.model = gguf.string();
    request.rank = 16;
    const auto q = embedlab::run_compression(request);
    const auto& b = q.embedding->accounting;
    EXPECT_EQ(b.stored_type_before, "Q6_K");
    EXPECT_DOUBLE_EQ(b.bits_per_value_before, 6.5625);
    EXPECT_NEAR(b.bytes_ratio, b.ratio * 32 / 6.5625, 1e-12);
    EXPECT_EQ(embedlab::run_json(q)["accounting"]["storage"]["stored_type_before"], "Q6_K");
}

// divergence: KL(P_original || P_model) and top-1 agreement over the evaluated tokens,
// the same numbers eval --reference gives; a lossless compression diverges by nothing.
TEST(RunCompression, DivergenceFromTheOriginal)
{
    auto lossless = request_for("pca");
    lossless.rank = 128; // = d
    lossless.divergence = true;
    const auto same = embedlab::run_compression(lossless);
    EXPECT_LT(same.summary.kl_mean, 1e-6);
    EXPECT_EQ(same.summary.top1_agreement, 1.0);
    EXPECT_EQ(same.evaluation["divergence"]["tokens"], same.evaluation["tokens"]);
    // Independently: the original loaded afresh (once) against each run's compressed model.
    auto lm = embedlab::load_model(model());
    auto ids = lm.tokenizer->encode(embedlab::read_text_file(sample()));
    ids.resize(256);
    for (const std::string method : {"pca", "flat"}) {
        auto request = request_for(method);
        request.divergence = true;
        const auto run = embedlab::run_compression(request);
        const auto& d = run.evaluation["divergence"];
        EXPECT_GT(run.summary.kl_mean, 1e-5) << method; // flat at 0.5 on tinygpt2: 6e-5
        EXPECT_LT(run.summary.top1_agreement, 1.0) << method;
        EXPECT_EQ(d["kl_mean"].get<double>(), run.summary.kl_mean) << method;
        // llama.cpp's statistics go into the record too (issue 39).
        for (const char* key :
             {"kl_mean_uncertainty", "kl_p999", "kl_min", "delta_p_rms", "delta_p_p01",
              "top1_agreement_uncertainty", "ln_ppl_correlation", "delta_ln_ppl_uncertainty"})
            EXPECT_TRUE(d.contains(key) && d[key].is_number()) << method << ": " << key;
        const auto again = embedlab::evaluate_divergence(run.compressed_model(), *lm.model, ids, {.ctx = 64});
        EXPECT_NEAR(again.kl_mean, run.summary.kl_mean, 1e-9) << method;
        EXPECT_EQ(again.top1_agreement, run.summary.top1_agreement) << method;
    }
    auto without_eval = request_for("pca");
    without_eval.divergence = true;
    without_eval.eval_text.clear();
    try {
        embedlab::run_compression(without_eval);
        FAIL() << "divergence without an evaluation was accepted";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("divergence"), std::string::npos) << e.what();
    }
}

TEST(RunCompression, AJobRunsTheSameRequest)
{
    for (const std::string method : {"lle", "flat"}) {
        const auto request = request_for(method);
        const auto& direct = run_shared_by_cases(method);
        Json job = embedlab::request_json(request);
        job["kind"] = "compress";
        const auto result = embedlab::run_job(job);
        EXPECT_EQ(result["summary"]["parameters"], direct.summary.parameters) << method;
        EXPECT_EQ(result["summary"]["params_after"], direct.summary.params_after) << method;
        EXPECT_DOUBLE_EQ(result["summary"]["ppl"].get<double>(), direct.summary.ppl) << method;
        EXPECT_EQ(result["record"]["evaluation"]["tokens"], direct.evaluation["tokens"]) << method;
    }
}

TEST(ExportRun, WritesFromMemoryAndLoadsBackWithTheRunsPerplexity)
{
    TempDir dir;
    for (const std::string method : {"pca", "lle", "flat"}) {
        const auto run = embedlab::run_compression(request_for(method));
        const auto out = dir / method;
        const auto manifest = embedlab::export_run(run, out);
        EXPECT_EQ(manifest["evaluation"], run.evaluation) << method;
        auto back = embedlab::load_model(out);
        auto ids = back.tokenizer->encode(embedlab::read_text_file(sample()));
        ids.resize(256);
        EXPECT_NEAR(embedlab::evaluate_perplexity(*back.model, ids, {.ctx = 64}).ppl, run.summary.ppl,
                    1e-6 * run.summary.ppl)
            << method;
        // Replacing: a model we wrote, yes; anything else, the input above all, never.
        EXPECT_THROW(embedlab::export_run(run, out), embedlab::InputError);
        EXPECT_NO_THROW(embedlab::export_run(run, out, {.overwrite = true}));
        if (method != "pca")
            continue;
        // Nor a directory EmbedLab did not write (the pca run again: one fit less).
        fs::create_directory(dir / "mine");
        std::ofstream(dir / "mine" / "notes.txt") << "keep me";
        try {
            embedlab::export_run(run, dir / "mine", {.overwrite = true});
            ADD_FAILURE() << "replaced a directory EmbedLab did not write";
        } catch (const embedlab::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("not written by EmbedLab"), std::string::npos) << e.what();
        }
        EXPECT_TRUE(fs::exists(dir / "mine" / "notes.txt"));
    }
}

// Issue 36 item 1: for every method, the stored values and bytes the accounting
// reports are the elements and bytes of the compressed part's tensors in the written
// model.safetensors (header excluded). Before, tt's per-token cores were written
// padded to each position's largest rank and lle's ids as int64 (with the rare list
// besides, uncounted), while only each token's own values, at 4 bytes, were counted.
TEST(ExportRun, StoredBytesAndValuesAreWhatTheFileHolds)
{
    TempDir dir;
    std::vector<CompressionRequest> requests;
    for (const auto& m : embedlab::method_registry())
        if (m.part == embedlab::CompressedPart::TokenEmbedding)
            requests.push_back(request_for(m.name)); // tt: eps, each token its own ranks
    auto tt_uniform = request_for("tt");
    tt_uniform.uniform_ranks = true;
    auto tt_ranks = request_for("tt");
    tt_ranks.eps = 0, tt_ranks.shape = {8, 16}, tt_ranks.ranks = {1, 5, 1};
    requests.push_back(tt_uniform);
    requests.push_back(tt_ranks);
    // gpt2's position table compressed beside the tokens (issue 62 item 5): the export
    // writes its factors in place of wpe.weight, and the row's model bytes count them.
    for (const auto& m : embedlab::method_registry())
        if (m.positions) {
            auto r = request_for(m.name);
            r.positions = true;
            requests.push_back(r);
        }
    int index = 0;
    // Stored types (issue 38 part 2): float32 factors, and every method's factors at
    // --store f16 (every float factor) and q8_0 (those whose rows blocks of 32 divide).
    for (const std::string store : {"f32", "f16", "q8_0"}) {
        for (auto r : requests) {
            SCOPED_TRACE(r.method + " " + store + (r.uniform_ranks ? " uniform" : "") +
                         (r.ranks.empty() ? "" : " ranks") + (r.positions ? " positions" : ""));
            const auto& fields = embedlab::method_descriptor(r.method).fields;
            if (store != "f32" && std::find(fields.begin(), fields.end(), "store") == fields.end())
                continue; // quant: the table itself is stored at its type
            if (store != "f32")
                r.store = store;
            r.eval_text.clear();
            const auto run = embedlab::run_compression(r);
            const auto out = dir / std::to_string(index++);
            embedlab::export_run(run, out);
            const auto manifest = Json::parse(embedlab::test::read_text(out / "embedlab.json"));
            const auto bytes = embedlab::test::read_text(out / "model.safetensors");
            const auto header = embedlab::parse_safetensors_header(
                reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "model.safetensors");
            int64_t elements = 0;
            double stored = 0;
            size_t found = 0;
            const Json stored_types = manifest.value("stored_types", Json::object());
            for (const auto& e : header.entries) {
                if (!manifest["factor_tensors"].contains(e.name) || e.name.starts_with("wpe."))
                    continue; // the token table's own factors (wpe.*: the positions')
                ++found;
                int64_t n = 1; // the values the tensor holds (a stored one's file tensor is bytes)
                for (const int64_t s : manifest["factor_tensors"][e.name].get<std::vector<int64_t>>())
                    n *= s;
                if (e.name.ends_with("aq.codes")) // M codes a row, packed at log2 K bits
                    n = e.shape[0] * manifest["parameters"]["codebooks"].get<int64_t>();
                elements += n;
                stored += static_cast<double>(e.end - e.begin);
                if (stored_types.contains(e.name))
                    EXPECT_EQ(e.dtype, "U8") << e.name;
                else if (store == "f16" && e.dtype == "F32")
                    ADD_FAILURE() << e.name << " is a float factor f16 stores, left F32";
            }
            ASSERT_EQ(found, manifest["factor_tensors"].size());
            // The whole model as stored: the input's weights (f16 here, kept at f16 by the
            // export) with the table's bytes replaced, every byte of the written file.
            EXPECT_EQ(run.summary.model_bytes_before, data_bytes(fs::path(model()) / "model.safetensors"));
            EXPECT_EQ(run.summary.model_bytes_after, data_bytes(out / "model.safetensors"));
            if (store == "f16") {
                EXPECT_FALSE(stored_types.empty());
            }
            if (store != "f32") { // reloaded, every row is the one the run was evaluated with
                auto back = embedlab::load_model(out);
                const auto ids = torch::arange(0, back.model->config().vocab_size, 97, torch::kLong);
                EXPECT_TRUE(torch::equal(back.model->token_embedding().lookup(ids),
                                         run.embedding->embedding->lookup(ids)));
                EXPECT_EQ(run.summary.bytes_after, stored) << "the results row's bytes are the file's";
                EXPECT_NE(run.summary.parameters.find(", stored " + store), std::string::npos)
                    << run.summary.parameters;
            }
            const auto& a = run.embedding->accounting;
            // quant stores its V d values as ggml blocks: the file's elements are bytes.
            const bool blocks = r.method == "quant";
            if (blocks)
                elements = static_cast<int64_t>(stored * 8 / a.bits_per_value_after);
            EXPECT_EQ(a.params_after, elements);
            ASSERT_GT(a.bytes_after, 0);
            EXPECT_NEAR(a.bytes_after, stored, (store == "f32" ? 0.01 : 0.0) * stored)
                << "file " << stored << " bytes";
            EXPECT_EQ(manifest["accounting"]["storage"]["bytes_after"].get<double>(), a.bytes_after);
            EXPECT_EQ(manifest["accounting"]["params_after"].get<int64_t>(), elements);
        }
    }
    // flat (issue 36 item 3): params_after is the element count of the narrowed part in
    // the file: gpt2's V columns of c_attn (weight and bias, past Q and K's 2 d), the
    // attention's c_proj weight, and with the MLPs c_fc (weight, bias) and their c_proj weight.
    for (const bool mlp : {false, true}) {
        SCOPED_TRACE(mlp ? "flat + mlp" : "flat");
        auto r = request_for("flat");
        r.eval_text.clear();
        r.samples = 24, r.seqlen = 64, r.compress_mlp = mlp;
        const auto run = embedlab::run_compression(r);
        const auto out = dir / (mlp ? "flat-mlp" : "flat");
        embedlab::export_run(run, out);
        const auto bytes = embedlab::test::read_text(out / "model.safetensors");
        const auto header = embedlab::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                               bytes.size(), "model.safetensors");
        const int64_t d = run.model.model->config().hidden_size;
        auto ends = [](const std::string& s, const std::string& tail) {
            return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
        };
        int64_t elements = 0;
        double stored = 0; // the part's bytes in the file: V's share of c_attn's byte range
        for (const auto& e : header.entries) {
            int64_t n = 1;
            for (const int64_t x : e.shape)
                n *= x;
            const double range = static_cast<double>(e.end - e.begin);
            if (ends(e.name, "attn.c_attn.weight")) {
                elements += e.shape[0] * (e.shape[1] - 2 * d);
                stored += range * double(e.shape[1] - 2 * d) / double(e.shape[1]);
            } else if (ends(e.name, "attn.c_attn.bias")) {
                elements += e.shape[0] - 2 * d;
                stored += range * double(e.shape[0] - 2 * d) / double(e.shape[0]);
            } else if (ends(e.name, "attn.c_proj.weight") ||
                       (mlp && (ends(e.name, "mlp.c_fc.weight") || ends(e.name, "mlp.c_fc.bias") ||
                                ends(e.name, "mlp.c_proj.weight")))) {
                elements += n;
                stored += range;
            }
        }
        EXPECT_EQ(run.summary.params_after, elements);
        EXPECT_EQ(run.summary.model_bytes_after, data_bytes(out / "model.safetensors"));
        const auto manifest = Json::parse(embedlab::test::read_text(out / "embedlab.json"));
        EXPECT_EQ(manifest["storage"]["params_after"].get<int64_t>(), elements);
        EXPECT_EQ(manifest["storage"]["part"], run.summary.part);
        EXPECT_NEAR(manifest["storage"]["bytes_after"].get<double>(), stored, 0.01 * stored);
    }
}

// Issue 36 item 3: a flat run's ratio is of the part it compressed: V and O, and the
// MLPs when they were narrowed (the row names the part); before, both counted V and O
// only and showed the same ratio. A target ratio through the job API compresses the
// MLPs as the CLI's does (one default, in the registry).
TEST(RunCompression, FlatRatioIsOfThePartCompressed)
{
    auto plain = request_for("flat");
    plain.eval_text.clear();
    plain.samples = 24, plain.seqlen = 64; // enough tokens for the Nystrom solve
    auto with_mlp = plain;
    with_mlp.compress_mlp = true;
    const auto a = embedlab::run_compression(plain);
    const auto b = embedlab::run_compression(with_mlp);
    EXPECT_EQ(a.summary.part, "attention_values");
    EXPECT_EQ(b.summary.part, "attention_values_and_mlp");
    // Counted here from the weights: c_fc (weight, bias) and the MLP's c_proj weight.
    auto mlp_values = [](const embedlab::LanguageModel& m) {
        int64_t n = 0;
        for (int64_t l = 0; l < m.config().num_layers; ++l)
            for (const char* name : {"c_fc.weight", "c_fc.bias", "c_proj.weight"})
                n += m.weights().at("h." + std::to_string(l) + ".mlp." + name).numel();
        return n;
    };
    const auto lm = embedlab::load_model(model());
    EXPECT_EQ(b.summary.params_before, a.summary.params_before + mlp_values(*lm.model));
    EXPECT_EQ(b.summary.params_after, a.summary.params_after + mlp_values(*b.flat->model));
    EXPECT_LT(mlp_values(*b.flat->model), mlp_values(*lm.model));
    EXPECT_DOUBLE_EQ(b.summary.ratio, double(b.summary.params_after) / double(b.summary.params_before));
    EXPECT_NE(a.summary.ratio, b.summary.ratio);
    // In bytes too (issue 38): as the source holds the part (this one is float16), and as the
    // export writes the narrowed tensors (float32, the model's width in memory).
    ASSERT_EQ(lm.files.stored_dtype, "F16");
    EXPECT_DOUBLE_EQ(b.summary.bytes_before, 2.0 * double(b.summary.params_before));
    EXPECT_DOUBLE_EQ(b.summary.bytes_after, 4.0 * double(b.summary.params_after));

    Json job = embedlab::request_json(plain);
    job.erase("remaining");
    job["target_ratio"] = 0.8;
    const auto target = embedlab::request_from_json(job);
    EXPECT_TRUE(embedlab::request_compresses_mlp(target));
    const auto t = embedlab::run_compression(target);
    EXPECT_TRUE(t.flat->options.mlp);
    EXPECT_EQ(t.summary.part, "attention_values_and_mlp");
    job["target_ratio"] = 0.9;
    job["no_mlp"] = true;
    const auto no_mlp = embedlab::request_from_json(job);
    EXPECT_FALSE(embedlab::request_compresses_mlp(no_mlp));
    EXPECT_EQ(embedlab::request_json(no_mlp)["no_mlp"], true);
    job["compress_mlp"] = true;
    EXPECT_THROW(embedlab::request_from_json(job), embedlab::InputError);
}

// Issue 36 item 4: the energy model's text length l is the request's (compress --tokens).
TEST(RunCompression, EnergyTokensAreTheRequests)
{
    auto r = request_for("tt");
    r.eval_text.clear();
    r.energy_tokens = 4096;
    const auto run = embedlab::run_compression(r);
    const auto& a = run.embedding->accounting;
    EXPECT_EQ(a.energy_options.tokens, 4096);
    EXPECT_DOUBLE_EQ(a.energy.omega,
                     embedlab::tt_energy(a.vocab, a.dim, a.energy_size, a.energy_options).omega);
    EXPECT_EQ(embedlab::request_json(r)["energy_tokens"], 4096);
    EXPECT_EQ(embedlab::request_from_json(embedlab::request_json(r)).energy_tokens, 4096);
}

// LoRA recovery of a fourier table trains its MLP (as finetune does), never a V x r
// row adapter: the embedding keeps its MLP-only parameters, and the export writes the
// trained MLP (it loads back with the run's perplexity).
TEST(ExportRun, FourierRecoveryTrainsTheMlpAndExportsIt)
{
    auto plain = request_for("fourier");
    const auto fitted = embedlab::run_compression(plain);
    auto r = plain;
    r.lora_rank = 2;
    r.lora_steps = 3;
    r.train_text = sample();
    const auto run = embedlab::run_compression(r);
    EXPECT_EQ(run.recovery["mode"], "fourier-mlp") << run.recovery.dump();
    const int64_t mlp_only = fitted.compressed_model().token_embedding().parameter_count();
    EXPECT_EQ(run.compressed_model().token_embedding().parameter_count(), mlp_only);
    EXPECT_NE(run.summary.ppl, fitted.summary.ppl) << "three steps of training change the MLP";
    TempDir dir;
    embedlab::export_run(run, dir / "fourier");
    auto back = embedlab::load_model(dir / "fourier");
    EXPECT_EQ(back.model->token_embedding().parameter_count(), mlp_only);
    auto ids = back.tokenizer->encode(embedlab::read_text_file(sample()));
    ids.resize(256);
    EXPECT_NEAR(embedlab::evaluate_perplexity(*back.model, ids, {.ctx = 64}).ppl, run.summary.ppl,
                1e-5 * run.summary.ppl);
}

// One bar over the stages: the share never goes back, also when gpt2's position
// table is compressed after the token table ("compress positions" is its own stage).
TEST(RunCompression, OverallProgressNeverGoesBack)
{
    auto r = request_for("pca");
    r.positions = true;
    std::vector<std::pair<std::string, double>> seen;
    embedlab::run_compression(r, [&](const embedlab::ExperimentProgress& p) {
        seen.emplace_back(p.stage, p.overall);
        return true;
    });
    ASSERT_FALSE(seen.empty());
    bool positions = false;
    for (size_t i = 1; i < seen.size(); ++i) {
        EXPECT_GE(seen[i].second, seen[i - 1].second) << seen[i - 1].first << " -> " << seen[i].first;
        positions |= seen[i].first == "compress positions";
    }
    EXPECT_TRUE(positions);
    EXPECT_DOUBLE_EQ(seen.back().second, 1.0);
}

// Issue 23 item 8: a cancel is heard within about a second because every stage
// reports often (perplexity after each head chunk), the bar's stages are weighed
// by their work, and a cancel from any report ends the run with Cancelled. The
// gaps are printed (a benchmark figure, not asserted: timing depends on the machine).
TEST(RunCompression, ProgressIsFrequentAndACancelAnywhereStopsTheRun)
{
    using clock = std::chrono::steady_clock;
    for (const auto& m : embedlab::method_registry()) {
        auto r = request_for(m.name);
        r.eval_tokens = 1024;
        r.ctx = 128;
        std::vector<std::tuple<std::string, double, double>> seen; // stage, seconds, overall
        const auto start = clock::now();
        embedlab::run_compression(r, [&](const embedlab::ExperimentProgress& p) {
            seen.emplace_back(p.stage, std::chrono::duration<double>(clock::now() - start).count(),
                              p.overall);
            return true;
        });
        ASSERT_GT(seen.size(), 10u) << m.name;
        double worst = 0;
        std::string where;
        for (size_t i = 1; i < seen.size(); ++i) {
            EXPECT_GE(std::get<2>(seen[i]), std::get<2>(seen[i - 1])) << m.name;
            if (std::get<1>(seen[i]) - std::get<1>(seen[i - 1]) > worst) {
                worst = std::get<1>(seen[i]) - std::get<1>(seen[i - 1]);
                where = std::get<0>(seen[i - 1]) + " -> " + std::get<0>(seen[i]);
            }
        }
        EXPECT_DOUBLE_EQ(std::get<2>(seen.back()), 1.0) << m.name;
        std::printf("%-8s %5.2f s, %4zu reports, longest gap %.3f s (%s)\n", m.name, std::get<1>(seen.back()),
                    seen.size(), worst, where.c_str());
        // A cancel in the middle of the evaluation of the compressed model.
        int reports = 0;
        EXPECT_THROW(embedlab::run_compression(r,
                                               [&](const embedlab::ExperimentProgress& p) {
                                                   return !(p.stage == "eval compressed" && ++reports == 3);
                                               }),
                     embedlab::Cancelled)
            << m.name;
        EXPECT_EQ(reports, 3) << m.name << ": the evaluation reports within its windows";
    }
}

// Issue 19 item 5: a zero-shot task in the request (the job schema) round-trips and
// is checked; its run records the accuracy tasks.hpp gives on the same examples, for
// the compressed model and for the original, and the per-window divergence travels
// in the summary.
TEST(CompressionRequestJson, TaskFieldsRoundTripAndAreChecked)
{
    auto r = request_for("pca");
    r.task = "sst2";
    r.task_data = "/data/glue/SST-2/dev.tsv";
    r.task_limit = 200;
    const Json j = embedlab::request_json(r);
    EXPECT_EQ(j["task"], "sst2");
    EXPECT_EQ(j["task_data"], "/data/glue/SST-2/dev.tsv");
    EXPECT_EQ(j["task_limit"], 200);
    const auto back = embedlab::request_from_json(j);
    EXPECT_EQ(back.task, r.task);
    EXPECT_EQ(back.task_data, r.task_data);
    EXPECT_EQ(back.task_limit, r.task_limit);
    EXPECT_EQ(embedlab::request_json(back), j);
    EXPECT_FALSE(embedlab::request_json(request_for("pca")).contains("task")) << "no task: no field";
    const auto& inputs = embedlab::request_input_fields();
    EXPECT_NE(std::find(inputs.begin(), inputs.end(), "task_data"), inputs.end()) << "uploaded to a host";
    auto refused = [&](const char* field, const Json& value) {
        Json bad = j;
        if (value.is_null())
            bad.erase(field);
        else
            bad[field] = value;
        try {
            embedlab::request_from_json(bad);
            ADD_FAILURE() << field << " = " << value.dump() << " was accepted";
        } catch (const embedlab::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("task"), std::string::npos) << e.what();
        }
    };
    refused("task", "stsb");       // scored by correlation, not accuracy
    refused("task_data", nullptr); // a task without its file
    refused("task_limit", -1);
    refused("task_limit", "all");
}

TEST(RunCompression, RecordsTheTaskAccuracyOfTheCompressedModelAndTheOriginal)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto dev = embedlab::test::shared_dir() / "data" / "glue" / "SST-2" / "dev.tsv";
    auto request = request_for("pca");
    request.divergence = true;
    request.task = "sst2";
    request.task_data = dev.string();
    request.task_limit = 6;
    const auto run = embedlab::run_compression(request);
    const auto data = embedlab::read_task_data("sst2", dev, {.limit = 6});
    const auto expected = embedlab::evaluate_task(run.compressed_model(), *run.model.tokenizer, data);
    auto original = embedlab::load_model(model());
    const auto expected_original = embedlab::evaluate_task(*original.model, *original.tokenizer, data);
    const auto& s = run.summary;
    EXPECT_EQ(s.task, "sst2");
    EXPECT_EQ(s.task_n, 6);
    EXPECT_DOUBLE_EQ(s.task_accuracy, expected.accuracy);
    EXPECT_DOUBLE_EQ(s.task_accuracy_original, expected_original.accuracy);
    const auto& t = run.evaluation["task"];
    EXPECT_EQ(t["name"], "sst2");
    EXPECT_EQ(t["n"], 6);
    EXPECT_EQ(t["limit"], 6);
    EXPECT_DOUBLE_EQ(t["accuracy"].get<double>(), expected.accuracy);
    EXPECT_DOUBLE_EQ(t["original"]["accuracy"].get<double>(), expected_original.accuracy);
    EXPECT_DOUBLE_EQ(t["choice_agreement"].get<double>(),
                     embedlab::choice_agreement(expected, expected_original));
    EXPECT_EQ(embedlab::run_json(run)["evaluation"]["task"], t) << "the run's record holds it too";
    // The per-window divergence is in the summary (what the results view plots): 256 ids, ctx 64.
    const auto& windows = run.evaluation["divergence"]["window_kl_mean"];
    ASSERT_EQ(s.window_kl.size(), windows.size());
    EXPECT_EQ(s.window_kl.size(), 4u);
    EXPECT_EQ(s.window_top1.size(), s.window_kl.size());
    for (size_t i = 0; i < s.window_kl.size(); ++i)
        EXPECT_EQ(s.window_kl[i], windows[i].get<double>());
    // The summary's JSON (a worker job's result) carries them back.
    const auto back = embedlab::summary_from_json(embedlab::summary_json(s));
    EXPECT_EQ(back.window_kl, s.window_kl);
    EXPECT_EQ(back.task_accuracy, s.task_accuracy);
    EXPECT_EQ(back.task_n, 6);
}

namespace {

// Issue 64 item 1: the original's perplexity was cached by the model folder's
// modification time, which a file rewritten in place leaves alone: a second run
// reported the old weights' ppl_original and delta_ln_ppl. Here the weights change
// in place, keeping the file's size and modification time.
TEST(ExperimentCache, AModelRewrittenInPlaceIsEvaluatedAgain)
{
    TempDir dir;
    const auto m = dir / "m";
    fs::create_directories(m);
    for (const auto& e : fs::directory_iterator(model()))
        fs::copy_file(e.path(), m / e.path().filename());
    auto r = request_for("pca");
    r.model = m.string();
    const auto first = embedlab::run_compression(r);

    const auto file = m / "model.safetensors";
    const auto stamp = fs::last_write_time(file);
    std::string bytes = embedlab::test::read_text(file);
    const auto header = embedlab::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                           bytes.size(), file.string());
    bool changed = false;
    for (const auto& e : header.entries)
        if (e.name.find("ln_f.weight") != std::string::npos) { // f16 2.0 (0x4000) for every gain
            for (uint64_t at = header.data_start + e.begin; at + 1 < header.data_start + e.end; at += 2)
                bytes[at] = 0x00, bytes[at + 1] = 0x40;
            changed = true;
        }
    ASSERT_TRUE(changed);
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary); // in place: same inode
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    fs::last_write_time(file, stamp);

    const auto second = embedlab::run_compression(r);
    EXPECT_NE(second.summary.ppl_original, first.summary.ppl_original)
        << "the second run reported the first weights' perplexity";
    // And it is the rewritten model's own: a third run (now cached) agrees with it.
    const auto third = embedlab::run_compression(r);
    EXPECT_EQ(third.summary.ppl_original, second.summary.ppl_original);
}

} // namespace

// An encoder with a masked-LM head is evaluated by run_compression as `embedlab-cli eval`
// scores it (issue 61 items 5-6): its pseudo-perplexity, the original's, and with divergence
// the KL on the same masked positions, each equal to the engine's masked-LM entry on the
// exported directory; the record says it is a pseudo-perplexity.
TEST(EncoderRun, AMaskedLmEncodersRunHasThePseudoPerplexityEvalGivesItsDirectory)
{
    TempDir dir;
    const auto fixture = fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders";
    const auto text = dir / "t.txt";
    embedlab::test::write_file(text, "a sometimes tedious film about a man and his dog .\n"
                                     "the cat sat on the mat and looked at the rain .\n");
    CompressionRequest r{.model = (fixture / "distilbert-mlm").string(), .method = "pca", .rank = 16};
    r.eval_text = text.string();
    r.divergence = true;
    const auto run = embedlab::run_compression(r);
    embedlab::export_run(run, dir / "pca16", {});

    const auto original = embedlab::load_model(r.model);
    const auto compressed = embedlab::load_model(dir / "pca16");
    EXPECT_EQ(compressed.model->token_embedding().kind(), "pca");
    const auto ids = original.tokenizer->encode(embedlab::read_text_file(text));
    const auto base = embedlab::evaluate_masked_lm(*original.model, *original.tokenizer, ids, {});
    const auto eval = embedlab::evaluate_masked_lm(*compressed.model, *compressed.tokenizer, ids, {},
                                                   original.model.get()); // eval OUT --reference ORIGINAL
    const auto& s = run.summary;
    EXPECT_NEAR(s.ppl, eval.pseudo_ppl, 1e-9 * eval.pseudo_ppl);
    EXPECT_NEAR(s.ppl_original, base.pseudo_ppl, 1e-9 * base.pseudo_ppl);
    EXPECT_NE(s.ppl, s.ppl_original);
    EXPECT_DOUBLE_EQ(s.delta_ln_ppl, std::log(s.ppl) - std::log(s.ppl_original));
    EXPECT_EQ(s.eval_tokens, eval.masked);
    EXPECT_EQ(s.eval_tokens, static_cast<int64_t>(ids.size()));
    EXPECT_NEAR(s.kl_mean, eval.kl, 1e-9 * eval.kl);
    EXPECT_GT(s.kl_mean, 0);
    EXPECT_TRUE(std::isnan(s.top1_agreement)); // not computed for masked positions: left empty
    EXPECT_TRUE(s.window_kl.empty());
    const Json record = embedlab::run_json(run);
    const auto& e = record.at("evaluation");
    EXPECT_EQ(e.at("kind"), "pseudo-perplexity");
    EXPECT_EQ(e.at("compressed").at("ppl").get<double>(), s.ppl);
    EXPECT_EQ(e.at("ctx"), 128); // eval's default window
    EXPECT_FALSE(e.contains("stride"));
    EXPECT_NE(e.at("divergence").at("note").get<std::string>().find("no top-1 agreement"), std::string::npos);
    EXPECT_EQ(record.at("summary").at("ppl").get<double>(), s.ppl);
}

// An encoder without a masked-LM head has nothing to score an evaluation text by: refused
// before any work, saying what its run records instead; a stride is refused for an encoder.
TEST(EncoderRun, AnEvaluationIsRefusedWhereItDoesNotApplyToAnEncoder)
{
    TempDir dir;
    const auto fixture = fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders";
    const auto text = dir / "t.txt";
    embedlab::test::write_file(text, "a man and his dog .\n");
    CompressionRequest r{.model = (fixture / "bert-cls").string(), .method = "pca", .rank = 16};
    r.eval_text = text.string();
    try {
        embedlab::run_compression(r);
        ADD_FAILURE() << "bert-cls evaluated";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("is an encoder without a masked-LM head: it has neither a "
                                             "perplexity nor a pseudo-perplexity"),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("mean cosine"), std::string::npos) << e.what();
    }
    r.model = (fixture / "distilbert-mlm").string();
    r.ctx = 16;
    r.stride = 8;
    try {
        embedlab::run_compression(r);
        ADD_FAILURE() << "a stride taken for an encoder";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("is an encoder, scored by pseudo-perplexity"), std::string::npos)
            << e.what();
    }
    r.stride = 0;
    r.ctx = 2;
    try {
        embedlab::run_compression(r);
        ADD_FAILURE() << "a window with no room for an id";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("(ctx 3 or more)"), std::string::npos) << e.what();
    }
}
