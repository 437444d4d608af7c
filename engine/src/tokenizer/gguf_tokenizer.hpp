// The tokenizer a GGUF file carries in its tokenizer.ggml.* metadata: llama.cpp's
// byte-level BPE (tokenizer.ggml.model "gpt2": tokens, token types, merges and the
// pre-tokenizer named by tokenizer.ggml.pre: GPT-2's, SmolLM's, Llama 3's or Qwen2's
// split, gguf_bpe_pre_tokenizers() lists the names), WordPiece ("bert") and SentencePiece
// ("llama", which io/gguf.cpp also reads with the model), each encoding as the
// Hugging Face tokenizer the file was converted from.
//
//   auto tok = embedlab::tokenizer_impl::load_gguf_tokenizer("tinygpt2.gguf");
//   tok->encode("Once upon a time");   // the ids of tinygpt2's tokenizer.json
//
// Thread safety: reentrant; the tokenizer returned is immutable (tokenizer.hpp).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "embedlab/tokenizer.hpp"
#include "io/gguf_parser.hpp"

namespace embedlab::tokenizer_impl {

// Maps and parses `gguf` and reads its vocabulary. Throws InputError "<file>: ..."
// naming the key at fault: no tokenizer.ggml.tokens, a tokenizer.ggml.model other
// than gpt2, bert or llama, a token count other than <arch>.vocab_size, a gpt2 vocabulary without merges,
// with merges naming tokens it does not list, with an unknown or missing tokenizer.ggml.pre, or lists whose
// lengths disagree.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& gguf);
// The same for a file already parsed; `file` names it in messages.
std::unique_ptr<Tokenizer> make_gguf_tokenizer(const io::GgufFile& gguf, const std::filesystem::path& file);

// llama.cpp's tokenizer.ggml.pre values a gpt2 vocabulary may name, in the order
// messages list them.
std::vector<std::string> gguf_bpe_pre_tokenizers();

} // namespace embedlab::tokenizer_impl
