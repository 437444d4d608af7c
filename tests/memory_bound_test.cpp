// Memory per input byte (issue 57 item 9): reading a sweep's event logs and
// tokenizing a hostile text keep their peak memory within a bound of the input's
// size, not a multiple of it.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedlab/divergence_report.hpp"
#include "embedlab/error.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/slurm.hpp"
#include "embedlab/token_damage.hpp"
#include "embedlab/tokenizer.hpp"
#include "eval/decoded_size.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"
#include "tokenizer/windowed_merge.hpp"

namespace {

std::string heldout_story()
{
    return embedlab::test::read_text(std::filesystem::path(EMBEDLAB_SOURCE_DIR) /
                                     "resources/texts/tinystories-heldout.txt");
}

// `story` repeated and cut to `size` bytes: a large text of ordinary English.
std::string story_of_size(const std::string& story, size_t size)
{
    std::string text;
    text.reserve(size);
    while (text.size() < size)
        text += story;
    text.resize(size);
    return text;
}

namespace fs = std::filesystem;
using embedlab::test::TempDir;

void write(const fs::path& p, const std::string& text)
{
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

using embedlab::test::status_kb;

// A one-task sweep directory as `sweep --slurm` writes it, submitted as job 4242, with a
// fake squeue on PATH that reports nothing queued.
struct SweepDir {
    TempDir dir;
    fs::path sweep = dir / "sweep";
    std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
    SweepDir()
    {
        write(sweep / "sweep.sh", "#!/bin/sh\n");
        fs::create_directories(sweep / "logs");
        write(sweep / "job-0.json", R"({"kind": "compress"})");
        nlohmann::json manifest = {{"format", "embedlab-slurm-sweep"},
                                   {"version", 1},
                                   {"tasks", 1},
                                   {"info", {{"model", "m"}, {"method", "pca"}, {"points", 1}}},
                                   {"submissions", {{{"job_id", "4242"}, {"tasks", {0}}}}}};
        write(sweep / "manifest.json", manifest.dump(1));
        write(dir / "bin/squeue", "#!/bin/sh\nexit 0\n");
        fs::permissions(dir / "bin/squeue", fs::perms::owner_all);
        ::setenv("PATH", ((dir / "bin").string() + ":" + old_path).c_str(), 1);
    }
    ~SweepDir() { ::setenv("PATH", old_path.c_str(), 1); }
    fs::path events() const { return sweep / "logs/task-0.out"; }
};

const std::string kResult =
    R"({"event": "result", "result": {"record": {"spec": {"method": "pca", "rank": 4}}}})"
    "\n";

TEST(EventLogs, ANormalLogGivesTheNodeTheLastProgressAndTheResult)
{
    SweepDir s;
    write(s.events(), R"({"event": "started", "slurm": {"node": "n7"}})"
                      "\n"
                      R"({"event": "progress", "stage": "fit", "done": 1, "total": 3})"
                      "\n"
                      "not json\n"
                      R"({"event": "progress", "stage": "fit", "done": 2, "total": 3})"
                      "\n" +
                          kResult);
    write(s.sweep / "logs/task-0.err", "ignored\n");
    const auto tasks = embedlab::slurm_sweep_status(s.sweep);
    ASSERT_EQ(tasks.size(), 1u);
    EXPECT_EQ(tasks[0].state, embedlab::SlurmTaskState::Done);
    EXPECT_EQ(tasks[0].node, "n7");
    EXPECT_EQ(tasks[0].progress["done"], 2);
    EXPECT_EQ(tasks[0].result["record"]["spec"]["rank"], 4);

    // Without a final newline, and a log that ends without a result.
    write(s.events(), R"({"event": "progress", "stage": "fit", "done": 1, "total": 3})");
    write(s.sweep / "logs/task-0.err", std::string(200'000, 'x') + "\nsecond\nthird\n");
    const auto killed = embedlab::slurm_sweep_status(s.sweep);
    EXPECT_EQ(killed[0].state, embedlab::SlurmTaskState::Failed);
    EXPECT_EQ(killed[0].progress["done"], 1);
    EXPECT_NE(killed[0].message.find("ended without a result"), std::string::npos) << killed[0].message;
    EXPECT_EQ(killed[0].stderr_tail.substr(killed[0].stderr_tail.size() - 12), "second\nthird");

    write(s.events(), "");
    EXPECT_NE(embedlab::slurm_sweep_status(s.sweep)[0].message.find("ended without running"),
              std::string::npos);
}

// sweep-status read each log whole, three copies of it (a 208 MB log peaked at 624 MB);
// now line by line.
TEST(EventLogs, ALargeLogIsReadInBoundedMemory)
{
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "ASan keeps freed memory in quarantine: RSS says nothing here";
#endif
    SweepDir s;
    size_t size = 0;
    {
        std::ofstream out(s.events(), std::ios::binary);
        std::string block;
        for (int i = 0; i < 10000; ++i)
            block += R"({"event": "progress", "stage": "fit", "done": )" + std::to_string(i) +
                     R"(, "total": 1000000})"
                     "\n";
        while (size < (size_t{120} << 20)) {
            out << block;
            size += block.size();
        }
        out << kResult;
        size += kResult.size();
    }
    if (!embedlab::test::reset_peak_rss())
        GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
    const long before = status_kb("VmRSS");
    const auto tasks = embedlab::slurm_sweep_status(s.sweep);
    const long grown_kb = status_kb("VmHWM") - before;
    ASSERT_EQ(tasks.size(), 1u);
    EXPECT_EQ(tasks[0].state, embedlab::SlurmTaskState::Done);
    EXPECT_EQ(tasks[0].progress["done"], 9999);
    std::printf("a %zu MB event log: peak %ld MB above the RSS before\n", size >> 20, grown_kb / 1024);
    const double bound = 32.0 * (1 << 20) + 0.1 * static_cast<double>(size);
    EXPECT_LE(grown_kb * 1024.0, bound)
        << "a " << (size >> 20) << " MB log grew the peak by " << grown_kb / 1024 << " MB";
}

TEST(EventLogs, AnOverlongLineIsRefusedWithTheFileAndLine)
{
    SweepDir s;
    {
        std::ofstream out(s.events(), std::ios::binary);
        out << R"({"event": "started"})"
            << "\n";
        const std::string block(size_t{1} << 20, 'x');
        for (int i = 0; i < 65; ++i)
            out << block;
        out << "\n" << kResult;
    }
    try {
        embedlab::slurm_sweep_status(s.sweep);
        ADD_FAILURE() << "a 65 MiB line was read";
    } catch (const embedlab::InputError& e) {
        EXPECT_NE(std::string(e.what()).find(s.events().string() + ":2: a line longer than 64 MiB"),
                  std::string::npos)
            << e.what();
    }
}

// ---- tokenize ----------------------------------------------------------------------

// Why a run's peak RSS cannot be measured here, or null.
const char* peak_rss_unmeasurable()
{
#if defined(__SANITIZE_ADDRESS__)
    return "ASan keeps freed memory in quarantine and pads every block: RSS says nothing here";
#endif
    if (::access("/usr/bin/time", X_OK) != 0)
        return "needs /usr/bin/time (Debian: apt-get install time) to measure a run's peak RSS";
    return nullptr;
}

// Peak RSS of one embedlab-cli run in bytes, its output thrown away; -1 if it failed.
// Measured by /usr/bin/time, a small process that forks it: a child forked from this
// test starts its ru_maxrss at this process's RSS (Linux copies the high-water mark
// with the memory, and exec keeps it).
long long cli_peak_bytes(const std::vector<std::string>& args, const fs::path& dir)
{
    std::fflush(stdout); // or the child writes this process's pending output again
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::freopen("/dev/null", "w", stdout);
        std::freopen((dir / "err").c_str(), "w", stderr);
        const std::string out = (dir / "maxrss").string();
        std::vector<const char*> argv{"/usr/bin/time", "-f", "%M", "-o", out.c_str(), EMBEDLAB_CLI_PATH};
        for (const auto& a : args)
            argv.push_back(a.c_str());
        argv.push_back(nullptr);
        ::setenv("EMBEDLAB_THREADS", "1", 1);
        ::setenv("OMP_NUM_THREADS", "1", 1);
        ::execv(argv[0], const_cast<char* const*>(argv.data()));
        std::_Exit(127);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ADD_FAILURE() << "embedlab-cli " << args[0] << " " << args[1]
                      << " failed: " << embedlab::test::read_text(dir / "err");
        return -1;
    }
    return std::atoll(embedlab::test::read_text(dir / "maxrss").c_str()) * 1024;
}

// `tokenize` reads the tokenizer, not the weights: on a 4-layer Qwen2.5-0.5B shape in f16
// (392 MB stored, 784 MB as float32, a 151,665-id tokenizer) its peak stays below the
// stored bytes. It loaded every weight as float32 (the full shape: 2.1 GB to tokenize).
TEST(Tokenize, ReadsTheTokenizerNotTheWeights)
{
    if (const char* why = peak_rss_unmeasurable())
        GTEST_SKIP() << why;
    TempDir dir;
    const auto model = dir / "qwen-f16";
    ASSERT_EQ(cli_peak_bytes({"synth", "--like", "qwen2.5-0.5b", "--layers", "4", "--dtype", "f16", "--out",
                              model.string(), "--quiet"},
                             dir.path()) > 0,
              true);
    write(dir / "tiny.txt", "Once upon a time\n");
    const auto stored = static_cast<long long>(fs::file_size(model / "model.safetensors"));
    const long long peak =
        cli_peak_bytes({"tokenize", model.string(), "--text", (dir / "tiny.txt").string()}, dir.path());
    EXPECT_GT(peak, 0);
    EXPECT_LT(peak, stored) << "tokenize peaked at " << (peak >> 20) << " MB; the weights are "
                            << (stored >> 20) << " MB stored";
}

// Hostile texts for `tokenize` (issue 57 item 9): NUL bytes (one id per byte with
// every tokenizer here), ordinary text, and one long word. Each costs at most 5 bytes
// per input byte above a run on a tiny text (the text itself and int32 ids take 5
// for one id a byte), with --json too; 8 MiB more are allowed for the fixed
// buffers (windows, parts) and the allocator. They were 13-17 bytes per byte
// (WordPiece text, byte-level and SentencePiece NULs), 52 with --json.
TEST(Tokenize, PeakMemoryIsAtMostFiveBytesPerInputByte)
{
    if (const char* why = peak_rss_unmeasurable())
        GTEST_SKIP() << why;
    TempDir dir;
    constexpr size_t size = size_t{24} << 20;
    const auto story = heldout_story();
    std::string text = story_of_size(story, size);
    write(dir / "text.txt", text);
    write(dir / "nul.txt", std::string(size, '\0'));
    write(dir / "word.txt", std::string(size, 'a'));
    write(dir / "tiny.txt", "Once upon a time\n");
    text = {};

    std::vector<std::string> models{
        (fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders/bert-cls").string()}; // WordPiece
    if (embedlab::test::have_shared()) {
        models.push_back((embedlab::test::shared_dir() / "models/tinygpt2-f16").string()); // byte-level BPE
        models.push_back((embedlab::test::shared_dir() / "models/tinyllama").string());    // SentencePiece
    }
    for (const auto& model : models) {
        const long long baseline =
            cli_peak_bytes({"tokenize", model, "--text", (dir / "tiny.txt").string()}, dir.path());
        for (const char* input : {"nul.txt", "text.txt", "word.txt"})
            for (const bool json : {false, true}) {
                std::vector<std::string> args{"tokenize", model, "--text", (dir / input).string()};
                if (json)
                    args.push_back("--json");
                const long long peak = cli_peak_bytes(args, dir.path());
                const double per_byte = static_cast<double>(peak - baseline) / static_cast<double>(size);
                std::printf("%s %s%s: %.2f bytes per input byte (%lld MB above %lld MB)\n",
                            fs::path(model).filename().c_str(), input, json ? " --json" : "", per_byte,
                            (peak - baseline) >> 20, baseline >> 20);
                EXPECT_LE(peak - baseline, 5LL * static_cast<long long>(size) + (8LL << 20))
                    << model << " " << input << (json ? " --json" : "") << ": " << per_byte
                    << " bytes per input byte";
            }
    }
}

// A SentencePiece BPE model written by hand (tokenizer_test.cpp's): add_dummy_prefix,
// remove_extra_whitespaces and escape_whitespaces keep their default, true; with
// `user_defined`, "<sep>" is a user-defined symbol.
std::string pb_varint(uint64_t v)
{
    std::string out;
    for (; v >= 0x80; v >>= 7)
        out += static_cast<char>((v & 0x7F) | 0x80);
    return out + static_cast<char>(v);
}
std::string pb_message(uint32_t field, const std::string& payload)
{
    return pb_varint(field << 3 | 2) + pb_varint(payload.size()) + payload;
}
std::string pb_piece(const std::string& text, float score, int type = 1)
{
    std::string m = pb_message(1, text) + pb_varint(2 << 3 | 5);
    m.append(reinterpret_cast<const char*>(&score), 4);
    if (type != 1)
        m += pb_varint(3 << 3) + pb_varint(static_cast<uint64_t>(type));
    return pb_message(1, m);
}
std::string squeezing_sentencepiece_model(bool user_defined)
{
    std::string m = pb_piece("<unk>", 0, 2) + pb_piece("<s>", 0, 3) + pb_piece("</s>", 0, 3) +
                    pb_piece("\xE2\x96\x81", -1) + pb_piece("a", -2) + pb_piece("b", -3) +
                    pb_piece("ab", -0.5f) + pb_piece("\xE2\x96\x81\xE2\x96\x81", -0.7f) +
                    pb_piece("\xE2\x96\x81"
                             "ab",
                             -0.2f);
    if (user_defined)
        m += pb_piece("<sep>", 0, 4);
    m += pb_message(2, pb_varint(3 << 3) + pb_varint(2)); // BPE
    m += pb_message(3, pb_message(1, "identity"));
    return m;
}

// WordPiece decodes and normalises a text a part (1 MiB) at a time, cut between two
// ASCII bytes, and SentencePiece normalises and merges it a part at a time: neither
// changes an id. WordPiece: a 3 MB text of accented, combining, CJK and long words
// gives the ids of its lines encoded one by one (each shorter than a part; the Bert
// normaliser makes a newline a space). SentencePiece: with small windows (parts of
// 256 KiB) the ids of the whole merge, on text with runs of spaces, NULs and
// ill-formed bytes.
TEST(Tokenize, PartsChangeNoId)
{
    std::mt19937 random(57);
    const char* words[] = {"naïve",        "café", "日本語", "Ωμέγα",  "e\xCC\x81", "A\xCC\x8A", "straße",
                           "\xEF\xBC\xA1", "x",    "don't",  "U.S.A.", "\t",        "Éé",        "ǅ"};
    std::string text;
    std::vector<std::string> lines;
    while (text.size() < (size_t{3} << 20)) {
        std::string line;
        const size_t length = 1000 + random() % 200000;
        while (line.size() < length) {
            if (random() % 8 == 0) { // a long word, often cut
                for (int i = 0, n = static_cast<int>(random() % 400); i < n; ++i)
                    line += random() % 5 == 0 ? std::string(words[random() % 6])
                                              : std::string(1, static_cast<char>('a' + random() % 26));
            } else {
                line += words[random() % std::size(words)];
            }
            line += random() % 3 == 0 ? "" : " ";
        }
        lines.push_back(line);
        text += line + "\n";
    }
    const auto bert = embedlab::load_tokenizer_from_directory(fs::path(EMBEDLAB_SOURCE_DIR) /
                                                              "tests/data/encoders/bert-cls");
    std::vector<int32_t> by_line;
    for (const auto& line : lines) {
        const auto ids = bert->encode(line);
        by_line.insert(by_line.end(), ids.begin(), ids.end());
    }
    EXPECT_TRUE(bert->encode(text) == by_line);

    EMBEDLAB_REQUIRE_SHARED();
    using embedlab::tokenizer_impl::set_merge_window_bytes;
    struct Restore {
        ~Restore() { set_merge_window_bytes(size_t{1} << 16); }
    } restore;
    std::string mixed;
    const auto story = heldout_story();
    while (mixed.size() < (size_t{3} << 20)) {
        mixed += story.substr(random() % 10000, random() % 20000);
        mixed += std::string(random() % 3000, "  \0\xFF\xE2"[random() % 5]);
        mixed += "\xE2\x96\x81 ";
    }
    const auto llama =
        embedlab::load_sentencepiece(embedlab::test::shared_dir() / "models/tinyllama/tokenizer.model");
    set_merge_window_bytes(size_t{1} << 40);
    const auto whole = llama->encode(mixed);
    set_merge_window_bytes(64);
    EXPECT_TRUE(llama->encode(mixed) == whole);
    set_merge_window_bytes(size_t{1} << 16);
    EXPECT_TRUE(llama->encode(mixed) == whole);

    // Squeezed spaces, literal "▁", unknown characters and user-defined symbols; a
    // text that ends in a long run of "▁" (dropped with the trailing spaces).
    TempDir dir;
    const char* pieces[] = {"a", "b", "ab", " ", "   ", "\xE2\x96\x81", "c", "<sep>", "\xFF", " <sep> "};
    std::string spaced;
    while (spaced.size() < (size_t{3} << 20))
        spaced += random() % 50 == 0 ? std::string(random() % 5000, random() % 2 ? ' ' : 'a')
                                     : std::string(pieces[random() % std::size(pieces)]);
    for (const bool user_defined : {false, true}) {
        write(dir / "t.model", squeezing_sentencepiece_model(user_defined));
        const auto tok = embedlab::load_sentencepiece(dir / "t.model");
        std::string ending = spaced;
        for (int i = 0; i < 200000; ++i)
            ending += i % 1000 == 999 ? " " : "\xE2\x96\x81";
        for (const auto* text : {&spaced, &ending}) {
            set_merge_window_bytes(size_t{1} << 40);
            const auto all = tok->encode(*text);
            set_merge_window_bytes(64);
            const auto got = tok->encode(*text);
            size_t d = 0;
            while (d < got.size() && d < all.size() && got[d] == all[d])
                ++d;
            EXPECT_TRUE(got == all) << user_defined << " " << text->size() << " first diff " << d << " of "
                                    << all.size() << "/" << got.size() << " spaced ids "
                                    << (text == &ending ? tok->encode(spaced).size() : 0);
        }
    }
}

// ---- eval ----------------------------------------------------------------------------

// GPT-2's printable stand-ins for the 256 bytes (byte-level BPE's vocab.json keys).
std::string gpt2_byte_symbol(int byte)
{
    const auto printable = [](int b) {
        return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    };
    int code = byte;
    if (!printable(byte)) {
        code = 256;
        for (int b = 0; b < byte; ++b)
            code += printable(b) ? 0 : 1;
    }
    std::string utf8; // code < 0x800: one or two bytes
    if (code < 0x80)
        utf8 += static_cast<char>(code);
    else {
        utf8 += static_cast<char>(0xC0 | (code >> 6));
        utf8 += static_cast<char>(0x80 | (code & 0x3F));
    }
    return utf8;
}

// One small tokenizer of each family, each about one token per byte of the texts here
// (the costliest case for memory), with vocabularies of at most 300 so that a tiny
// model evaluates 24 MiB in seconds. Byte-level BPE: the 256 bytes and three merges;
// SentencePiece BPE with byte fallback; WordPiece with single characters.
void write_small_tokenizers(const fs::path& dir)
{
    nlohmann::json vocab;
    for (int b = 0; b < 256; ++b)
        vocab[gpt2_byte_symbol(b)] = b;
    const std::string space = gpt2_byte_symbol(' ');
    vocab[space + "t"] = 256;
    vocab["he"] = 257;
    vocab[space + "the"] = 258;
    write(dir / "bpe/vocab.json", vocab.dump());
    write(dir / "bpe/merges.txt", "#version: 0.2\n" + space + " t\nh e\n" + space + "t he\n");

    std::string sp = pb_piece("<unk>", 0, 2) + pb_piece("<s>", 0, 3) + pb_piece("</s>", 0, 3);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        sp += pb_piece(name, 0, 6); // byte pieces
    }
    const char* pieces[] = {"\xE2\x96\x81",   "e", "t", "a", "o", "h", "n", "\xE2\x96\x81t", "he",
                            "\xE2\x96\x81the"};
    for (size_t i = 0; i < std::size(pieces); ++i)
        sp += pb_piece(pieces[i], -1.0f - static_cast<float>(i));
    sp += pb_message(2, pb_varint(3 << 3) + pb_varint(2) + pb_varint(35 << 3) +
                            pb_varint(1)); // BPE, byte fallback
    sp += pb_message(3, pb_message(1, "identity"));
    write(dir / "sentencepiece/tokenizer.model", sp);

    std::string words = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (char c = '!'; c <= '~'; ++c)
        words += std::string(1, c) + "\n";
    for (char c = '!'; c <= '~'; ++c)
        words += "##" + std::string(1, c) + "\n";
    write(dir / "wordpiece/vocab.txt", words);
}

// Eval's text (issue 57 item 9): at most 5 bytes per input byte, for each tokenizer
// family and with --json. The ids stay int32 (4 bytes per token), widened to int64 a
// batch at a time, and bits per byte counts the decoded bytes without decoding the
// whole text: eval was 12-13 bytes per byte. Tiny decoders read every family's ids, so
// the forward pass costs little beside the text: byte-level BPE and SentencePiece with
// the small vocabularies above (one id per NUL, about one per byte of the story) on a
// 300-token model; WordPiece with bert-cls's vocabulary (as the tokenize test; a
// character-level one is Tokenize.ACharacterLevelWordPieceVocabulary...) on a
// 2000-token model. Measured per byte between the first MiB of each text and 4 MiB of
// it: the tokenizers' fixed buffers (WordPiece's 1 MiB parts: about 15 MB) are in both,
// the growth is per byte. 4 MiB (not tokenize's 24), one run per family, keeps it to about 40 s;
// the old cost (about 38 MB for the 3 MiB) is well above the bound (23 MB).
TEST(EvalText, PeakMemoryIsAtMostFiveBytesPerInputByte)
{
    if (const char* why = peak_rss_unmeasurable())
        GTEST_SKIP() << why;
    TempDir dir;
    constexpr size_t small = size_t{1} << 20, size = size_t{4} << 20;
    const auto story = heldout_story();
    std::string text = story_of_size(story, size);
    write(dir / "text.txt", text);
    write(dir / "text-small.txt", text.substr(0, small));
    write(dir / "nul.txt", std::string(size, '\0'));
    write(dir / "nul-small.txt", std::string(small, '\0'));
    text = {};
    write_small_tokenizers(dir.path());
    const auto tiny_decoder = [&](const std::string& name, int64_t vocab) {
        embedlab::ModelConfig c = embedlab::test::tiny_config(embedlab::Architecture::GPT2);
        c.vocab_size = vocab;
        c.hidden_size = 8;
        c.num_layers = 1;
        c.num_heads = 1;
        c.intermediate_size = 16;
        c.max_positions = 128;
        return embedlab::test::write_tiny_hf_model(dir / name, c, embedlab::test::random_weights(c));
    };
    const fs::path small_model = tiny_decoder("model-300", 300),
                   bert_model = tiny_decoder("model-2000", 2000);
    const fs::path bert = fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders/bert-cls";

    // Each family once and --json once (each run scores every token: that is the time):
    // NULs plain for byte-level BPE, the story with --json for SentencePiece, the story
    // plain for WordPiece (which drops NULs).
    for (const auto& [tokenizer, model, input, json] :
         {std::tuple{dir / "bpe", small_model, "nul", false},
          std::tuple{dir / "sentencepiece", small_model, "text", true},
          std::tuple{bert, bert_model, "text", false}}) {
        const std::string family = tokenizer.filename().string();
        const auto eval = [&](const std::string& file) {
            std::vector<std::string> args{"eval",   model.string(),        "--tokenizer", tokenizer.string(),
                                          "--text", (dir / file).string(), "--ctx",       "128",
                                          "--quiet"};
            if (json)
                args.push_back("--json");
            return cli_peak_bytes(args, dir.path());
        };
        const long long baseline = eval(std::string(input) + "-small.txt"),
                        peak = eval(std::string(input) + ".txt");
        const double per_byte = static_cast<double>(peak - baseline) / static_cast<double>(size - small);
        std::printf("eval %s %s%s: %.2f bytes per input byte (%lld MB more for 3 MiB more)\n", family.c_str(),
                    input, json ? " --json" : "", per_byte, (peak - baseline) >> 20);
        EXPECT_LE(peak - baseline, 5LL * static_cast<long long>(size - small) + (8LL << 20))
            << family << " " << input << (json ? " --json" : "") << ": " << per_byte
            << " bytes per input byte";
    }
    // The small vocabularies give the costly case: about one id per byte of the story.
    const auto sample = story.substr(0, 20000);
    for (const char* family : {"bpe", "sentencepiece"})
        EXPECT_GE(embedlab::load_tokenizer_from_directory(dir / family)->encode(sample).size(),
                  9 * sample.size() / 10)
            << family;
}

// A GPT-2 decoder of width 8 and one layer over `vocab` tokens, written to `dir`: cheap
// enough that the text, not the forward pass, is what a run holds.
fs::path write_small_decoder(const fs::path& dir, int64_t vocab, uint64_t seed)
{
    embedlab::ModelConfig c = embedlab::test::tiny_config(embedlab::Architecture::GPT2);
    c.vocab_size = vocab;
    c.hidden_size = 8;
    c.num_layers = 1;
    c.num_heads = 1;
    c.intermediate_size = 16;
    c.max_positions = 128;
    return embedlab::test::write_tiny_hf_model(dir, c, embedlab::test::random_weights(c, seed));
}

// A character-level WordPiece vocabulary (each letter a token, about 0.8 ids per byte of
// the story) held its ids at 7.2-9 bytes per input byte: the ids outgrew a quarter-id-
// per-byte guess twice and the heap kept each outgrown block (init_runtime keeps freed
// blocks resident). Now room for one id per byte is reserved at once: the text and its
// int32 ids, at most 5. Measured between 4 and 24 MiB of the story, so the tokenizer's
// fixed buffers (1 MiB parts) are in both: 7.19 bytes per byte before (144 MB for the
// 20 MiB more, over the 108 MB bound), 4.17 after.
TEST(Tokenize, ACharacterLevelWordPieceVocabularyIsAtMostFiveBytesPerInputByte)
{
    if (const char* why = peak_rss_unmeasurable())
        GTEST_SKIP() << why;
    TempDir dir;
    constexpr size_t small = size_t{4} << 20, size = size_t{24} << 20;
    const auto story = heldout_story();
    std::string text = story_of_size(story, size);
    write(dir / "text.txt", text);
    write(dir / "text-small.txt", text.substr(0, small));
    text = {};
    write_small_tokenizers(dir.path());
    const fs::path model = write_small_decoder(dir / "model", 300, 7);
    const auto tokenize = [&](const std::string& file) {
        return cli_peak_bytes({"tokenize", model.string(), "--tokenizer", (dir / "wordpiece").string(),
                               "--text", (dir / file).string()},
                              dir.path());
    };
    const long long baseline = tokenize("text-small.txt"), peak = tokenize("text.txt");
    const double per_byte = static_cast<double>(peak - baseline) / static_cast<double>(size - small);
    std::printf(
        "tokenize, character-level WordPiece: %.2f bytes per input byte (%lld MB more for 20 MiB more)\n",
        per_byte, (peak - baseline) >> 20);
    EXPECT_LE(peak - baseline, 5LL * static_cast<long long>(size - small) + (8LL << 20))
        << per_byte << " bytes per input byte";
    // The costly case: most bytes are an id.
    const auto sample = story.substr(0, 20000);
    EXPECT_GE(embedlab::load_tokenizer_from_directory(dir / "wordpiece")->encode(sample).size(),
              7 * sample.size() / 10);
}

// eval --reference kept every scored position's ids, NLLs, KL and agreement (and
// copies for the statistics): 75.7 bytes per scored position. Now 16 (its KL and
// Delta-p in float64, which the percentiles need exactly), plus the ids (4) and the ids
// file read (2 bytes an id here): at most 32 allowed. Ids of a 16-token vocabulary,
// so two tiny decoders score 768 Ki positions in seconds; measured between 256 Ki
// and 1 Mi ids: 75.7 bytes per position before (57 MB, over the 33 MB bound), 22 after.
TEST(EvalText, AReferenceReportIsAtMost32BytesPerScoredPosition)
{
    if (const char* why = peak_rss_unmeasurable())
        GTEST_SKIP() << why;
    TempDir dir;
    constexpr size_t small = size_t{1} << 18, size = size_t{1} << 20;
    std::mt19937 random(57);
    std::string ids;
    for (size_t i = 0; i < size; ++i) {
        ids += std::to_string(random() % 16);
        ids += ' ';
        if (i + 1 == small)
            write(dir / "ids-small.txt", ids);
    }
    write(dir / "ids.txt", ids);
    ids = {};
    const fs::path model = write_small_decoder(dir / "model", 16, 7),
                   reference = write_small_decoder(dir / "reference", 16, 8);
    const auto eval = [&](const std::string& file) {
        return cli_peak_bytes({"eval", model.string(), "--reference", reference.string(), "--ids",
                               (dir / file).string(), "--ctx", "128", "--quiet", "--json"},
                              dir.path());
    };
    const long long baseline = eval("ids-small.txt"), peak = eval("ids.txt");
    const auto positions = static_cast<double>(size - small); // ctx 128: all but one id a window
    const double per_position = static_cast<double>(peak - baseline) / positions;
    std::printf("eval --reference: %.2f bytes per scored position (%lld MB more for %.0f more)\n",
                per_position, (peak - baseline) >> 20, positions);
    EXPECT_LE(static_cast<double>(peak - baseline), 32 * positions + (8 << 20))
        << per_position << " bytes per scored position";
}

// The report eval --reference prints is evaluate_divergence then token_damage, bit for
// bit: every statistic, every token's counts, cosine and KL, every bucket, with windows
// that overlap (stride < ctx) and without, and ids whose counts fill many buckets.
TEST(EvalText, TheReferenceReportIsTheDivergenceThenTheDamageBitForBit)
{
    TempDir dir;
    const auto model =
        embedlab::load_model(write_small_decoder(dir / "model", 64, 7), {.need_tokenizer = false});
    const auto reference =
        embedlab::load_model(write_small_decoder(dir / "reference", 64, 8), {.need_tokenizer = false});
    std::mt19937 random(60);
    std::vector<int32_t> ids;
    for (int i = 0; i < 5000; ++i) // skewed: id k about twice as often as id k + 1, for the first ids
        ids.push_back(static_cast<int32_t>(
            std::min<uint32_t>(63, std::countr_zero(random() | 1u << 31) * 3 + random() % 3)));
    const auto same_bits = [](const std::vector<double>& a, const std::vector<double>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
    };
    for (const auto& [ctx, stride] : {std::pair{64, 64}, std::pair{48, 17}, std::pair{100, 99}}) {
        const embedlab::PerplexityOptions options{.ctx = ctx, .stride = stride};
        const auto d = embedlab::evaluate_divergence(*model.model, *reference.model, ids, options);
        const auto damage = embedlab::token_damage(*model.model, *reference.model, d.positions);
        const auto report =
            embedlab::evaluate_divergence_report(*model.model, *reference.model, ids, options);
        const auto& r = report.divergence;
        const std::string where = "ctx " + std::to_string(ctx) + " stride " + std::to_string(stride);
        EXPECT_EQ(embedlab::divergence_json(r).dump(), embedlab::divergence_json(d).dump()) << where;
        for (const auto& [got, want] : {std::pair{r.ppl, d.ppl},
                                        {r.reference_ppl, d.reference_ppl},
                                        {r.delta_ln_ppl, d.delta_ln_ppl},
                                        {r.kl_mean, d.kl_mean},
                                        {r.kl_median, d.kl_median},
                                        {r.top1_agreement, d.top1_agreement}})
            EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << where;
        EXPECT_EQ(r.tokens, d.tokens) << where;
        EXPECT_EQ(r.windows, d.windows) << where;
        EXPECT_EQ(r.ctx, d.ctx) << where;
        EXPECT_EQ(r.stride, d.stride) << where;
        EXPECT_EQ(r.positions.size(), 0u) << where;
        EXPECT_EQ(embedlab::token_damage_buckets_json(report.damage).dump(),
                  embedlab::token_damage_buckets_json(damage).dump())
            << where;
        EXPECT_GE(damage.buckets.size(), 6u) << where; // counts from 0 to hundreds
        EXPECT_TRUE(same_bits(report.damage.cosine, damage.cosine)) << where;
        EXPECT_TRUE(same_bits(report.damage.kl_as_target, damage.kl_as_target)) << where;
        EXPECT_TRUE(same_bits(report.damage.kl_as_input, damage.kl_as_input)) << where;
        EXPECT_EQ(report.damage.target_count, damage.target_count) << where;
        EXPECT_EQ(report.damage.input_count, damage.input_count) << where;
        EXPECT_EQ(report.damage.bucket, damage.bucket) << where;
        EXPECT_EQ(embedlab::token_damage_csv(report.damage, nullptr),
                  embedlab::token_damage_csv(damage, nullptr))
            << where;
    }
}

// Bits per byte counts the bytes decode gives a chunk of ids at a time: the count equals
// the whole decode's size for every family, with chunks cut inside words, multi-byte
// UTF-8 characters (split across byte tokens), runs of NULs, and behind a leading
// control token (SentencePiece strips the first piece's space only).
TEST(EvalText, DecodedBytesCountedChunkByChunkAreTheWholeDecodesBytes)
{
    TempDir dir;
    write_small_tokenizers(dir.path());
    std::vector<fs::path> tokenizers{dir / "bpe", dir / "sentencepiece", dir / "wordpiece",
                                     fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders/bert-cls"};
    if (embedlab::test::have_shared()) {
        tokenizers.push_back(embedlab::test::shared_dir() / "models/tinygpt2-f16");
        tokenizers.push_back(embedlab::test::shared_dir() / "models/tinyllama");
    }
    const auto story = heldout_story();
    const std::string text =
        " " + story.substr(0, 3000) + std::string(40, '\0') + " naïve café 日本語 Ωμέγα " +
        "\xF0\x9F\x98\x80\xF0\x9F\x98\x80 straße\xE2\x96\x81 x" + story.substr(3000, 2000);
    for (const auto& path : tokenizers) {
        const auto tokenizer = embedlab::load_tokenizer_from_directory(path);
        auto ids = tokenizer->encode(text);
        ASSERT_GT(ids.size(), 1000u) << path;
        for (int round = 0; round < 2; ++round) {
            const auto whole = static_cast<int64_t>(tokenizer->decode(ids).size());
            for (const size_t chunk : {1, 2, 3, 7, 64, 1000})
                EXPECT_EQ(embedlab::detail::decoded_size(*tokenizer, ids, chunk), whole)
                    << path << " chunk " << chunk << (round ? " behind a control token" : "");
            // Behind a leading control token ([CLS], <s>) or an id of an empty decode.
            const auto control = tokenizer->cls_id() ? *tokenizer->cls_id() : tokenizer->bos_id().value_or(0);
            ids.insert(ids.begin(), control);
        }
    }
}

} // namespace
