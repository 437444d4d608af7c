#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <malloc.h>
#include <thread>
#include <unistd.h>

#include <openssl/evp.h>

#include "embedlab/compressed_model.hpp"
#include "embedlab/error.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/lora.hpp"
#include "embedlab/model.hpp"
#include "embedlab/peer_environment.hpp"
#include "embedlab/text_format.hpp"
#include "io/dtype_convert.hpp"
#include "io/gguf_parser.hpp"
#include "io/mapped_file.hpp"
#include "model/manifest_support.hpp"
#include "tokenizer/gguf_tokenizer.hpp"

namespace embedlab {

namespace {

std::filesystem::path find_llama2c_tokenizer(const std::filesystem::path& checkpoint, int64_t vocab_size)
{
    const auto dir = checkpoint.parent_path();
    for (const auto& name : {std::string("tokenizer.bin"), "tok" + std::to_string(vocab_size) + ".bin"})
        if (std::filesystem::exists(dir / name))
            return dir / name;
    throw InputError(checkpoint.string() + ": no tokenizer found beside the checkpoint (looked for " +
                     (dir / "tokenizer.bin").string() + " and tok" + std::to_string(vocab_size) +
                     ".bin); pass --tokenizer FILE");
}

// A --tokenizer for a GGUF that lists its own tokens (tokenizer.ggml.tokens, also a
// vocabulary whose pre-tokenizer EmbedLab does not implement) must be that list: another
// tokenizer's ids index other rows, and every number computed with them is silently
// wrong (a 32,000-token tokenizer on a 50,257-row gpt2 GGUF gave perplexity 76,879).
// The list is read again here, through the torch-free parser, so ModelFiles need not
// carry it. Rows after the tokenizer's last id that llama.cpp's converter pads with
// ("[PADn]", or token type 5, unused) are rows no id reaches: they pass.
void check_tokenizer_against_gguf(const Tokenizer& tokenizer, const std::filesystem::path& tokenizer_source,
                                  const std::filesystem::path& gguf_path)
{
    const auto file = io::MappedFile::open(gguf_path);
    const io::GgufFile gguf = io::parse_gguf(*file);
    const io::GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
    if (!tokens || tokens->type != io::GgufType::Array || tokens->elem_type != io::GgufType::String)
        return;
    const std::vector<std::string>& listed = tokens->strings;
    const io::GgufValue* types = gguf.find("tokenizer.ggml.token_type");
    const bool have_types = types && types->type == io::GgufType::Array &&
                            types->elem_type == io::GgufType::Int32 && types->count == listed.size();
    auto is_padding = [&](size_t id) {
        return listed[id] == "[PAD" + std::to_string(id) + "]" || (have_types && types->element(id).i == 5);
    };
    const std::string where = tokenizer_source.string() + ": ";
    const std::string gguf_name = gguf_path.string();
    const auto have = static_cast<size_t>(std::max<int64_t>(tokenizer.vocab_size(), 0));
    bool padded_tail = have < listed.size();
    for (size_t id = have; id < listed.size() && padded_tail; ++id)
        padded_tail = is_padding(id);
    if (have != listed.size() && !padded_tail)
        throw InputError(
            where + "the tokenizer has " + std::to_string(have) + " tokens but " + gguf_name + " lists " +
            std::to_string(listed.size()) +
            " of its own (tokenizer.ggml.tokens): its ids would index other embedding rows; pass "
            "the tokenizer the GGUF was converted with");
    // The token strings as GGUF stores them, where this tokenizer can say (a
    // byte-level BPE with another pre-tokenizer cannot: its count alone is compared).
    const std::optional<GgufVocabulary> own = tokenizer.gguf_vocabulary();
    if (!own)
        return;
    for (size_t id = 0; id < own->tokens.size() && id < listed.size(); ++id)
        if (own->tokens[id] != listed[id])
            throw InputError(
                where + "token " + std::to_string(id) + " is '" + printable(own->tokens[id]) + "' but " +
                gguf_name + " lists '" + printable(listed[id]) +
                "' (tokenizer.ggml.tokens; the first id that differs): its ids would index other "
                "embedding rows; pass the tokenizer the GGUF was converted with");
}

} // namespace

std::unique_ptr<Tokenizer> load_model_tokenizer(const ModelFiles& files, const LoadOptions& options,
                                                std::filesystem::path* tokenizer_path)
{
    const std::string label = files.path.string();
    std::filesystem::path source;
    std::unique_ptr<Tokenizer> tokenizer;
    switch (files.format) {
    case ModelFormat::HuggingFace:
        source = options.tokenizer ? *options.tokenizer : files.path;
        tokenizer = load_tokenizer_from_directory(source);
        break;
    case ModelFormat::GGUF:
        if (options.tokenizer) { // a vocabulary EmbedLab does not read from GGUF (gpt2's BPE)
            source = *options.tokenizer;
            tokenizer = load_tokenizer_from_directory(source);
            check_tokenizer_against_gguf(*tokenizer, source, files.path);
            break;
        }
        // SentencePiece (scored pieces) as read with the model; gpt2's byte-level BPE
        // and bert's WordPiece from the file's tokenizer.ggml.* (refused by name otherwise).
        if (files.embedded_vocab && !files.embedded_vocab->scores.empty())
            tokenizer = make_scored_vocab_tokenizer(*files.embedded_vocab, "gguf-llama", label);
        else
            tokenizer = tokenizer_impl::load_gguf_tokenizer(files.path);
        break;
    case ModelFormat::Llama2c:
        source = options.tokenizer ? *options.tokenizer
                                   : find_llama2c_tokenizer(files.path, files.config.vocab_size);
        tokenizer = load_llama2c_tokenizer(source, files.config.vocab_size);
        break;
    }
    if (tokenizer->vocab_size() > files.config.vocab_size)
        throw InputError(label + ": the tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                         " tokens but the embedding has only " + std::to_string(files.config.vocab_size) +
                         " rows");
    if (tokenizer_path)
        *tokenizer_path = source;
    return tokenizer;
}

LoadedModel load_model(const std::filesystem::path& model, const LoadOptions& options)
{
    LoadedModel out;
    out.files = read_model_files(model, options.values);
    if (options.verify && !out.files.embedlab_manifest.empty())
        detail::verify_weights_files(out.files.embedlab_manifest, out.files.path, out.files.files);
    if (options.need_tokenizer || options.tokenizer)
        out.tokenizer = load_model_tokenizer(out.files, options, &out.tokenizer_path);
    // The weights move into the model: one map, no second copy to keep in step.
    std::optional<ManifestEmbeddings> tables;
    if (!out.files.embedlab_manifest.empty())
        tables = embeddings_from_manifest(out.files.embedlab_manifest, out.files.embedding_factors,
                                          out.files.config, model.string());
    if (tables && tables->tokens) {
        out.model = std::make_unique<LanguageModel>(out.files.config, std::move(out.files.weights),
                                                    std::move(tables->tokens), model.string(),
                                                    std::move(tables->positions));
    } else {
        out.model =
            std::make_unique<LanguageModel>(out.files.config, std::move(out.files.weights), model.string());
    }
    out.files.weights.clear();
    // Unmerged LoRA adapters (finetune): DIR/adapters.safetensors, checked above with the rest.
    if (!out.files.embedlab_manifest.empty())
        attach_lora_from_directory(*out.model, out.files.embedlab_manifest, out.files.path);
    return out;
}

GenerationWeights parse_generation_weights(const std::string& text, const std::string& field)
{
    if (text == "half")
        return GenerationWeights::Half;
    if (text == "f32")
        return GenerationWeights::F32;
    throw InputError(field + ": '" + text + "' is not a weight precision; expected half or f32");
}

LoadedModel load_model_for_generation(const std::filesystem::path& model, const LoadOptions& options,
                                      GenerationWeights weights)
{
    std::error_code ec;
    // Compressed directories' factor tensors are read as float32 by their embeddings
    // (MODEL may name a file inside the directory, as load_model allows).
    const auto dir = std::filesystem::is_directory(model, ec) ? model : model.parent_path();
    const bool compressed = std::filesystem::exists(dir / "embedlab.json", ec);
    if (weights == GenerationWeights::F32 || compressed)
        return load_model(model, options);
    const io::KeepHalfMatrices keep_half;
    return load_model(model, options);
}

bool holds_half_weights(const LanguageModel& model)
{
    return std::any_of(model.weights().begin(), model.weights().end(), [](const auto& entry) {
        return entry.second.scalar_type() == torch::kHalf || entry.second.scalar_type() == torch::kBFloat16;
    });
}

std::string sha256_file(const std::filesystem::path& file)
{
    std::FILE* f = std::fopen(file.c_str(), "rb");
    if (!f)
        throw InputError(file.string() + ": cannot open for hashing");
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
    std::vector<unsigned char> buf(1 << 20);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0)
        EVP_DigestUpdate(ctx.get(), buf.data(), n);
    const bool failed = std::ferror(f);
    std::fclose(f);
    if (failed)
        throw InputError(file.string() + ": read error while hashing");
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), digest, &len);
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < len; ++i) {
        s += hex[digest[i] >> 4];
        s += hex[digest[i] & 15];
    }
    return s;
}

