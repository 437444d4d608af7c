// Hardening (issue 35): --out and --force never destroy what a user made, and bad
// input (arguments, environment, job files, configs, manifests) gets one clear line
// and exit 2. Each case failed before the fix.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "cli_in_process.hpp"
#include "cli_support.hpp"
#include "embedlab/model.hpp"
#include "embedlab/output_checks.hpp"
#include "overflow_models.hpp"
#include "tiny_models.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::CliRun;
using embedlab::test::expect_refused;
using embedlab::test::read_text;
using embedlab::test::TempDir;
namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text)
{
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

// A tiny SST-2 dev.tsv: header, then sentence <tab> label.
fs::path sst2_file(const TempDir& dir)
{
    write(dir / "dev.tsv", "sentence\tlabel\na lovely film .\t1\na dull , tired mess .\t0\n");
    return dir / "dev.tsv";
}

// Item 1: task --out overwrote any file, its own --data file included.
TEST(Hardening, TaskOutRefusesItsInputAndAnExistingFileWithoutForce)
{
    TempDir dir;
    const auto data = sst2_file(dir).string();
    const std::string before = read_text(data);
    for (const auto& force : {std::vector<std::string>{}, std::vector<std::string>{"--force"}}) {
        std::vector<std::string> args{"task", "sst2", "--data", data, "--out", data, "--quiet"};
        args.insert(args.end(), force.begin(), force.end());
        expect_refused(cli_here(args), "is the input");
        EXPECT_EQ(read_text(data), before);
    }
    write(dir / "mine.jsonl", "my notes\n");
    expect_refused(
        cli_here({"task", "sst2", "--data", data, "--out", (dir / "mine.jsonl").string(), "--quiet"}),
        "already exists (use --force");
    EXPECT_EQ(read_text(dir / "mine.jsonl"), "my notes\n");
    expect_refused(
        cli_here({"task", "sst2", "--data", data, "--out", dir.path().string(), "--force", "--quiet"}),
        "is a directory");
    const auto ok =
        cli({"task", "sst2", "--data", data, "--out", (dir / "mine.jsonl").string(), "--force", "--quiet"});
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_NE(read_text(dir / "mine.jsonl").find("\"index\""), std::string::npos);
}

// Item 2: --force wiped any directory holding a file named embedlab.json.
TEST(Hardening, ForceKeepsADirectoryWithAForeignOrEditedManifest)
{
    TempDir dir;
    const auto photos = dir / "photos";
    write(photos / "2024" / "img.jpg", "x");
    write(photos / "embedlab.json", "notes");
    const auto r = cli_here(
        {"compress", "--method", "pca", "--rank", "4", "--out", photos.string(), "--force", "--quiet"});
    expect_refused(r, "not written by EmbedLab");
    EXPECT_EQ(read_text(photos / "2024" / "img.jpg"), "x");
    EXPECT_EQ(read_text(photos / "embedlab.json"), "notes");

    // A real EmbedLab directory to which the user added a file, or in which they edited one.
    const auto out = dir / "pca";
    ASSERT_EQ(cli({"compress", "--method", "pca", "--rank", "4", "--out", out.string(), "--quiet"}).exit_code,
              0);
    EXPECT_TRUE(fs::exists(out / embedlab::kWrittenFilesName));
    write(out / "analysis" / "notes.txt", "mine");
    expect_refused(
        cli_here({"compress", "--method", "pca", "--rank", "8", "--out", out.string(), "--force", "--quiet"}),
        "analysis/notes.txt");
    EXPECT_EQ(read_text(out / "analysis" / "notes.txt"), "mine");
    fs::remove_all(out / "analysis");
    {
        std::ofstream(out / "config.json", std::ios::app) << "\n"; // edited by hand
    }
    expect_refused(
        cli_here({"compress", "--method", "pca", "--rank", "8", "--out", out.string(), "--force", "--quiet"}),
        "changed since EmbedLab wrote them (config.json)");
    // Untouched, it is replaced.
    fs::remove_all(out);
    ASSERT_EQ(cli({"compress", "--method", "pca", "--rank", "4", "--out", out.string(), "--quiet"}).exit_code,
              0);
    const auto replaced = cli({"compress", "--method", "pca", "--rank", "8", "--out", out.string(), "--force",
                               "--json", "--quiet"});
    ASSERT_EQ(replaced.exit_code, 0) << replaced.err;
    EXPECT_NE(read_text(out / "embedlab.json").find("\"rank\": 8"), std::string::npos);
}

// Item 3: synth --force deleted any directory with a config.json (someone's real model).
TEST(Hardening, SynthForceReplacesOnlyItsOwnOutput)
{
    TempDir dir;
    const auto model = embedlab::test::write_tiny_hf_model(dir / "real", embedlab::Architecture::Llama);
    expect_refused(cli_here({"synth", "--like", "smollm2-135m", "--layers", "1", "--out", model.string(),
                             "--force", "--quiet"}),
                   "not written by EmbedLab");
    EXPECT_TRUE(fs::exists(model / "model.safetensors"));
}

// Item 3: export --force replaced any GGUF file; finetune --force its own input.
TEST(Hardening, ExportForceReplacesOnlyAGgufEmbedLabWrote)
{
    TempDir dir;
    // A GGUF someone else wrote (llama2.c's stories260K, as converted for llama.cpp).
    fs::copy_file(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/stories260K.gguf",
                  dir / "downloaded.gguf");
    const std::string gguf = read_text(dir / "downloaded.gguf");
    expect_refused(cli_here({"export", "--out", (dir / "downloaded.gguf").string(), "--force", "--quiet"}),
                   "is a GGUF file EmbedLab did not write");
    EXPECT_EQ(read_text(dir / "downloaded.gguf"), gguf);
    const auto ours = (dir / "ours.gguf").string();
    ASSERT_EQ(cli({"export", "--out", ours, "--type", "f32", "--quiet"}).exit_code, 0);
    expect_refused(cli_here({"export", "--out", ours, "--quiet"}), "already exists (use --force");
    const auto again = cli({"export", "--out", ours, "--type", "f16", "--force", "--quiet"});
    EXPECT_EQ(again.exit_code, 0) << again.err;

    const auto pca = (dir / "pca").string();
    ASSERT_EQ(cli({"compress", "--method", "pca", "--rank", "4", "--out", pca, "--quiet"}).exit_code, 0);
    write(dir / "train.txt", "Once upon a time there was a cat. The cat sat on the mat.\n");
    expect_refused(cli_here({"finetune", pca, "--train-text", (dir / "train.txt").string(), "--steps", "1",
                             "--out", pca, "--force", "--quiet"}),
                   "is the input");
    EXPECT_TRUE(fs::exists(fs::path(pca) / "embedlab.json"));
}

// Item 5: EMBEDLAB_THREADS was read with atoi, unbounded.
TEST(Hardening, ThreadCountIsValidated)
{
    EXPECT_EQ(embedlab::thread_count_setting(nullptr, 2), 2);
    EXPECT_EQ(embedlab::thread_count_setting("1", 2), 1);
    EXPECT_EQ(embedlab::thread_count_setting("8", 2), 8);
    for (const char* bad : {"abc", "0", "-1", "9", "1000000", "4x", ""})
        EXPECT_THROW(embedlab::thread_count_setting(bad, 2), embedlab::InputError) << bad;
    expect_refused(cli({"inspect", "--json"}, {"EMBEDLAB_THREADS=1000000"}), "EMBEDLAB_THREADS is '1000000'");
    expect_refused(cli({"inspect", "--json"}, {"EMBEDLAB_THREADS=abc"}), "a whole number from 1 to");
    EXPECT_EQ(cli({"inspect", "--json"}, {"EMBEDLAB_THREADS=1"}).exit_code, 0);
}

// Item 6: long list arguments and models that cannot fit were accepted without an estimate.
TEST(Hardening, WorkThatCannotFitIsRefusedBeforeItStarts)
{
    TempDir dir;
    std::string ranks;
    for (int i = 1; i <= 300; ++i) {
        if (i > 1)
            ranks += ',';
        ranks += std::to_string(i % 60 + 1);
    }
    write(dir / "t.txt", "Once upon a time.\n");
    expect_refused(
        cli_here({"sweep", "--method", "pca", "--ranks", ranks, "--eval-text", (dir / "t.txt").string()}),
        "--ranks has more than 256 values");
    EXPECT_THROW(
        embedlab::check_fits_on_disk(dir / "model", uint64_t{1} << 62, "synth: model", "fewer layers"),
        embedlab::InputError);
    EXPECT_NO_THROW(embedlab::check_fits_on_disk(dir / "model", 1 << 20, "synth: model", "fewer layers"));
}

// Item 8: a config that makes the forward pass overflow gave "ppl": null and exit 0.
TEST(Hardening, ConfigValuesThatOverflowAreRefusedAndNonFiniteLossIsAnError)
{
    TempDir dir;
    const auto model = embedlab::test::write_tiny_hf_model(dir / "m", embedlab::Architecture::Llama);
    auto config = nlohmann::json::parse(read_text(model / "config.json"));
    config["rope_theta"] = 1e-300;
    write(model / "config.json", config.dump());
    write(dir / "ids.txt", "1 2 3 4 5 6 7 8 9 10");
    expect_refused(
        cli_here({"eval", model.string(), "--ids", (dir / "ids.txt").string(), "--ctx", "8", "--json"}),
        "a rotary base must be at least 1");

    // Weights so large the logits overflow: an error, not a null perplexity.
    const auto big = dir / "big";
    const auto c = embedlab::test::tiny_config(embedlab::Architecture::Llama);
    embedlab::test::write_tiny_hf_model(big, embedlab::Architecture::Llama);
    auto w = embedlab::test::random_weights(c);
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (auto& [name, t] : w)
        tensors.emplace_back(name, name.find("norm") != std::string::npos ? t * 1e37 : t);
    embedlab::write_safetensors(big / "model.safetensors", tensors, {{"format", "pt"}});
    const auto r =
        cli_here({"eval", big.string(), "--ids", (dir / "ids.txt").string(), "--ctx", "8", "--json"});
    expect_refused(r, "non-finite loss");
    EXPECT_EQ(r.out.find("null"), std::string::npos) << r.out;
}

// Issue 57 item 3: eval alone refused a model whose finite weights overflow; generate gave
// ids [0, 0, 0] with null log-probabilities, --compare "mean KL -nan", embed "nan nan ..",
// task sst2 accuracy 0.5000 and stsb Spearman -0.5, all with exit 0.
TEST(Hardening, EveryCommandThatReportsANumberRefusesAModelThatOverflows)
{
    using embedlab::test::write_overflowing_encoder;
    using embedlab::test::write_tiny_llama_with_tokenizer;
    TempDir dir;
    const auto bad = write_tiny_llama_with_tokenizer(dir / "bad", "down_proj").string();
    const auto good = write_tiny_llama_with_tokenizer(dir / "good", "").string();
    const std::vector<std::string> prompt{"--prompt", "a lovely film", "--max-tokens", "3"};
    auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    };
    auto ok = cli(with({"generate", good, "--json"}, prompt));
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    auto r = cli_here(with({"generate", bad, "--json"}, prompt));
    expect_refused(r, "the model's forward pass gave non-finite logits for generated token 1 (");
    expect_refused(r, "its weights or config values");
    EXPECT_EQ(r.out.find("null"), std::string::npos) << r.out;
    r = cli_here(with({"generate", good, "--compare", bad}, prompt));
    expect_refused(r, "the reference model's forward pass gave non-finite logits for generated token 1");
    EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;

    write(dir / "ids.txt", "1 2 3 4 5 6 7 8 9 10 11 12");
    r = cli_here(
        {"eval", good, "--ids", (dir / "ids.txt").string(), "--ctx", "8", "--reference", bad, "--json"});
    expect_refused(r, "the reference model's forward pass gave non-finite logits in window 1");

    const auto data = sst2_file(dir).string();
    ok = cli({"task", "sst2", good, "--data", data, "--json", "--quiet"});
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    expect_refused(cli_here({"task", "sst2", bad, "--data", data, "--json", "--quiet"}),
                   "the model's forward pass gave a non-finite log-likelihood");
    expect_refused(cli_here({"task", "sst2", good, "--data", data, "--reference", bad, "--json", "--quiet"}),
                   "the reference " + bad + ": the model's forward pass gave a non-finite log-likelihood");
    const auto bert =
        write_overflowing_encoder(dir / "bert", "bert-cls", "layer.0.output.dense.weight").string();
    expect_refused(cli_here({"task", "sst2", bert, "--data", data, "--json", "--quiet"}),
                   "the model's forward pass gave non-finite classifier logits for example 1");

    const auto minilm =
        write_overflowing_encoder(dir / "minilm", "minilm-st", "layer.0.output.dense.weight").string();
    const auto stsb = (fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/glue_formats/stsb.tsv").string();
    r = cli_here({"task", "stsb", minilm, "--data", stsb, "--json", "--quiet"});
    expect_refused(r, "the model's forward pass gave a non-finite embedding of pair 1's first sentence");
    EXPECT_EQ(r.out.find("spearman"), std::string::npos) << r.out;

    write(dir / "lines.txt", "a dog runs .\na man plays the guitar .\n");
    r = cli_here({"embed", minilm, "--text", (dir / "lines.txt").string(), "--quiet"});
    expect_refused(r, "the model's forward pass gave a non-finite embedding of text 1 (");
    EXPECT_EQ(r.err.find("lines.txt:"), std::string::npos) << "the model's fault, not the text's: " << r.err;
    EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
}

// Items 9, 13: parseable bad job files were internal errors, duplicate keys silently won.
TEST(Hardening, JobFilesWithWrongTypesOrDuplicateKeysAreInputErrors)
{
    TempDir dir;
    write(dir / "kind.json", R"({"kind": 5})");
    auto r = cli_here({"worker", "--job", (dir / "kind.json").string()});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.out.find("\\\"kind\\\" must be"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("type must be string"), std::string::npos) << r.out;
    write(dir / "twice.json", R"({"kind": "eval", "model": "a", "model": "b", "text": "t"})");
    expect_refused(cli_here({"remote", "run", "localhost", (dir / "twice.json").string()}),
                   "key 'model' appears twice");
    write(dir / "worker-twice.json", R"({"kind": "eval", "kind": "measure"})");
    r = cli_here({"worker", "--job", (dir / "worker-twice.json").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("appears twice"), std::string::npos) << r.err;
}

// Item 10: control characters from files and arguments were echoed raw.
TEST(Hardening, ControlCharactersInMessagesAreEscaped)
{
    const auto r =
        cli_here({"synth", "--like", "x\x1b[2J\x1b]0;PWNED\x07", "--out", "/nonexistent/x", "--quiet"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\x07'), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("\\x1B[2J"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Items 12, 13: arguments the parser misread, unclear messages, accepted duplicates.
TEST(Hardening, ArgumentsAreReadAsTheUserMeantThem)
{
    TempDir dir;
    expect_refused(cli_here({"inspect", "-x"}), "unknown option -x");
    expect_refused(cli_here({"compress", "--method", "pca", "--rank", "--out", (dir / "d").string()}),
                   "option --rank needs a value (it is followed by the option --out)");
    expect_refused(cli_here({"compress", "--method", "pca", "--rank", "4", "--rank", "8", "--out",
                             (dir / "d").string()}),
                   "option --rank is given twice ('4' and '8')");
    EXPECT_FALSE(fs::exists(dir / "d"));
    write(dir / "ids.txt", "5 7 abc 9");
    expect_refused(cli_here({"eval", "--ids", (dir / "ids.txt").string()}),
                   "the 3rd entry, 'abc', is not a token id");
    // --out under a regular file: refused before any work.
    write(dir / "file", "x");
    expect_refused(
        cli_here({"compress", "--method", "pca", "--rank", "4", "--out", (dir / "file" / "sub").string()}),
        "is not a directory");
    expect_refused(cli_here({"train", "--config", "tiny", "--embedding", "table", "--train-text",
                             (dir / "ids.txt").string(), "--steps", "1", "--hidden-ratio", "0", "--out",
                             (dir / "t").string()}),
                   "hidden ratio must be in (0");
}

// Item 12: a manifest that is not an object was reported as listing no weights.
TEST(Hardening, ManifestThatIsNotAnObjectIsNamedSo)
{
    TempDir dir;
    const auto out = dir / "pca";
    ASSERT_EQ(cli({"compress", "--method", "pca", "--rank", "4", "--out", out.string(), "--quiet"}).exit_code,
              0);
    const std::string manifest = read_text(out / "embedlab.json");
    write(out / "embedlab.json", "[]");
    expect_refused(cli_here({"inspect", out.string()}), "not a JSON object");
    // Fields other tools read must agree with the rest.
    auto m = nlohmann::json::parse(manifest);
    m["parameters"]["method"] = "svd";
    write(out / "embedlab.json", m.dump());
    expect_refused(cli_here({"inspect", out.string()}),
                   "parameters.method \"svd\" differs from method 'pca'");
    m = nlohmann::json::parse(manifest);
    m["weights_files"][0]["bytes"] = 1;
    write(out / "embedlab.json", m.dump());
    expect_refused(cli_here({"inspect", out.string()}), "embedlab.json records 1");
    write(out / "embedlab.json", R"({"format": "x", "format": "y"})");
    expect_refused(cli_here({"inspect", out.string()}), "appears twice");
}

// Items 12, 13: a tokenizer.json that is a FIFO was "no tokenizer found"; a broken one
// was passed over for vocab.json + merges.txt.
TEST(Hardening, TokenizerJsonIsReadFirstAndNamedWhenUnusable)
{
    TempDir dir;
    const auto model = dir / "model";
    fs::copy(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/tinygpt2-f16", model,
             fs::copy_options::recursive);
    write(dir / "t.txt", "Once upon a time.");
    const std::vector<std::string> tokenize{"tokenize", model.string(), "--text", (dir / "t.txt").string()};
    ASSERT_EQ(cli(tokenize).exit_code, 0);
    write(model / "tokenizer.json", R"({"version": "1.0"})");
    expect_refused(cli_here(tokenize), "vocab.json and merges.txt beside it are not used instead");
    fs::remove(model / "tokenizer.json");
    ASSERT_EQ(::mkfifo((model / "tokenizer.json").c_str(), 0600), 0);
    expect_refused(cli_here(tokenize), "tokenizer.json: is not a regular file (a FIFO)");
}

// Item 11: a failed sbatch left the sweep directory behind; its message doubled "sbatch: ".
TEST(Hardening, FailedSubmissionLeavesNoSweepDirectory)
{
    TempDir dir;
    const auto bin = dir / "bin";
    for (const char* tool : {"sbatch", "squeue", "scontrol"}) {
        write(
            bin / tool,
            "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Unable to contact slurm controller "
            "(connect failure)' >&2\nexit 1\n");
        fs::permissions(bin / tool, fs::perms::owner_all);
    }
    write(
        dir / "t.txt",
        read_text(fs::path(EMBEDLAB_SOURCE_DIR) / "resources/texts/tinystories-heldout.txt").substr(0, 2000));
    const auto sweep = dir / "sweep";
    const std::string path = "PATH=" + bin.string() + ":" + std::getenv("PATH");
    const auto r = cli({"sweep", "--method", "pca", "--ranks", "4", "--eval-text", (dir / "t.txt").string(),
                        "--slurm", "--sweep-dir", sweep.string(), "--quiet"},
                       {"-u", "SLURM_CONF", path});
    expect_refused(r, "no Slurm controller is reachable and SLURM_CONF is unset");
    EXPECT_EQ(r.err.find("sbatch: sbatch:"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(sweep)) << "the failed submission left " << sweep;
}

// Issue 57 item 4: account --vocab 2^40 --dim 2^24 reported "dense table 0.00M params", ratio
// inf, exit 0 (V d wrapped to 0); the engine's accounting now refuses any count beyond 2^62.
TEST(Hardening, AccountRefusesATableTooLargeToCount)
{
    auto r = cli_here(
        {"account", "--method", "pca", "--vocab", "1099511627776", "--dim", "16777216", "--rank", "8"});
    expect_refused(r, "account: vocab x dim = 1099511627776 x 16777216 = 18446744073709551616 parameters "
                      "exceeds what EmbedLab counts (2^62)");
    EXPECT_TRUE(r.out.empty()) << r.out;
    r = cli_here({"account", "--method", "tt", "--vocab", "1099511627776", "--shape", "4096,4096", "--ranks",
                  "1,8,1", "--json"});
    expect_refused(r, "exceeds what EmbedLab counts (2^62)");
    EXPECT_TRUE(r.out.empty()) << r.out;
}

} // namespace
