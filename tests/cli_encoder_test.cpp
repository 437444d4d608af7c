// embedlab-cli on encoders (issue 42): embed, inspect, eval (pseudo-perplexity), task,
// compress (the LLE paper's protocol), export, and finetune --head classification, on
// the fixtures of tests/data/encoders and GLUE's dev files from ../shared.
#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_in_process.hpp"
#include "cli_support.hpp"

namespace embedlab::test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string fixture(const std::string& name)
{
    return (fs::path(EMBEDLAB_SOURCE_DIR) / "tests" / "data" / "encoders" / name).string();
}

std::string write(const fs::path& path, const std::string& text)
{
    std::ofstream(path) << text;
    return path.string();
}

fs::path glue(const std::string& file)
{
    return shared_dir() / "data" / "glue" / file;
}

TEST(CliEncoder, EmbedPrintsTheModelsOwnPoolingOrTheOneAskedFor)
{
    TempDir dir;
    const auto text = write(dir.path() / "lines.txt", "A man is playing a guitar.\n\nA dog runs.\n");
    const auto j = json_of(cli({"embed", fixture("minilm-st"), "--text", text, "--json"}));
    EXPECT_EQ(j["pooling"], "mean");  // 1_Pooling/config.json
    EXPECT_EQ(j["normalized"], true); // 2_Normalize
    EXPECT_EQ(j["dim"], 64);
    ASSERT_EQ(j["embeddings"].size(), 3u); // the empty line is an input: [CLS] [SEP]
    double norm = 0;
    for (const auto& v : j["embeddings"][0])
        norm += v.template get<double>() * v.template get<double>();
    EXPECT_NEAR(norm, 1.0, 1e-5);

    const auto cls = json_of(cli({"embed", fixture("bert-cls"), "--text", text, "--json"}));
    EXPECT_EQ(cls["pooling"], "cls"); // a classifier's default
    EXPECT_EQ(cls["normalized"], false);
    const auto max = json_of(
        cli({"embed", fixture("bert-cls"), "--text", text, "--pooling", "max", "--normalize", "--json"}));
    EXPECT_EQ(max["pooling"], "max");
    EXPECT_EQ(max["normalized"], true);
    // Plain output: one line of d numbers per input line.
    const auto plain = cli({"embed", fixture("minilm-st"), "--text", text, "--quiet"});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(std::count(plain.out.begin(), plain.out.end(), '\n'), 3);

    const auto bad = cli_here({"embed", fixture("minilm-st"), "--text", text, "--pooling", "weightedmean"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--pooling must be cls, mean, max or model"), std::string::npos) << bad.err;
    const auto empty =
        cli_here({"embed", fixture("minilm-st"), "--text", write(dir.path() / "empty.txt", "")});
    EXPECT_EQ(empty.exit_code, 2);
    EXPECT_NE(empty.err.find("empty.txt: the text is empty"), std::string::npos) << empty.err;
}

// sentence-transformers cuts each text to sentence_bert_config.json's max_seq_length
// (minilm-st: 128, [CLS] and [SEP] included); embed --json counts the texts it cut.
TEST(CliEncoder, EmbedTruncatesToMaxSeqLengthAndCountsTheTextsCut)
{
    TempDir dir;
    auto dogs = [](int n) {
        std::string s;
        for (int i = 0; i < n; ++i)
            s += i ? " dog" : "dog"; // one token each
        return s;
    };
    // 300 tokens: more than the model's 128 positions, once refused.
    const auto j = json_of(cli({"embed", fixture("minilm-st"), "--text",
                                write(dir.path() / "long.txt", dogs(300) + "\nA dog runs.\n"), "--json"}));
    EXPECT_EQ(j["truncated"], 1);
    const auto cut = json_of(cli({"embed", fixture("minilm-st"), "--text",
                                  write(dir.path() / "cut.txt", dogs(126) + "\nA dog runs.\n"), "--json"}));
    EXPECT_EQ(cut["truncated"], 0);
    ASSERT_EQ(j["embeddings"].size(), 2u);
    ASSERT_EQ(cut["embeddings"].size(), 2u);
    for (size_t row = 0; row < 2; ++row)
        for (size_t k = 0; k < j["embeddings"][row].size(); ++k)
            EXPECT_NEAR(j["embeddings"][row][k].get<double>(), cut["embeddings"][row][k].get<double>(), 1e-5)
                << row << ", " << k;
}

TEST(CliEncoder, EmbedWorksOnADecoderByMeanOfHiddenStates)
{
    const fs::path model = shared_dir() / "models" / "tinygpt2";
    if (!fs::exists(model / "config.json"))
        GTEST_SKIP() << "needs ../shared/models/tinygpt2";
    TempDir dir;
    const auto j = json_of(cli(
        {"embed", model.string(), "--text", write(dir.path() / "t.txt", "Once upon a time\n"), "--json"}));
    EXPECT_EQ(j["pooling"], "mean");
    EXPECT_EQ(j["dim"], 128);
    // An empty line has no ids for a decoder: named by its number and the file.
    const auto r =
        cli_here({"embed", model.string(), "--text", write(dir.path() / "e.txt", "Once\n\nupon\n")});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("e.txt: text 2 has no tokens"), std::string::npos) << r.err;
}

TEST(CliEncoder, InspectNamesTheHeadAndWhatApplies)
{
    const auto j = json_of(cli({"inspect", fixture("distilbert-cls"), "--json"}));
    EXPECT_EQ(j["family"], "bert");
    EXPECT_EQ(j["methods"]["flat"], "not implemented for encoders (distilbert)");
    EXPECT_EQ(j["methods"]["lle"], "yes");
    EXPECT_EQ(j["tokenizer"]["kind"], "wordpiece");
    const auto facts = j["architecture_facts"].dump();
    EXPECT_NE(facts.find("classifier over 2 labels"), std::string::npos) << facts;
    // The classifier adds nothing to the table: parameters add up.
    const auto& p = j["parameters"]["counts"];
    EXPECT_EQ(p["total"], p["token_embedding"].get<int64_t>() + p["position_embedding"].get<int64_t>() +
                              p["attention"].get<int64_t>() + p["mlp"].get<int64_t>() +
                              p["norms"].get<int64_t>() + p["output_head"].get<int64_t>());
}

TEST(CliEncoder, EvalGivesPseudoPerplexityAndRefusesDecoderOptions)
{
    TempDir dir;
    const auto text = write(dir.path() / "t.txt", "a sometimes tedious film about a man and his dog .\n");
    const auto j =
        json_of(cli({"eval", fixture("distilbert-mlm"), "--text", text, "--ctx", "8", "--json", "--quiet"}));
    EXPECT_GT(j["pseudo_ppl"].get<double>(), 1.0);
    EXPECT_EQ(j["masked"], j["tokens"]);
    const auto k =
        json_of(cli({"eval", fixture("distilbert-mlm"), "--text", text, "--mask-rate", "0.15", "--seed", "2",
                     "--reference", fixture("distilbert-mlm"), "--json", "--quiet"}));
    EXPECT_LT(k["masked"].get<int64_t>(), j["masked"].get<int64_t>());
    EXPECT_NEAR(k["kl"].get<double>(), 0.0, 1e-12);
    const auto body = cli_here({"eval", fixture("minilm-st"), "--text", text});
    EXPECT_EQ(body.exit_code, 2);
    EXPECT_NE(body.err.find("without a masked-LM head"), std::string::npos) << body.err;
}

TEST(CliEncoder, TaskUsesTheClassifierHeadAndTheModelsPooling)
{
    if (!fs::exists(glue("SST-2/dev.tsv")) || !fs::exists(glue("STS-B/dev.tsv")))
        GTEST_SKIP() << "needs ../shared/data/glue";
    const auto sst2 = json_of(cli({"task", "sst2", fixture("distilbert-cls"), "--data",
                                   glue("SST-2/dev.tsv").string(), "--limit", "60", "--json", "--quiet"}));
    EXPECT_EQ(sst2["n"], 60);
    EXPECT_NE(sst2["protocol"].get<std::string>().find("classifier's head"), std::string::npos);
    const auto stsb = json_of(cli({"task", "stsb", fixture("minilm-st"), "--data",
                                   glue("STS-B/dev.tsv").string(), "--limit", "60", "--json", "--quiet"}));
    EXPECT_NE(stsb["protocol"].get<std::string>().find("own pooling (mean)"), std::string::npos);
    // Against itself every sentence keeps its ten neighbours; a rank-4 table keeps fewer.
    TempDir dir;
    const auto same =
        json_of(cli({"task", "stsb", fixture("minilm-st"), "--data", glue("STS-B/dev.tsv").string(),
                     "--limit", "60", "--reference", fixture("minilm-st"), "--json", "--quiet"}));
    EXPECT_EQ(same["retrieval_agreement_top10"], 1.0);
    const auto pca = (dir.path() / "pca4").string();
    ASSERT_EQ(
        cli({"compress", fixture("minilm-st"), "--method", "pca", "--rank", "4", "--out", pca, "--quiet"})
            .exit_code,
        0);
    const auto small = json_of(cli({"task", "stsb", pca, "--data", glue("STS-B/dev.tsv").string(), "--limit",
                                    "60", "--reference", fixture("minilm-st"), "--json", "--quiet"}));
    EXPECT_GT(small["retrieval_agreement_top10"].get<double>(), 0.0);
    EXPECT_LT(small["retrieval_agreement_top10"].get<double>(), 1.0);
    const auto refused =
        cli_here({"task", "sst2", fixture("minilm-st"), "--data", glue("SST-2/dev.tsv").string()});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("an encoder without a classifier"), std::string::npos) << refused.err;
}