int thread_count_setting(const char* value, int cores)
{
    cores = std::max(cores, 1);
    if (!value)
        return cores;
    // More threads than a few per core only oversubscribe (and a huge count makes
    // libtorch's pool start for minutes, deaf to signals): refuse rather than guess.
    const int most = 4 * cores;
    const std::string text = value;
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 1 || n > most)
        throw InputError("EMBEDLAB_THREADS is '" + printable(text) + "': give a whole number from 1 to " +
                         std::to_string(most) + " (4 per core on this machine), or unset it to use all " +
                         std::to_string(cores) + " cores");
    return n;
}

void init_runtime()
{
    // Keep large freed blocks in the heap instead of unmapping them: fresh pages
    // fault in slowly (about 7 ms per MB on the VMs we measured), and every
    // forward pass allocates tens of MB of activations and logits.
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    at::set_num_threads(thread_count_setting(std::getenv("EMBEDLAB_THREADS"),
                                             static_cast<int>(std::thread::hardware_concurrency())));
}

void restart_with_passive_openmp(char** argv)
{
    if (std::getenv("OMP_WAIT_POLICY") || !argv || !argv[0])
        return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0 || setenv(kOmpWaitPolicySetByEmbedLab, "1", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY"); // exec failed: run on, honest about the policy
    unsetenv(kOmpWaitPolicySetByEmbedLab);
}

std::vector<std::string> unset_for_peers()
{
    if (!std::getenv(kOmpWaitPolicySetByEmbedLab))
        return {};
    return {"-u", "OMP_WAIT_POLICY", "-u", kOmpWaitPolicySetByEmbedLab};
}

std::string peer_openmp_wait_policy()
{
    return std::getenv(kOmpWaitPolicySetByEmbedLab) ? "default (spinning)" : openmp_wait_policy();
}

std::string openmp_wait_policy()
{
    const char* value = std::getenv("OMP_WAIT_POLICY");
    return value && *value ? std::string(value) : "default (spinning)";
}

} // namespace embedlab
