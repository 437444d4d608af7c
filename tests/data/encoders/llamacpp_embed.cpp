// Encoder reference harness over llama.cpp (not part of the EmbedLab build; see README.md here).
// Usage:
//   llamacpp-embed MODEL.gguf IDS_FILE POOLING [THREADS=2]
//     IDS_FILE: one input per line, space-separated token ids, specials included.
//     POOLING: none | mean | cls | rank | all (all = none+mean+cls, plus rank if the model has a classifier).
//     -> one JSON object on stdout:
//     {"n_embd":..,"threads":..,"inputs":[{"ids":[..],"hidden":[[..]..],"mean":[..],"cls":[..],"rank":[..]}]}
//        un-normalised, %.9g. Each input is decoded alone (sequence 0, positions 0..T-1) in a fresh context.
//   llamacpp-embed MODEL.gguf --tokenize TEXT_FILE
//     -> one JSON array per line of TEXT_FILE: llama_tokenize(add_special=true, parse_special=false).
//        Lines are JSON strings (so tabs/newlines/empty strings survive).
// Build: g++ -O2 -std=c++17 llamacpp_embed.cpp -I$SRC/include -I$SRC/ggml/include -L$LIB -lllama
// -Wl,-rpath,$LIB
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void print_vec(const float* v, int n)
{
    printf("[");
    for (int i = 0; i < n; ++i)
        printf(i ? ",%.9g" : "%.9g", v[i]);
    printf("]");
}

// Minimal JSON string decoder for the --tokenize input (handles \" \\ \/ \b \f \n \r \t \uXXXX incl.
// surrogates).
static std::string json_unquote(const std::string& s)
{
    std::string out;
    size_t i = s.find('"') + 1;
    auto put = [&](unsigned cp) {
        if (cp < 0x80)
            out += char(cp);
        else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | (cp >> 18));
            out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        }
    };
    while (i < s.size() && s[i] != '"') {
        if (s[i] != '\\') {
            out += s[i++];
            continue;
        }
        char c = s[i + 1];
        i += 2;
        switch (c) {
        case 'n':
            out += '\n';
            break;
        case 't':
            out += '\t';
            break;
        case 'r':
            out += '\r';
            break;
        case 'b':
            out += '\b';
            break;
        case 'f':
            out += '\f';
            break;
        case 'u': {
            unsigned cp = strtoul(s.substr(i, 4).c_str(), nullptr, 16);
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s[i] == '\\' && s[i + 1] == 'u') {
                unsigned lo = strtoul(s.substr(i + 2, 4).c_str(), nullptr, 16);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
            put(cp);
        } break;
        default:
            out += c;
        }
    }
    return out;
}

static int tokenize_mode(llama_model* model, const char* path)
{
    const llama_vocab* vocab = llama_model_get_vocab(model);
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        std::string text = json_unquote(line);
        std::vector<llama_token> ids(text.size() + 8);
        int n =
            llama_tokenize(vocab, text.data(), (int)text.size(), ids.data(), (int)ids.size(), true, false);
        if (n < 0) {
            ids.resize(-n);
            n = llama_tokenize(vocab, text.data(), (int)text.size(), ids.data(), (int)ids.size(), true,
                               false);
        }
        printf("[");
        for (int i = 0; i < n; ++i)
            printf(i ? ",%d" : "%d", ids[i]);
        printf("]\n");
    }
    return 0;
}