TEST(CliEncoder, LleProtocolOnAClassifierAndItsCompressedDirectory)
{
    if (!fs::exists(glue("SST-2/dev.tsv")))
        GTEST_SKIP() << "needs ../shared/data/glue";
    TempDir dir;
    const auto dev = glue("SST-2/dev.tsv").string();
    const auto out = (dir.path() / "lle").string();
    const auto j = json_of(cli({"compress",     fixture("distilbert-cls"),
                                "--method",     "lle",
                                "--k",          "8",
                                "--freq-text",  dev,
                                "--keep-ratio", "0.3",
                                "--task",       "sst2",
                                "--task-data",  dev,
                                "--task-limit", "80",
                                "--out",        out,
                                "--json",       "--quiet"}));
    EXPECT_EQ(j["embedding_tensor"], "embeddings.word_embeddings.weight");
    EXPECT_EQ(j["evaluation"]["task"]["n"], 80);
    EXPECT_EQ(j["accounting"]["tied_head"], false); // a classifier has no token head
    // Reported bytes are the stored bytes, and the directory runs the task again, the same.
    const auto again =
        json_of(cli({"task", "sst2", out, "--data", dev, "--limit", "80", "--json", "--quiet"}));
    EXPECT_EQ(again["accuracy"], j["evaluation"]["task"]["accuracy"]);
}

