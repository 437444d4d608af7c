// compress --method trim [--then METHOD ... --then-store TYPE]: a chain run as one
// request (engine: pipeline.hpp).
//
//   if (peek_option(argv, "--method") == "trim") return compress_chain(argv);
//
// Thread safety: a command, run on the main thread.
#pragma once

#include <string>
#include <vector>

#include "args.hpp"
#include "embedlab/trim.hpp"

namespace embedlab::cli {

// trim's budget and files from --freq-text, --keep | --coverage, --keep-tokens,
// --eval-text, --ctx, --force (command_trim.cpp).
TrimOptions trim_options(const Args& args);

int compress_chain(const std::vector<std::string>& argv); // command_compress_chain.cpp

} // namespace embedlab::cli
