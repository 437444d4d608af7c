// at::parallel_for, for a file that is compiled with OpenMP.
//
//   #include "embedlab/parallel_for.hpp"
//   at::parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) { ... });
//
// ATen's parallel_for is OpenMP inside ATen's own header (ParallelOpenMP.h): in a file
// compiled without -fopenmp it silently runs as one chunk on one thread, whatever
// at::get_num_threads() says. Include this header (not <ATen/Parallel.h>) and add the
// file to EMBEDLAB_OPENMP_SOURCES in engine/CMakeLists.txt (cli/machine_limits.cpp: its
// properties in cli/CMakeLists.txt); without that the file does not compile.
// tests/layers_test.cpp checks that every source calling parallel_for includes this.
//
// Thread safety: the body runs on several threads at once, one contiguous chunk each
// (the chunks depend on the thread count): it may write only what its own indices own,
// keep its scratch local to the call, and must give results that do not depend on
// where the chunks split. Progress callbacks are called outside it.
#pragma once

#include <ATen/Parallel.h>

#if !defined(_OPENMP) && !defined(EMBEDLAB_PARALLEL_FOR_SERIAL)
#error                                                                                                       \
    "at::parallel_for is serial without -fopenmp: add this file to EMBEDLAB_OPENMP_SOURCES in engine/CMakeLists.txt"
#endif