TEST(CliEncoder, CompressedMaskedLmKeepsItsHeadAndItsDenseCopyLoadsInTransformersLayout)
{
    TempDir dir;
    const auto out = (dir.path() / "pca16").string();
    const auto run = cli({"compress", fixture("distilbert-mlm"), "--method", "pca", "--rank", "16", "--dense",
                          "--out", out, "--quiet"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto text = write(dir.path() / "t.txt", "a sometimes tedious film about a man and his dog .\n");
    const auto compressed = json_of(cli({"eval", out, "--text", text, "--json", "--quiet"}));
    const auto dense = json_of(cli({"eval", out + "/dense", "--text", text, "--json", "--quiet"}));
    EXPECT_EQ(compressed["embedding"], "pca");
    EXPECT_EQ(dense["embedding"], "dense");
    // The factors and their dense reconstruction give the same pseudo-perplexity.
    EXPECT_NEAR(compressed["pseudo_ppl"].get<double>(), dense["pseudo_ppl"].get<double>(),
                1e-4 * dense["pseudo_ppl"].get<double>());
}

// compress --eval-text on a masked-LM encoder records the pseudo-perplexity that eval gives
// the written directory (and the original), and the KL eval --reference gives.
TEST(CliEncoder, CompressEvalTextOnAMaskedLmEncoderPrintsEvalsPseudoPerplexity)
{
    TempDir dir;
    const auto out = (dir.path() / "pca16").string();
    const auto text = write(dir.path() / "t.txt", "a sometimes tedious film about a man and his dog .\n");
    const auto run = json_of(cli({"compress", fixture("distilbert-mlm"), "--method", "pca", "--rank", "16",
                                  "--eval-text", text, "--divergence", "--out", out, "--json", "--quiet"}));
    const auto& e = run["evaluation"];
    EXPECT_EQ(e["kind"], "pseudo-perplexity");
    const auto compressed = json_of(
        cli({"eval", out, "--text", text, "--reference", fixture("distilbert-mlm"), "--json", "--quiet"}));
    const auto original =
        json_of(cli({"eval", fixture("distilbert-mlm"), "--text", text, "--json", "--quiet"}));
    const double ppl = compressed["pseudo_ppl"].get<double>();
    EXPECT_NEAR(e["compressed"]["ppl"].get<double>(), ppl, 1e-9 * ppl);
    EXPECT_NEAR(e["baseline"]["ppl"].get<double>(), original["pseudo_ppl"].get<double>(),
                1e-9 * original["pseudo_ppl"].get<double>());
    EXPECT_EQ(e["tokens"], compressed["masked"]);
    EXPECT_NEAR(e["divergence"]["kl_mean"].get<double>(), compressed["kl"].get<double>(),
                1e-9 * compressed["kl"].get<double>());
    // The plain report names what the number is.
    const auto plain = cli({"compress", fixture("distilbert-mlm"), "--method", "pca", "--rank", "16",
                            "--eval-text", text, "--out", (dir.path() / "again").string()});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_NE(plain.out.find("pseudo-perplexity "), std::string::npos) << plain.out;
    EXPECT_NE(plain.out.find("masked positions, ctx 128"), std::string::npos) << plain.out;
}

TEST(CliEncoder, ExportHfKeepsTheSentenceTransformersModules)
{
    TempDir dir;
    const auto out = (dir.path() / "st").string();
    const auto r = cli({"export", fixture("minilm-st"), "--format", "hf", "--out", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(fs::path(out) / "1_Pooling" / "config.json"));
    const auto text = write(dir.path() / "t.txt", "A man is playing a guitar.\n");
    EXPECT_EQ(json_of(cli({"embed", out, "--text", text, "--json"}))["embeddings"],
              json_of(cli({"embed", fixture("minilm-st"), "--text", text, "--json"}))["embeddings"]);
    // A sequence classifier's head cannot run in llama.cpp's bert graph: refused by name.
    const auto gguf = cli_here({"export", fixture("bert-cls"), "--out", (dir.path() / "x.gguf").string()});
    EXPECT_EQ(gguf.exit_code, 2);
    EXPECT_NE(gguf.err.find("a sequence classifier: llama.cpp's bert graph has no pooler"), std::string::npos)
        << gguf.err;
    EXPECT_FALSE(fs::exists(dir.path() / "x.gguf"));
}

// A compressed sentence embedder exported to GGUF (its table rebuilt dense) embeds as
// the compressed directory does: same tokenizer, same pooling, same numbers.
TEST(CliEncoder, CompressedSentenceEmbedderExportsToGgufAndEmbedsTheSame)
{
    TempDir dir;
    const auto pca = (dir.path() / "pca16").string(), gguf = (dir.path() / "pca16.gguf").string();
    ASSERT_EQ(
        cli({"compress", fixture("minilm-st"), "--method", "pca", "--rank", "16", "--out", pca, "--quiet"})
            .exit_code,
        0);
    const auto report =
        json_of(cli({"export", pca, "--format", "gguf", "--type", "f32", "--out", gguf, "--json"}));
    EXPECT_EQ(report["architecture"], "bert");
    EXPECT_NE(report["notes"].dump().find("reconstructed as a dense table"), std::string::npos)
        << report.dump();
    const auto text = write(dir.path() / "t.txt", "A man is playing a guitar.\nUnbelievably, naïve cafés!\n");
    // GGUF records the pooling but not sentence-transformers' Normalize (the note says so).
    EXPECT_NE(report["notes"].dump().find("Normalize"), std::string::npos) << report.dump();
    const auto from_dir = json_of(cli({"embed", pca, "--text", text, "--json"}));
    const auto from_gguf = json_of(cli({"embed", gguf, "--text", text, "--normalize", "--json"}));
    ASSERT_EQ(from_gguf["count"], 2);
    EXPECT_EQ(from_gguf["pooling"], from_dir["pooling"]);
    for (size_t i = 0; i < 2; ++i)
        for (size_t k = 0; k < 64; ++k)
            EXPECT_NEAR(from_gguf["embeddings"][i][k].get<double>(),
                        from_dir["embeddings"][i][k].get<double>(), 1e-5);
}

TEST(CliEncoder, FinetuneTrainsAClassifierThatTheTaskReadsBack)
{
    if (!fs::exists(glue("SST-2/dev.tsv")))
        GTEST_SKIP() << "needs ../shared/data/glue";
    TempDir dir;
    const auto out = (dir.path() / "clf").string();
    const auto dev = glue("SST-2/dev.tsv").string();
    const auto j = json_of(
        cli({"finetune", fixture("distilbert-mlm"), "--head", "classification", "--task", "sst2", "--train",
             dev, "--limit", "200", "--steps", "40", "--lr", "3e-3", "--out", out, "--json", "--quiet"}));
    const auto& t = j["training"];
    EXPECT_LT(t["loss_last"].get<double>(), t["loss_first"].get<double>()) << t.dump();
    EXPECT_EQ(j["labels"], Json::array({"negative", "positive"}));
    // transformers' layout: DistilBertForSequenceClassification with id2label.
    const auto config = Json::parse(std::ifstream(fs::path(out) / "config.json"));
    EXPECT_EQ(config["architectures"][0], "DistilBertForSequenceClassification");
    EXPECT_EQ(config["id2label"]["1"], "positive");
    const auto inspect = json_of(cli({"inspect", out, "--json"}));
    EXPECT_NE(inspect["architecture_facts"].dump().find("classifier over 2 labels"), std::string::npos);
    const auto task =
        json_of(cli({"task", "sst2", out, "--data", dev, "--limit", "200", "--json", "--quiet"}));
    EXPECT_GT(task["accuracy"].get<double>(), 0.0);
    // Never over what it did not write.
    const auto again = cli_here({"finetune", fixture("distilbert-mlm"), "--head", "classification", "--task",
                                 "sst2", "--train", dev, "--steps", "1", "--out", out});
    EXPECT_EQ(again.exit_code, 2);
}

// GLUE's pair tasks end to end: finetune --task rte names the head by rte's labels,
// task rte reads it back with its --json fields, and a task whose labels differ is refused.
TEST(CliEncoder, PairTaskFinetuneAndTaskReadEachOther)
{
    TempDir dir;
    const auto rte = (fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/glue_formats/rte.tsv").string();
    const auto mrpc = (fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/glue_formats/mrpc.tsv").string();
    const auto out = (dir.path() / "rte").string();
    const auto j = json_of(
        cli({"finetune", fixture("bert-cls"), "--head", "classification", "--task", "rte", "--train", rte,
             "--eval", rte, "--steps", "10", "--batch", "4", "--out", out, "--json", "--quiet"}));
    EXPECT_EQ(j["labels"], Json::array({"entailment", "not_entailment"}));
    EXPECT_EQ(j["training"]["eval"]["n"], 4);
    const auto config = Json::parse(std::ifstream(fs::path(out) / "config.json"));
    EXPECT_EQ(config["id2label"]["0"], "entailment");
    const auto task = json_of(cli({"task", "rte", out, "--data", rte, "--json", "--quiet"}));
    EXPECT_EQ(task["task"], "rte");
    EXPECT_EQ(task["n"], 4);
    EXPECT_DOUBLE_EQ(task["accuracy"].get<double>(), j["training"]["eval"]["accuracy"].get<double>());
    const auto wrong = cli_here({"task", "mrpc", out, "--data", mrpc});
    EXPECT_EQ(wrong.exit_code, 2);
    EXPECT_NE(wrong.err.find("the task's label 'not_equivalent' is none of the model's labels"),
              std::string::npos)
        << wrong.err;
    const auto text = cli_here({"task", "mrpc", fixture("bert-cls"), "--data", mrpc});
    EXPECT_EQ(text.exit_code, 2) << text.out;
}

// mrpc end to end: a head fine-tuned on mrpc's pairs, task --json's accuracy and F1 equal to
// its own per-example choices counted by hand, and compress scoring the same task (F1 too).
TEST(CliEncoder, MrpcReportsF1AndCompressScoresIt)
{
    TempDir dir;
    const auto mrpc = (fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/glue_formats/mrpc.tsv").string();
    const auto model = (dir.path() / "mrpc").string();
    const auto tuned = cli({"finetune", fixture("bert-cls"), "--head", "classification", "--task", "mrpc",
                            "--train", mrpc, "--steps", "10", "--batch", "4", "--out", model, "--quiet"});
    ASSERT_EQ(tuned.exit_code, 0) << tuned.err;
    const auto config = Json::parse(std::ifstream(fs::path(model) / "config.json"));
    EXPECT_EQ(config["id2label"], Json({{"0", "not_equivalent"}, {"1", "equivalent"}}));
    const auto per = (dir.path() / "per.jsonl").string();
    const auto j = json_of(cli({"task", "mrpc", model, "--data", mrpc, "--out", per, "--json", "--quiet"}));
    EXPECT_EQ(j["n"], 5);
    EXPECT_EQ(j["metric"], "f1");
    EXPECT_FALSE(j.contains("mcc"));
    int64_t right = 0, tp = 0, fp = 0, fn = 0;
    std::ifstream lines(per);
    for (std::string line; std::getline(lines, line);) {
        const auto e = Json::parse(line);
        const int64_t p = e["choice"], g = e["label"];
        right += p == g;
        tp += p == 1 && g == 1;
        fp += p == 1 && g == 0;
        fn += p == 0 && g == 1;
    }
    EXPECT_GT(tp, 0) << "10 steps predict some pairs equivalent: the F1 below is not vacuous";
    EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), double(right) / 5.0);
    EXPECT_DOUBLE_EQ(j["f1"].get<double>(), tp == 0 ? 0.0 : 2.0 * double(tp) / double(2 * tp + fp + fn));
    EXPECT_EQ(j["metric_value"], j["f1"]);
    const auto text = cli({"task", "mrpc", model, "--data", mrpc, "--quiet"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("mrpc: F1 (label 1) "), std::string::npos) << text.out;

    const auto c =
        json_of(cli({"compress", model, "--method", "pca", "--rank", "8", "--task", "mrpc", "--task-data",
                     mrpc, "--out", (dir.path() / "pca").string(), "--json", "--quiet"}));
    const auto& t = c["evaluation"]["task"];
    EXPECT_EQ(t["name"], "mrpc");
    EXPECT_EQ(t["metric"], "f1");
    ASSERT_TRUE(t.contains("f1"));
    EXPECT_EQ(t["metric_value"], t["f1"]);
    EXPECT_DOUBLE_EQ(t["original"]["f1"].get<double>(), j["f1"].get<double>()); // the model as tuned
    EXPECT_DOUBLE_EQ(t["original"]["accuracy"].get<double>(), j["accuracy"].get<double>());
}

// finetune --task stsb writes transformers' regression classifier (one label,
// problem_type regression) and task stsb scores the pairs by its head.
TEST(CliEncoder, StsbRegressionHeadRoundTrip)
{
    TempDir dir;
    const auto stsb = (fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/glue_formats/stsb.tsv").string();
    const auto out = (dir.path() / "stsb").string();
    const auto j = json_of(
        cli({"finetune", fixture("distilbert-mlm"), "--head", "classification", "--task", "stsb", "--train",
             stsb, "--eval", stsb, "--steps", "10", "--batch", "6", "--out", out, "--json", "--quiet"}));
    EXPECT_EQ(j["labels"], Json::array({"LABEL_0"}));
    const auto config = Json::parse(std::ifstream(fs::path(out) / "config.json"));
    EXPECT_EQ(config["problem_type"], "regression");
    EXPECT_EQ(config["architectures"][0], "DistilBertForSequenceClassification");
    const auto task = json_of(cli({"task", "stsb", out, "--data", stsb, "--json", "--quiet"}));
    EXPECT_NE(task["protocol"].get<std::string>().find("regression head"), std::string::npos);
    EXPECT_DOUBLE_EQ(task["spearman"].get<double>(), j["training"]["eval"]["spearman"].get<double>());
}

// Issue 62 item 6: --full is the LLE paper's fine-tuning (every weight, AdamW at 2e-5,
// shuffled epochs, linear decay to 0): the record says so, and the step count and the
// rates follow from the examples and the batch.
TEST(CliEncoder, FullFinetuneIsThePapersProtocol)
{
    TempDir dir;
    const auto rte = (fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/glue_formats/rte.tsv").string();
    const auto j = json_of(cli({"finetune", fixture("bert-cls"), "--head", "classification", "--task", "rte",
                                "--train", rte, "--full", "--epochs", "2", "--batch", "3", "--out",
                                (dir.path() / "full").string(), "--json", "--quiet"}));
    const auto& t = j["training"];
    const auto examples = t["examples"].get<int64_t>();
    EXPECT_EQ(t["steps"], 2 * ((examples + 2) / 3)) << t.dump();
    EXPECT_EQ(t["full"], true);
    EXPECT_EQ(t["schedule"], "linear");
    EXPECT_EQ(t["lr"], 2e-5);
    EXPECT_EQ(t["body_lr"], 2e-5);
    EXPECT_DOUBLE_EQ(t["lr_first"].get<double>(), 2e-5);
    EXPECT_DOUBLE_EQ(t["lr_last"].get<double>(), 2e-5 / t["steps"].get<double>());
    const auto frozen =
        json_of(cli({"finetune", fixture("bert-cls"), "--head", "classification", "--task", "rte", "--train",
                     rte, "--steps", "2", "--out", (dir.path() / "head").string(), "--json", "--quiet"}));
    EXPECT_GT(t["trainable_parameters"].get<int64_t>(),
              frozen["training"]["trainable_parameters"].get<int64_t>())
        << "every weight, not the head alone";
    const auto both =
        cli_here({"finetune", fixture("bert-cls"), "--head", "classification", "--task", "rte", "--train",
                  rte, "--full", "--body-lr", "1e-3", "--out", (dir.path() / "x").string()});
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("--body-lr does not apply"), std::string::npos) << both.err;
}

// Issue 62 item 6: the LLE paper's protocol in one command: three trials (seeds recorded,
// each different), k chosen on a 10 % split of --train (seed 42), V_C from the training
// sentences, mean and std of each setting's trial scores in the record and the printed table;
// the saved classifier is the first trial's and scores as the record says.
TEST(CliEncoder, ProtocolRecordsTrialsAndTheChosenK)
{
    TempDir dir;
    const char* words[] = {"good", "bad", "movie", "great", "film", "dull", "fun", "plot", "actor", "boring"};
    auto sst2 = [&](const std::string& name, int first, int n) {
        std::string text = "sentence\tlabel\n";
        for (int i = first; i < first + n; ++i) {
            std::string s;
            for (int w = 0; w < 3 + i % 4; ++w) {
                if (w)
                    s += ' ';
                s += words[(i * 7 + w * 3) % 10];
            }
            text += s + "\t" + std::to_string(i % 2) + "\n";
        }
        return write(dir.path() / name, text);
    };
    const auto train = sst2("train.tsv", 0, 30), test = sst2("test.tsv", 30, 12);
    const auto out = (dir.path() / "clf").string();
    std::vector<std::string> args{"finetune",      fixture("distilbert-mlm"),
                                  "--head",        "classification",
                                  "--task",        "sst2",
                                  "--train",       train,
                                  "--eval",        test,
                                  "--epochs",      "1",
                                  "--batch",       "8",
                                  "--lr",          "1e-2",
                                  "--seed",        "5",
                                  "--trials",      "3",
                                  "--compress",    "lle,lle-unk",
                                  "--keep-ratios", "1.0,0.5",
                                  "--k",           "auto",
                                  "--out",         out,
                                  "--quiet"};
    auto with_json = args;
    with_json.push_back("--json");
    const auto j = json_of(cli(with_json));
    ASSERT_TRUE(j.contains("protocol")) << j.dump();
    const auto& p = j["protocol"];
    EXPECT_EQ(p, j["training"]["protocol"]);
    EXPECT_EQ(p["seeds"], Json::array({5, 6, 7}));
    EXPECT_EQ(p["trials"], 3);
    EXPECT_EQ(p["split"]["seed"], 42);
    EXPECT_EQ(p["split"]["validation_examples"], 3);
    EXPECT_EQ(p["train_examples"], 27);
    EXPECT_EQ(p["common_vocabulary"]["source"], "training text");
    ASSERT_EQ(p["settings"].size(), 4u); // lle and lle-unk at r 1.0 and 0.5
    for (const auto& s : p["settings"]) {
        const bool lle = s["method"] == "lle";
        if (lle) {
            EXPECT_EQ(s["k_candidates"], Json::array({1, 2, 3, 4, 5}));
            // The chosen k is the first of the best mean validation scores.
            double best = -1;
            int64_t k = 0;
            for (const auto& c : s["per_k"])
                if (c["validation"]["mean"].get<double>() > best + 1e-12) {
                    best = c["validation"]["mean"].get<double>();
                    k = c["k"].get<int64_t>();
                }
            EXPECT_EQ(s["k"], k);
        } else {
            EXPECT_FALSE(s.contains("k"));
        }
        for (const char* part : {"test", "validation"}) {
            const auto values = s[part]["values"].get<std::vector<double>>();
            ASSERT_EQ(values.size(), 3u);
            const double mean = (values[0] + values[1] + values[2]) / 3;
            const double var =
                ((values[0] - mean) * (values[0] - mean) + (values[1] - mean) * (values[1] - mean) +
                 (values[2] - mean) * (values[2] - mean)) /
                2;
            EXPECT_NEAR(s[part]["mean"].get<double>(), mean, 1e-12);
            EXPECT_NEAR(s[part]["std"].get<double>(), std::sqrt(var), 1e-12);
        }
    }
    // r(V_C) 1.0 keeps every id the 27 training sentences use: the 10 words' ids and the specials.
    EXPECT_GT(p["settings"][0]["common"].get<int64_t>(), p["settings"][1]["common"].get<int64_t>());
    // The written classifier is trial 1's (seed 5), trained on the split's 27 sentences.
    EXPECT_EQ(j["training"]["seed"], 5);
    EXPECT_EQ(j["training"]["examples"], 27);
    const auto task = json_of(cli({"task", "sst2", out, "--data", test, "--json", "--quiet"}));
    EXPECT_DOUBLE_EQ(task["accuracy"].get<double>(), p["original"]["test"]["values"][0].get<double>());
    // The printed table: one row per setting with mean ± std.
    auto plain = args;
    plain.push_back("--force");
    const auto text = cli(plain);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(
        text.out.find("protocol: 3 trials (seeds 5, 6, 7), sst2 accuracy on 12 test examples, trained on 27"),
        std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("k chosen on 3 validation examples (10% of --train, seed 42)"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("original "), std::string::npos) << text.out;
    EXPECT_NE(text.out.find(" ± "), std::string::npos) << text.out;

    // Refusals, each before any training, with its exact message.
    auto refused = [&](std::vector<std::string> extra, const std::vector<std::string>& drop,
                       const std::string& message) {
        std::vector<std::string> a;
        for (size_t i = 0; i < args.size(); ++i) {
            if (std::find(drop.begin(), drop.end(), args[i]) != drop.end()) {
                ++i; // the option and its value
                continue;
            }
            a.push_back(args[i]);
        }
        a.insert(a.end(), extra.begin(), extra.end());
        const auto r = cli_here(a);
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    };
    refused({"--trials", "0"}, {"--trials"}, "finetune: --trials must be between 1 and 100, got 0");
    refused({}, {"--k"},
            "finetune: --compress lle needs --k K[,K2..] or --k auto (chosen on a 10% validation "
            "split of --train, seed 42, as the paper)");
    refused({}, {"--compress"}, "finetune: --keep-ratios applies to --compress lle|lle-unk|lle-pca");
    refused({}, {"--eval"},
            "finetune: --trials and --compress score the classifiers on --eval FILE (the test "
            "set); give it");
    refused({"--compress", "pca"}, {"--compress"},
            "finetune: --compress takes lle, lle-unk or lle-pca (comma-separated), not 'pca'");
    const auto two = sst2("two.tsv", 0, 2);
    refused({"--train", two, "--force"}, {"--train"},
            two + ": k is chosen on a validation split of the training data, and holding out 1 of 2 training "
                  "examples for validation leaves fewer than 2 to train on");
}

} // namespace
} // namespace embedlab::test
