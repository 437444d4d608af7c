// The built-in method families, one line each, in the order the registry lists their
// methods: EmbedLab's one hand-kept list of methods (issue 59). Everything else about a
// family is in its own files, which register it themselves:
//   request_<family>.cpp (torch-free): EMBEDLAB_BUILTIN_ROWS(<family>, .methods = {..},
//       .forms = {..}) -- its registry rows and stored forms (request_support.hpp);
//   table_<family>.cpp: EMBEDLAB_BUILTIN_TABLES(<family>, .methods = {..}, .rebuilds = {..})
//       -- its TableMethods and its forms' rebuilds (table_method_support.hpp).
// FAMILY(name) has both halves; ROWS_ONLY(name) a registry row and no table method (flat).
// A list file rather than static registrar objects: the engine is a static library, and
// a linker drops the objects nobody references (the fuzzers and the Python module too).
#pragma once

#define EMBEDLAB_BUILTIN_METHOD_FAMILIES(FAMILY, ROWS_ONLY)                                                  \
    FAMILY(low_rank)                                                                                         \
    FAMILY(tensor_train)                                                                                     \
    FAMILY(tucker)                                                                                           \
    FAMILY(partial_sparse)                                                                                   \
    FAMILY(fourier)                                                                                          \
    FAMILY(quant)                                                                                            \
    FAMILY(aq)                                                                                               \
    ROWS_ONLY(flat)
