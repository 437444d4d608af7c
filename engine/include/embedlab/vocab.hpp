// A scored vocabulary as stored by llama2.c tokenizer.bin and GGUF
// (tokenizer.ggml.*): the input of the SentencePiece-style score-merge encoder.
//
// Thread safety: plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedlab {

struct ScoredVocab {
    std::vector<std::string> tokens; // raw token bytes ("▁" marks a space, "<0x0A>" a byte)
    std::vector<float> scores;       // merge priority, higher merges first
    std::vector<int32_t> types;      // GGUF token types (1 normal, 2 unknown, 3 control,
                                     // 6 byte); empty when the source has none
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t unk_id = -1;
    bool add_dummy_prefix = true; // prepend a space before encoding (SentencePiece default)
};

// A vocabulary as GGUF stores it (tokenizer.ggml.*), so an exported model
// carries its tokenizer to llama.cpp.
struct GgufVocabulary {
    std::string model;               // "llama" (scored pieces) or "gpt2" (byte-level BPE)
    std::string pre;                 // gpt2: llama.cpp's pre-tokenizer name ("gpt-2")
    std::vector<std::string> tokens; // by id
    std::vector<float> scores;       // llama only
    std::vector<int32_t> types;      // 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
    std::vector<std::string> merges; // gpt2 only: "left right", first merges first
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t unk_id = -1;
    bool add_space_prefix = true;
};

} // namespace embedlab
