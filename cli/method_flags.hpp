// The methods' request fields as command-line flags, generated from the registry
// (method_registry.hpp) and the request's field table (experiment_request.hpp): the
// flag --keep-ratio is the field "keep_ratio" by construction (energy_tokens alone is
// --tokens, its name since issue 20). A method registered at run time gets its flags
// with no CLI change.
//
//   std::set<std::string> valued{"--out"}, switches{"--force"};
//   add_method_flags(valued, switches);            // --rank, --shape, ..., --uniform-ranks
//   Args args("compress", argv, valued, switches);
//   method_flags_into(args, request);              // request.rank = --rank's value, ...
//   method_flag_settings(args, "account", base);   // --rank 64,128: two requests
//
// Thread safety: reads the registry; call after every register_method.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "embedlab/experiment_request.hpp"

namespace embedlab::cli {

// "keep_ratio" -> "--keep-ratio"; "energy_tokens" -> "--tokens".
std::string field_flag(const std::string& field);
// `field`'s flag as `method` reads it: field_flag, but flat's compress_mlp is --mlp.
std::string method_flag(const MethodDescriptor& method, const std::string& field);
// Every registry method's own fields as flags: Bool fields are switches, the rest
// take a value.
void add_method_flags(std::set<std::string>& valued, std::set<std::string>& switches);
// Sets each method field whose flag is given, the value read as the field's type
// ("a,b,c" for a list). A field the request's method does not take is set too, so
// check_request names it ("does not apply to method ..."). InputError for a value
// of the wrong type, naming the flag.
void method_flags_into(const Args& args, CompressionRequest& request);
// Refuses a method field flag the method does not take (even at its default value:
// "compress: --mlp does not apply to method pca") and asks for the fields the CLI
// always asks for when the method takes them (fourier's --mlp: its JSON default is
// linear, but the MLP is the fit's main choice).
void check_method_flags(const Args& args, const std::string& method, const std::string& command);
// check_request's name for a field on the command line: a method field's flag
// ("rank" -> "--rank"), any other field as the request names it ("task_data").
std::string method_field_flag(const std::string& field);

// One request per combination of the method field flags' listed values: a number
// field's flag takes K1,K2,.. and a list field's A1,A2:B1,B2 (account's grammar),
// set on `base` as method_flags_into does. At least one request (base's own fields
// when no flag is given); InputError for more than 4096 combinations.
std::vector<CompressionRequest> method_flag_settings(const Args& args, const std::string& command,
                                                     const CompressionRequest& base);

// The request as the `embedlab-cli compress` line that runs it (issue 41 item 12):
// {"embedlab-cli", "compress", MODEL, "--method", METHOD, ...flags, "--out", OUT_DIR},
// every field request_json writes (those differing from the defaults) as the flag
// compress reads it from: a method field by field_flag (flat's compress_mlp is --mlp),
// and compress's own --tokenizer, --positions, --eval-text, --ctx, --stride, --batch,
// --divergence, --task, --task-data, --task-limit and --seed. Fields compress has no
// flag for (eval_ids, eval_tokens, the LoRA fields lora_rank, lora_steps, train_text;
// seed on an lle run without --knn ivf, which compress does not read) are left out
// and, with `omitted`, named there in request_json's order.
std::vector<std::string> compress_command(const CompressionRequest& request, const std::string& out_dir,
                                          std::vector<std::string>* omitted = nullptr);
// argv as one sh line, each word quoted when it needs it ('it'\''s').
std::string shell_command_line(const std::vector<std::string>& argv);

} // namespace embedlab::cli
