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

} // namespace embedlab
