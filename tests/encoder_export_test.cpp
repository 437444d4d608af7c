// GGUF export of encoders (issue 42): EmbedLab's file for minilm-st holds what
// llama.cpp's own convert_hf_to_gguf.py wrote for it (tests/data/encoders/minilm-st.gguf:
// every tensor bit for bit, every tokenizer and bert.* key), loads back computing the
// same hidden states and token ids, and what llama.cpp could not run is refused.
#include <gtest/gtest.h>

#include <cstring>

#include "embedlab/encoder.hpp"
#include "embedlab/model_export.hpp"
#include "io/gguf_parser.hpp"
#include "io/mapped_file.hpp"
#include "test_support.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

fs::path encoders()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders";
}

// A value's bytes as compared here: scalars by their fields, arrays element by element.
std::string value_text(const io::GgufValue& v)
{
    if (v.type != io::GgufType::Array)
        return std::to_string(static_cast<int>(v.type)) + ":" + std::to_string(v.u) + ":" +
               std::to_string(v.i) + ":" + std::to_string(v.f) + ":" + v.s;
    std::string out =
        "array " + std::to_string(static_cast<int>(v.elem_type)) + " x" + std::to_string(v.count);
    if (!v.strings.empty()) {
        for (const auto& s : v.strings)
            out += "|" + s;
        return out;
    }
    for (uint64_t k = 0; k < v.count; ++k)
        out += "|" + value_text(v.element(k));
    return out;
}

struct ReadGguf {
    std::shared_ptr<io::MappedFile> file;
    io::GgufFile gguf;
    explicit ReadGguf(const fs::path& path) : file(io::MappedFile::open(path)), gguf(io::parse_gguf(*file)) {}
    const uint8_t* data(const io::GgufTensorInfo& t) const
    {
        return file->data() + gguf.data_start + t.offset;
    }
};

} // namespace

TEST(EncoderGgufExport, HoldsWhatLlamaCppsConverterWroteAndLoadsBack)
{
    test::TempDir tmp;
    const auto lm = load_model(encoders() / "minilm-st");
    const fs::path out = tmp / "minilm-st.gguf";
    const auto report = export_gguf(lm, out, {.type = GgufExportType::F32});
    EXPECT_EQ(report.architecture, "bert");

    const ReadGguf ours(out), theirs(encoders() / "minilm-st.gguf");
    // Every key but general.* (names, sizes, the file type, EmbedLab's own mark) equal.
    for (const auto& [key, value] : theirs.gguf.metadata) {
        if (key.starts_with("general."))
            continue;
        const auto* mine = ours.gguf.find(key);
        ASSERT_NE(mine, nullptr) << key;
        EXPECT_EQ(value_text(*mine), value_text(value)) << key;
    }
    for (const auto& [key, value] : ours.gguf.metadata)
        EXPECT_TRUE(key.starts_with("general.") || theirs.gguf.find(key)) << "extra key " << key;
    // Every tensor under the same name, shape and type, with the same bytes.
    ASSERT_EQ(ours.gguf.tensors.size(), theirs.gguf.tensors.size());
    std::map<std::string, const io::GgufTensorInfo*> mine;
    for (const auto& t : ours.gguf.tensors)
        mine[t.name] = &t;
    for (const auto& t : theirs.gguf.tensors) {
        ASSERT_TRUE(mine.count(t.name)) << t.name;
        const auto& m = *mine[t.name];
        EXPECT_EQ(m.ne, t.ne) << t.name;
        ASSERT_EQ(m.type, t.type) << t.name;
        int64_t n = 1;
        for (const auto e : t.ne)
            n *= e;
        EXPECT_EQ(std::memcmp(ours.data(m), theirs.data(t), static_cast<size_t>(n) * 4), 0) << t.name;
    }

    // Loaded back: the same body, tokenizer and pooling.
    const auto back = load_model(out);
    EXPECT_EQ(back.model->config().pooling, "mean");
    const std::string text = "Unbelievably, naïve cafés serve [MASK] coffee at 9:30!";
    EXPECT_EQ(back.tokenizer->encode(text), lm.tokenizer->encode(text));
    const auto batch = frame_texts(*lm.tokenizer, lm.model->config(), {text, "a man plays a guitar"});
    const auto want = batch_hidden_states(*lm.model, batch), got = batch_hidden_states(*back.model, batch);
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-6 * want.abs().max().item<double>());
}

TEST(EncoderGgufExport, RefusesWhatLlamaCppCouldNotRunOrTokenize)
{
    test::TempDir tmp;
    const auto classifier = load_model(encoders() / "bert-cls");
    test::expect_input_error([&] { export_gguf(classifier, tmp / "cls.gguf", {}); },
                             "a sequence classifier: llama.cpp's bert graph has no pooler");
    EXPECT_FALSE(fs::exists(tmp / "cls.gguf"));

    // minilm-st with the cased tokenizer: llama.cpp would lower-case it.
    const fs::path cased = tmp / "cased";
    fs::copy(encoders() / "minilm-st", cased, fs::copy_options::recursive);
    for (const char* f :
         {"tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
        fs::remove(cased / f);
        fs::copy_file(encoders() / "tokenizers/cased" / f, cased / f);
    }
    const auto lm = load_model(cased);
    test::expect_input_error([&] { export_gguf(lm, tmp / "cased.gguf", {}); }, "a cased WordPiece tokenizer");
    EXPECT_FALSE(fs::exists(tmp / "cased.gguf"));
}