// Runs every input through a fresh context with the given pooling; fills out[input] with the rows.
static bool run(llama_model* model, const std::vector<std::vector<llama_token>>& inputs,
                enum llama_pooling_type pool, int threads, std::vector<std::vector<std::vector<float>>>& out)
{
    const int n_embd = llama_model_n_embd(model);
    const int n_cls = (int)llama_model_n_cls_out(model);
    out.assign(inputs.size(), {});
    for (size_t k = 0; k < inputs.size(); ++k) {
        const auto& ids = inputs[k];
        const int T = (int)ids.size();
        auto cp = llama_context_default_params();
        cp.n_ctx = cp.n_batch = cp.n_ubatch = std::max(T, 8);
        cp.n_threads = cp.n_threads_batch = threads;
        cp.embeddings = true;
        cp.pooling_type = pool;
        // LLAMA_EMBED_FA=0|1 forces flash attention off/on (default: llama.cpp's "auto")
        if (const char* fa = getenv("LLAMA_EMBED_FA"))
            cp.flash_attn_type = atoi(fa) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        llama_context* ctx = llama_init_from_model(model, cp);
        if (!ctx)
            return false;
        llama_set_embeddings(ctx, true);
        llama_batch b = llama_batch_init(T, 0, 1);
        for (int i = 0; i < T; ++i) {
            b.token[i] = ids[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        b.n_tokens = T;
        if (llama_decode(ctx, b) != 0) {
            fprintf(stderr, "decode failed\n");
            return false;
        }
        if (pool == LLAMA_POOLING_TYPE_NONE) {
            for (int i = 0; i < T; ++i) {
                const float* e = llama_get_embeddings_ith(ctx, i);
                out[k].emplace_back(e, e + n_embd);
            }
        } else {
            const float* e = llama_get_embeddings_seq(ctx, 0);
            int n = pool == LLAMA_POOLING_TYPE_RANK ? n_cls : n_embd;
            out[k].emplace_back(e, e + n);
        }
        llama_batch_free(b);
        llama_free(ctx);
    }
    return true;
}

int main(int argc, char** argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: %s MODEL.gguf IDS_FILE none|mean|cls|rank|all [THREADS]\n       %s MODEL.gguf "
                "--tokenize TEXT_FILE\n",
                argv[0], argv[0]);
        return 2;
    }
    llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
    llama_backend_init();
    auto mp = llama_model_default_params();
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "load failed\n");
        return 2;
    }
    if (std::string(argv[2]) == "--tokenize")
        return tokenize_mode(model, argv[3]);

    std::vector<std::vector<llama_token>> inputs;
    {
        std::ifstream f(argv[2]);
        std::string line;
        while (std::getline(f, line)) {
            std::istringstream ss(line);
            std::vector<llama_token> ids;
            long v;
            while (ss >> v)
                ids.push_back((llama_token)v);
            if (!ids.empty())
                inputs.push_back(ids);
        }
    }
    const std::string mode = argv[3];
    const int threads = argc > 4 ? atoi(argv[4]) : 2;
    const bool has_rank = llama_model_n_cls_out(model) > 0;
    struct PoolSpec {
        const char* key;
        enum llama_pooling_type type;
    };
    std::vector<PoolSpec> pools;
    if (mode == "none" || mode == "all")
        pools.push_back({"hidden", LLAMA_POOLING_TYPE_NONE});
    if (mode == "mean" || mode == "all")
        pools.push_back({"mean", LLAMA_POOLING_TYPE_MEAN});
    if (mode == "cls" || mode == "all")
        pools.push_back({"cls", LLAMA_POOLING_TYPE_CLS});
    if (mode == "rank" || (mode == "all" && has_rank))
        pools.push_back({"rank", LLAMA_POOLING_TYPE_RANK});
    if (pools.empty()) {
        fprintf(stderr, "bad pooling '%s'\n", mode.c_str());
        return 2;
    }

    std::vector<std::vector<std::vector<std::vector<float>>>> res(pools.size());
    for (size_t p = 0; p < pools.size(); ++p)
        if (!run(model, inputs, pools[p].type, threads, res[p]))
            return 1;

    printf("{\"n_embd\":%d,\"n_cls_out\":%u,\"threads\":%d,\"inputs\":[", llama_model_n_embd(model),
           llama_model_n_cls_out(model), threads);
    for (size_t k = 0; k < inputs.size(); ++k) {
        printf(k ? ",\n{\"ids\":[" : "\n{\"ids\":[");
        for (size_t i = 0; i < inputs[k].size(); ++i)
            printf(i ? ",%d" : "%d", inputs[k][i]);
        printf("]");
        for (size_t p = 0; p < pools.size(); ++p) {
            printf(",\"%s\":", pools[p].key);
            const auto& rows = res[p][k];
            if (pools[p].type == LLAMA_POOLING_TYPE_NONE) {
                printf("[");
                for (size_t r = 0; r < rows.size(); ++r) {
                    if (r)
                        printf(",");
                    print_vec(rows[r].data(), (int)rows[r].size());
                }
                printf("]");
            } else {
                print_vec(rows[0].data(), (int)rows[0].size());
            }
        }
        printf("}");
    }
    printf("]}\n");
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
